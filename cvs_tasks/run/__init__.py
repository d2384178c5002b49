"""The run directory (ledger): manifest, per-stage records, pulled-back logs."""

from cvs_tasks.run.records import (
    MetricRow,
    NodeOutcome,
    StageRecord,
    combo_dir,
    test_name,
)
from cvs_tasks.run.rundir import RunDir, write_json_atomic

__all__ = [
    "MetricRow",
    "NodeOutcome",
    "RunDir",
    "StageRecord",
    "combo_dir",
    "test_name",
    "write_json_atomic",
]
