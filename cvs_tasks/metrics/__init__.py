"""Pure log reading: parse training logs, find error signatures, read checkpoint I/O times.

No SSH, no clock; ``parser.parse_file`` and ``parser.line_heads`` are the only file reads. Judging what was read
(thresholds, loss curve, scaling, checkpoint continuity) is in ``cvs_tasks.judge``.

The names below load on first use, so importing ``metrics.catalog`` (the config schema and the
judge do) does not load the parser.
"""

from importlib import import_module

_EXPORTS = {
    "warmup_cutoff": "runstats", "CheckpointTimes": "checkpoint", "checkpoint_io_times": "checkpoint",
    "ModelDims": "flops", "flops_per_token": "flops", "model_dims": "flops", "recompute_tflops": "flops",
    "Iteration": "iteration", "parse_file": "parser", "LogParser": "parser", "SIGNATURES": "signatures",
    "ErrorHit": "signatures", "Signature": "signatures", "root_cause": "signatures", "scan_lines": "signatures",
    "scan_text": "signatures",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
