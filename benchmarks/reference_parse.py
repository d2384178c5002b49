"""A transcription of the reference's log handling, to time it on the same log as ours.

ROCm/cvs (docs/reference_suite.md#error-scan-and-polling, docs/reference_suite.md#run-metrics)
reads the last node's whole log as text and, once a poll finds it complete, runs in this order:
the error scan (three case-sensitive alternations over the whole text), the completion test
(``iteration N / N``), the NaN test (four case-insensitive patterns), then
``_parse_training_results``: the four summary patterns on the last 15 lines, falling back to the
per-step patterns over the whole text (case-insensitive), dropping the first value and taking the
mean. This module redoes exactly that work, written
here from the behaviour description (no reference code is copied); it exists only to be timed.
"""

from __future__ import annotations

import re
from pathlib import Path

_ERRORS = (
    re.compile(r"NCCL ERROR|NCCL timeout|ncclRemoteError: A call failed possibly due to a network error|NCCL error:"),
    re.compile(r"HW Exception by GPU|GPU Hang|Uncorrectable error|GPU Reset"),
    re.compile(r"torch\.distributed\.elastic\.multiprocessing\.errors"),
)
_NAN = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"throughput per GPU(?:\s*\([^)]*\))?\s*:\s+(?:NaN|Inf)", r"throughput per GPU:\s+(?:NaN|Inf)",
    r"tokens/GPU/s:\s+(?:NaN|Inf)", r"mem usages:\s+(?:NaN|Inf)"))
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_SUMMARY = {
    "throughput_per_gpu": r"throughput per GPU:\s+" + _NUM,
    "tokens_per_gpu": r"tokens/GPU/s:\s+" + _NUM,
    "mem_usage": r"mem usages:\s+" + _NUM,
    "elapsed_time_per_iteration": r"elapsed time per iteration:\s+" + _NUM,
}
_PER_STEP = {
    "throughput_per_gpu": r"throughput per GPU\s*\([^)]*\)\s*:\s*" + _NUM,
    "tokens_per_gpu": r"tokens/GPU/s\s*:\s*" + _NUM,
    "mem_usage": r"mem usages:\s*" + _NUM,
    "elapsed_time_per_iteration": r"elapsed time per iteration\s*\([^)]*\)\s*:\s*" + _NUM,
}


def parse(path: str | Path, iterations: int) -> dict:
    """The reference's verdict inputs for a finished log: errors, completion, NaN, metrics."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    errors = [p.pattern for p in _ERRORS if p.search(text)]
    complete = re.search(rf"iteration\s+{iterations}\s*/\s*{iterations}\b", text) is not None
    nan = complete and any(p.search(text) for p in _NAN)
    tail = "\n".join(text.splitlines()[-15:])
    results: dict[str, list[str]] = {}
    for name, pattern in _SUMMARY.items():
        found = re.findall(pattern, tail, re.IGNORECASE)
        if not found:
            found = re.findall(_PER_STEP[name], text, re.IGNORECASE)
            if len(found) > 1:
                values = [float(v) for v in found[1:]]
                found = [str(sum(values) / len(values))]
        results[name] = found
    return {"errors": errors, "complete": complete, "nan": nan, "results": results}
