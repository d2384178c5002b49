"""The run directory (ledger): manifest, per-stage records, pulled-back logs."""

from cvs_tasks.run.records import (
    PER_COMBO_STAGES,
    STAGES,
    MetricRow,
    NodeOutcome,
    StageRecord,
    combo_dir,
    test_name,
)
from cvs_tasks.run.rundir import RunDir, write_json_atomic

__all__ = [
    "PER_COMBO_STAGES",
    "STAGES",
    "MetricRow",
    "NodeOutcome",
    "RunDir",
    "StageRecord",
    "combo_dir",
    "test_name",
    "write_json_atomic",
]
