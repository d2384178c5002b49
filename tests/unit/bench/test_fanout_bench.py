from benchmarks.fanout import NamePerNode
from cvs_tasks.remote import Hosts, Node
from cvs_tasks.remote.results import RawResult


class Recorder(Hosts):
    def __init__(self, nodes):
        super().__init__(nodes)
        self.seen = []

    def _exec_many(self, commands, stdins, timeout):
        self.seen.append(list(commands))
        return [RawResult(0, b"", b"") for _ in commands]

    def subset(self, indices):
        view = Recorder([self.nodes[i] for i in indices])
        view.seen = self.seen
        return view


def test_each_node_gets_its_own_container_name_in_every_command():
    inner = Recorder([Node("a", "127.0.0.100", rank=0), Node("b", "127.0.0.101", rank=1)])
    hosts = NamePerNode(inner, "cvs_bench_fanout")
    hosts.run("docker run -d --name cvs_bench_fanout --label cvs.name=cvs_bench_fanout img", timeout=5)
    assert inner.seen[-1] == [
        "docker run -d --name cvs_bench_fanout-n0 --label cvs.name=cvs_bench_fanout-n0 img",
        "docker run -d --name cvs_bench_fanout-n1 --label cvs.name=cvs_bench_fanout-n1 img",
    ]
    hosts.subset([1]).run("docker rm -f cvs_bench_fanout cvs_bench_fanout_other", timeout=5)
    assert inner.seen[-1] == ["docker rm -f cvs_bench_fanout-n1 cvs_bench_fanout_other"]


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
