"""cvs-tasks: cluster validation for AMD Instinct GPU clusters.

Layers, top to bottom: tasks -> lifecycle -> plan -> jobs -> remote -> metrics -> report ->
config -> run. Imports only point down.
"""

__version__ = "0.1.0"
