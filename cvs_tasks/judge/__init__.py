"""Judgements (PASS/FAIL/RECORD) made from what ``metrics`` read, next to where verdicts are used.

Pure, like ``metrics`` (data in, values out): threshold verdicts per metric, the loss-curve slope,
scaling efficiency, checkpoint step and loss continuity, convergence against a target, the
backend rule for Primus memory use, and the reference's (ROCm CVS) aggregation of the run metrics
shown next to ours.
"""
