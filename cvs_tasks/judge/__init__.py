"""Judgements made from a combo's recorded training data, next to where verdicts are used.

Pure, like ``metrics`` (data in, values out), but kept apart from the log parsing so that package
stays small: convergence against a target, the backend rule for Primus memory use, and the
reference's (ROCm CVS) aggregation of the run metrics shown next to ours.
"""
