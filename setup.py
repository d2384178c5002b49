"""Build hook for the one native part: the iteration-line scanner (cvs_tasks/metrics/_itscan.c).

Everything else is declared in pyproject.toml. The extension is optional: without a C compiler
the install still succeeds and the parser uses its pure-Python path (same results, slower);
``invoke bench`` and ``cvs_tasks.metrics.native.AVAILABLE`` tell which one is in use.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cvs_tasks.metrics._itscan", ["cvs_tasks/metrics/_itscan.c"],
                             optional=True, extra_compile_args=["-O2", "-Wall", "-Wextra",
                                                                "-Wno-unused-parameter"])])
