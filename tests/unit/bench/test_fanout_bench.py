from benchmarks.fanout import NamePerNode
from cvs_tasks.remote import Node
from cvs_tasks.remote.testing import ScriptedHosts


def test_each_node_gets_its_own_container_name_in_every_command():
    inner = ScriptedHosts([Node("a", "127.0.0.100", rank=0), Node("b", "127.0.0.101", rank=1)])
    inner.expect("docker run -d --name cvs_bench_fanout-n0 --label cvs.name=cvs_bench_fanout-n0 img", on="a")
    inner.expect("docker run -d --name cvs_bench_fanout-n1 --label cvs.name=cvs_bench_fanout-n1 img", on="b")
    inner.expect("docker rm -f cvs_bench_fanout-n1 cvs_bench_fanout_other", on="b")
    hosts = NamePerNode(inner, "cvs_bench_fanout")
    hosts.run("docker run -d --name cvs_bench_fanout --label cvs.name=cvs_bench_fanout img", timeout=5)
    hosts.subset([1]).run("docker rm -f cvs_bench_fanout cvs_bench_fanout_other", timeout=5)
    inner.assert_done()


def test_process_tree_cpu_counts_a_child_that_burns_cpu():
    import subprocess
    import sys

    from benchmarks.fanout import tree_cpu_seconds

    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\nimport sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        deadline = __import__("time").monotonic() + 20
        while tree_cpu_seconds([child.pid]) < 0.25 and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.05)
        assert tree_cpu_seconds([child.pid]) >= 0.25
        assert tree_cpu_seconds([2**22 + 12345]) == 0.0  # a pid that does not exist
    finally:
        child.communicate(b"")


def test_lower_bound_is_the_larger_of_one_node_and_the_cpu_the_nodes_need():
    from benchmarks.fanout import lower_bound

    busy = {"wall": 6.0, "node_cpu": 10.0, "harness_cpu": 1.0, "machine_cpu": 11.0}
    bound, why = lower_bound(busy, one_node_wall=0.3)
    assert bound == __import__("pytest").approx(11.0 / (__import__("os").cpu_count() or 1))
    assert "nodes' own CPU 10.00s" in why
    idle = {"wall": 0.5, "node_cpu": 0.05, "harness_cpu": 0.01, "machine_cpu": 0.06}
    assert lower_bound(idle, one_node_wall=0.4)[0] == 0.4


def test_the_harness_cpu_per_node_is_reported_and_judged_against_one_plain_exec():
    from benchmarks.fanout import harness_rows

    shown, judged = harness_rows(32, harness_cpu_s=0.0992, plain_exec_cpu_s=0.00124, what="check")
    assert shown["name"] == "fanout.check_warm.harness_cpu_per_node[N=32]"
    assert (shown["value"], shown["target"], shown["status"]) == (3.1, "reported", "PASS")
    assert judged["name"] == "fanout.check_warm.harness_cpu_vs_plain_exec[N=32]"
    assert judged["value"] == 2.5 and judged["target"] == "<= 10" and judged["status"] == "PASS"
    slow = harness_rows(32, harness_cpu_s=0.32, plain_exec_cpu_s=0.00089, what="check")[1]
    assert slow["status"] == "MISS"  # 10 ms per node where a plain exec costs 0.89 ms: 11.2x
    assert harness_rows(32, 0.0992, None, "check")[1]["status"] == "MISS"
