"""The dry-run rendering shows, per node, exactly what would be run."""

from __future__ import annotations

from jobs_factory import make_job

from cvs_tasks.jobs import build_launch, dry_run_by_node, render_dry_run


def test_dry_run_lists_prepare_script_and_launch_per_node():
    plan = build_launch(make_job(nnodes=2, distributed=True, precision="INT4"))
    blocks = dry_run_by_node(plan)
    assert len(blocks) == 2
    for node, block in zip(plan.nodes, blocks):
        assert block[0] == f"# node {node.rank}: prepare (on the host)"
        n = len(plan.prepare)
        assert block[1:1 + n] == plan.prepare
        assert block[1 + n] == f"# node {node.rank}: write {node.script_path} (mode 0700)"
        assert block[2 + n:-2] == node.script_text.rstrip("\n").split("\n")
        assert block[-1] == node.launch_command

    lines = render_dry_run(plan)
    assert lines[0] == (
        "# megatron job 'MBS=4,GBS=128,PRECISION=FP8', logs under "
        "/home/alice/LOGS/megatron/megatron-logs/MBS_4_GBS_128_PRECISION_FP8")
    assert lines[1] == f"# warning: {plan.warnings[0]}"
    assert lines[2] == ""
    assert lines[3:3 + len(blocks[0])] == blocks[0]
    assert len(lines) == 3 + len(blocks[0]) + 1 + len(blocks[1])
