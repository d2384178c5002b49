"""Pure log reading: parse training logs, find error signatures, read checkpoint I/O times.

No SSH, no clock; ``logfile`` is the only module that reads a file. Judging what was read
(thresholds, loss curve, scaling, checkpoint continuity) is in ``cvs_tasks.judge``.
"""

from cvs_tasks.metrics.aggregate import warmup_cutoff
from cvs_tasks.metrics.checkpoint import CheckpointTimes, checkpoint_io_times
from cvs_tasks.metrics.flops import ModelDims, flops_per_token, model_dims, recompute_tflops
from cvs_tasks.metrics.iteration import Iteration
from cvs_tasks.metrics.logfile import parse_file
from cvs_tasks.metrics.parser import LogParser
from cvs_tasks.metrics.signatures import (
    SIGNATURES,
    ErrorHit,
    Signature,
    root_cause,
    scan_lines,
    scan_text,
)

__all__ = [
    "warmup_cutoff", "CheckpointTimes", "checkpoint_io_times", "ModelDims",
    "flops_per_token", "model_dims", "recompute_tflops", "Iteration", "parse_file", "LogParser",
    "SIGNATURES", "ErrorHit", "Signature", "root_cause", "scan_lines", "scan_text",
]
