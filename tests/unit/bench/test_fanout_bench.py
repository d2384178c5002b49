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
