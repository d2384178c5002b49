"""The snapshot command run by a real bash on this machine (a counters tree in a temp folder, a
`dmesg` on PATH), parsed, and judged: what a node's two snapshots turn into."""

import os
import subprocess
from pathlib import Path

import pytest

from cvs_tasks.health import judge_health, node_health, parse_snapshot
from cvs_tasks.remote.health import snapshot_command

GPU_RESET = "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!"


def make_tree(root: Path, errors: int) -> None:
    port = root / "bnxt_re1" / "ports" / "1"
    for kind, values in (("counters", {"link_error_recovery": errors, "port_rcv_data": 100 + errors}),
                         ("hw_counters", {"rx_roce_discards": 0})):
        (port / kind).mkdir(parents=True, exist_ok=True)
        for name, value in values.items():
            (port / kind / name).write_text(f"{value}\n")


@pytest.fixture
def node(tmp_path):
    """A fake node: counters tree, kernel log file, and a PATH whose `dmesg` prints that file."""
    tree, kmsg, bin_dir = tmp_path / "infiniband", tmp_path / "kmsg", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dmesg").write_text(f"#!/bin/sh\ncat {kmsg}\n")
    (bin_dir / "dmesg").chmod(0o755)
    kmsg.write_text("[    0.000000] Linux version 6.8.0 (stand-in)\n[  100.500000] amdgpu: old GPU reset begin!\n")
    make_tree(tree, 0)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")

    def snap(start=None):
        out = subprocess.run(["bash", "-c", snapshot_command(start, ib_root=str(tree))], env=env,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return parse_snapshot(out.stdout)

    return tree, kmsg, snap


def test_the_first_snapshot_reads_counters_uptime_and_the_kernel_log_mark(node):
    tree, kmsg, snap = node
    before = snap()
    assert before.problem is None and before.counter_source == "sysfs"
    assert before.uptime and before.uptime > 0
    assert before.klog_source == "dmesg" and before.klog_mark == pytest.approx(100.5)
    assert len(before.counters) == 3 and before.klog_lines == []


def test_link_errors_and_a_gpu_reset_during_the_job_fail_with_node_device_counter_delta_and_line(node):
    tree, kmsg, snap = node
    before = snap()
    make_tree(tree, 3)
    with kmsg.open("a") as fh:
        fh.write(f"[  200.250000] {GPU_RESET}\n[  200.300000] [drm] benign line\n")
    after = snap(before.klog_mark)
    assert after.klog_lines == [f"[  200.250000] {GPU_RESET}", "[  200.300000] [drm] benign line"]
    net, kernel = judge_health([node_health("10.0.0.3", before, after)], enforce_network=True)
    assert net.status == "FAIL" and net.count == 1
    assert net.rows[0] | {} == {"status": "FAIL", "node": "10.0.0.3", "device": "bnxt_re1", "port": "1",
                                "counter": "link_error_recovery", "kind": "counters", "before": 0, "after": 3,
                                "delta": 3}
    assert "node 10.0.0.3: bnxt_re1 port 1 link_error_recovery +3 (0 -> 3)" in net.summary
    assert kernel.status == "FAIL" and kernel.rows[0]["line"] == f"[  200.250000] {GPU_RESET}"
    assert kernel.rows[0]["node"] == "10.0.0.3" and kernel.rows[0]["kind"] == "gpu_reset"


def test_unenforced_growth_is_a_warning_and_a_quiet_job_passes_both_checks(node):
    tree, kmsg, snap = node
    before = snap()
    quiet = snap(before.klog_mark)
    net, kernel = judge_health([node_health("n1", before, quiet)], enforce_network=True)
    assert (net.status, kernel.status) == ("PASS", "PASS")
    assert net.summary == "no RDMA error counter grew (1 port(s) on 1 node(s))"
    make_tree(tree, 5)
    net, _ = judge_health([node_health("n1", before, snap(before.klog_mark))], enforce_network=False)
    assert net.status == "WARN" and "verify_network_errors is false" in net.summary


def test_an_empty_kernel_log_is_not_read_as_clean(node):
    tree, kmsg, snap = node
    kmsg.write_text("")
    empty = snap()  # the stand-in prints nothing; the real dmesg/journalctl behind it may answer
    assert empty.klog_source != "dmesg"


def test_an_unreadable_kernel_log_is_a_warning_never_a_pass(node):
    tree, kmsg, snap = node
    before = snap()
    after = parse_snapshot("@@cvs-health 1\n@@uptime 5\n@@counters none\n"
                           "@@klog-error dmesg: read kernel buffer failed: Operation not permitted\n@@end\n")
    _, kernel = judge_health([node_health("n2", before, after)], enforce_network=True)
    assert kernel.status == "WARN" and "Operation not permitted" in kernel.summary


def test_a_failed_or_cut_snapshot_names_the_node_and_why():
    cut = parse_snapshot("@@cvs-health 1\n@@uptime 5\n@@counters sysfs\nmlx5_0/ports/1/counters/x_err:1\n")
    assert cut.problem == "the health snapshot output was cut short"
    ok = parse_snapshot("@@cvs-health 1\n@@uptime 5\n@@counters none\n@@klog dmesg\n@@klog-mark 4.0\n@@end\n")
    net, kernel = judge_health([node_health("n3", ok, cut)], enforce_network=True)
    assert net.status == "WARN" and "node n3: the health snapshot output was cut short" in net.summary
    assert kernel.status == "WARN"


def test_no_rdma_device_anywhere_skips_the_counter_check():
    snap = "@@cvs-health 1\n@@uptime 5\n@@counters rdma\n@@klog dmesg\n@@klog-mark 4.0\n@@end\n"
    net, kernel = judge_health([node_health("n1", parse_snapshot(snap), parse_snapshot(snap))], enforce_network=True)
    assert net.status == "SKIPPED" and kernel.status == "PASS"


def test_rows_are_capped_per_node_but_the_count_stays_exact():
    lines = "".join(f"[ {10 + i}.0] amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153)\n"
                    for i in range(30))
    before = parse_snapshot("@@cvs-health 1\n@@uptime 5\n@@counters none\n@@klog dmesg\n@@klog-mark 4.0\n@@end\n")
    after = parse_snapshot(f"@@cvs-health 1\n@@uptime 50\n@@counters none\n@@klog dmesg\n{lines}@@end\n")
    _, kernel = judge_health([node_health("n1", before, after)], enforce_network=True)
    assert kernel.count == 30 and len(kernel.rows) == 20 and "and 27 more" in kernel.summary


def test_a_kernel_log_without_timestamps_cannot_bound_the_window():
    before = parse_snapshot("@@cvs-health 1\n@@uptime 5\n@@counters none\n@@klog dmesg\n@@klog-mark \n@@end\n")
    after = parse_snapshot("@@cvs-health 1\n@@uptime 9\n@@counters none\n@@klog dmesg\n@@end\n")
    _, kernel = judge_health([node_health("n4", before, after)], enforce_network=True)
    assert kernel.status == "WARN" and "node n4: the kernel log has no timestamped line" in kernel.summary
