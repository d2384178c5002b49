"""Entry point of the builders: JobSpec -> the backend's LaunchPlan, and its dry-run rendering."""

from __future__ import annotations

from cvs_tasks import backends
from cvs_tasks.identifiers import identifier_problem
from cvs_tasks.jobs.shell import comment
from cvs_tasks.jobs.spec import JobSetupError, JobSpec, LaunchPlan


def build_launch(job: JobSpec, *, experiment: str | None = None) -> LaunchPlan:
    """Build every node's wrapper and launch command; raises JobSetupError when none can be built.

    ``experiment`` is the experiment file the backend found in the image (``Backend.experiment``;
    Primus: the YAML ``yaml_check_command`` found, relative to primus_root); without it the
    backend's first choice is used (fine for a dry run).
    """
    for kind, value in (("label", job.label), ("run id", job.run_id)):
        problem = identifier_problem(kind, value)
        if problem:  # names reach node paths and scripts: refuse, never sanitise silently
            raise JobSetupError(f"job {value!r}: {problem}", field=kind)
    if job.nnodes < 1:
        raise JobSetupError(f"job '{job.label}' has no nodes (nnodes={job.nnodes}); "
                            f"the cluster file lists no hosts", field="node_dict")
    if job.iterations < 1:
        raise JobSetupError(f"job '{job.label}' has {job.iterations} training iterations; set "
                            f"train_params.training_iterations to a positive number",
                            field="train_params.training_iterations")
    return backends.get(job.backend).build_launch(job, experiment)


def dry_run_by_node(plan: LaunchPlan) -> list[list[str]]:
    """Per node, the lines a dry run prints: prepare commands, the script to write, the launch."""
    rendered: list[list[str]] = []
    for node in plan.nodes:
        rendered.append([
            f"# node {node.rank}: prepare (on the host)",
            *plan.prepare,
            comment(f"node {node.rank}: write {node.script_path} (mode 0700)"),
            *node.script_text.rstrip("\n").split("\n"),
            f"# node {node.rank}: launch (in the container; on the node itself for runtime host)",
            node.launch_command,
        ])
    return rendered


def render_dry_run(plan: LaunchPlan) -> list[str]:
    """The whole plan as printable lines: a heading, the warnings, then every node's block."""
    lines = [comment(f"{plan.backend} job '{plan.label}', logs under {plan.combo_log_dir}")]
    lines += [comment(f"warning: {w}") for w in plan.warnings]
    for block in dry_run_by_node(plan):
        lines += ["", *block]
    return lines
