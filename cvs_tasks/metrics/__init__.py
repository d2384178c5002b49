"""Pure log and metric logic: parse training logs, find error signatures, judge metrics.

No SSH, no clock; ``logfile`` is the only module that reads a file.
"""

from cvs_tasks.metrics.aggregate import RUN_METRICS, warmup_cutoff
from cvs_tasks.metrics.checkpoint import (
    CheckpointResult, CheckpointTimes, checkpoint_continuity, checkpoint_io_times,
    last_checkpoint_step, losses_by_step,
)
from cvs_tasks.metrics.flops import ModelDims, flops_per_token, model_dims, recompute_tflops
from cvs_tasks.metrics.iteration import Iteration
from cvs_tasks.metrics.logfile import parse_file
from cvs_tasks.metrics.loss_curve import LossCurveResult, fit_loss_curve, sample_curve
from cvs_tasks.metrics.parser import LogParser
from cvs_tasks.metrics.progress import is_stalled
from cvs_tasks.metrics.scaling import scaling_efficiency
from cvs_tasks.metrics.signatures import (
    SIGNATURES, ErrorHit, Signature, root_cause, scan_lines, scan_text,
)
from cvs_tasks.metrics.verdict import METRIC_UNITS, evaluate, format_expected, unit_for, violations

__all__ = [
    "RUN_METRICS", "warmup_cutoff", "CheckpointResult", "CheckpointTimes", "checkpoint_continuity",
    "checkpoint_io_times", "last_checkpoint_step", "losses_by_step", "ModelDims",
    "flops_per_token", "model_dims", "recompute_tflops", "Iteration",
    "parse_file", "LossCurveResult", "fit_loss_curve", "sample_curve", "LogParser",
    "is_stalled", "scaling_efficiency", "SIGNATURES", "ErrorHit", "Signature", "root_cause", "scan_lines",
    "scan_text", "METRIC_UNITS", "evaluate", "format_expected", "unit_for", "violations",
]
