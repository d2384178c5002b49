"""What ran is what was asked: the trainer's own arguments dump read back and compared with the plan.

`effective` turns a dump into a typed EffectiveConfig; `compare` checks it against what the job
asked for, names the likely cause of each difference from the launcher's known contract, and
stores the result in the stage record. Pure: dumps and plans in, records out; the watcher and the
lifecycle call them.
"""

from cvs_tasks.verify.compare import Asked, ConfigCheck, Mismatch, asked_from_job, check_effective
from cvs_tasks.verify.effective import EffectiveConfig, effective_from_arguments

__all__ = ["Asked", "ConfigCheck", "EffectiveConfig", "Mismatch", "asked_from_job", "check_effective",
           "effective_from_arguments"]
