"""Jobs: a resolved JobSpec in, the exact scripts and commands every node runs out.

The shipped backends live here, each whole in one module next to the launch it builds
(``megatron.py``, ``primus.py``; registered by ``cvs_tasks.backends``); the rest is what every
backend's jobs share: the spec and its entry point (``spec``), node paths (``layout``), shell
fragments and starting a wrapper (``shell``), launch contracts and the launcher probe
(``contracts``), tokenizer, NIC set-up, checkpoint commands, stopping a job (``cleanup``) and the
run's claims on a node (``nodedir``, ``nodelock``). Pure (no I/O); the lifecycle runs the results
through the remote layer; ``lifecycle.watch`` follows a started job.
"""

from cvs_tasks.jobs.checkpoint import (
    checkpoint_dir,
    checkpoint_listing_command,
    cleanup_command,
    last_checkpoint_step,
    latest_checkpoint_check_command,
    parse_latest_checkpoint,
    save_iters_problem,
)
from cvs_tasks.jobs.cleanup import (
    gpu_pids_command,
    kill_pids_command,
    parse_showpids,
    stop_job_command,
)
from cvs_tasks.jobs.nic import (
    check_hca,
    hca_regex,
    needs_broadcom_setup,
    nic_setup_command,
    nic_type_for,
)
from cvs_tasks.jobs.primus import (
    checkpoint_root,
    experiment_header,
    missing_yaml_error,
    missing_yaml_message,
    pick_existing_yaml,
    primus_yaml_candidates,
    resume_load_dir,
    yaml_check_command,
)
from cvs_tasks.jobs.spec import (
    JobSetupError,
    JobSpec,
    LaunchPlan,
    NodeLaunch,
    build_launch,
    dry_run_by_node,
    render_dry_run,
)
from cvs_tasks.jobs.tokenizer import (
    local_tokenizer_path,
    needs_local_tokenizer,
    tokenizer_download_command,
)

__all__ = [
    "JobSetupError",
    "JobSpec",
    "LaunchPlan",
    "NodeLaunch",
    "build_launch",
    "check_hca",
    "checkpoint_dir",
    "checkpoint_listing_command",
    "cleanup_command",
    "dry_run_by_node",
    "gpu_pids_command",
    "hca_regex",
    "kill_pids_command",
    "last_checkpoint_step",
    "latest_checkpoint_check_command",
    "local_tokenizer_path",
    "missing_yaml_error",
    "missing_yaml_message",
    "needs_broadcom_setup",
    "needs_local_tokenizer",
    "nic_setup_command",
    "nic_type_for",
    "parse_latest_checkpoint",
    "parse_showpids",
    "checkpoint_root",
    "experiment_header",
    "pick_existing_yaml",
    "primus_yaml_candidates",
    "render_dry_run",
    "resume_load_dir",
    "save_iters_problem",
    "stop_job_command",
    "tokenizer_download_command",
    "yaml_check_command",
]
