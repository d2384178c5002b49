"""PollingFollow (Slurm's follow until its follower exists): the same events from one read per node per poll."""

from __future__ import annotations

from cvs_tasks.remote import Hosts, LocalHosts, Node
from cvs_tasks.remote.follow import Delta, Exited, FollowOptions, FollowTarget, Lost
from cvs_tasks.remote.follow_poll import PollingFollow
from cvs_tasks.remote.results import RawResult


def test_reads_past_the_offset_in_capped_pieces_then_the_exit(tmp_path):
    log, ex = tmp_path / "l", tmp_path / "e"
    log.write_bytes(bytes(range(256)) * 4)
    ex.write_text("0\n")
    hosts = LocalHosts([Node("a", "localhost")])
    follow = PollingFollow(hosts, [FollowTarget(str(log), str(ex), 100)], FollowOptions(poll_s=0.01, frame_bytes=400))
    events = []
    while not any(isinstance(e, Exited) for e in events):
        events += follow.events(1.0)
    data = b"".join(e.data for e in events if isinstance(e, Delta))
    assert data == log.read_bytes()[100:] and events[-1] == Exited(0, 0, 1024)
    assert follow.polls == 4  # 400 + 400 + 124 bytes, then the read that finds nothing more


class Refusing(Hosts):
    def _exec_many(self, commands, stdins, timeout):
        return [RawResult(None, b"", b"", "connection refused") for _ in commands]

    def subset(self, indices):
        return Refusing([self.nodes[i] for i in indices])


def test_a_failed_read_is_lost_and_a_restart_reads_again(tmp_path):
    hosts = Refusing([Node("n0", "n0")])
    follow = PollingFollow(hosts, [FollowTarget("/l", "/e")], FollowOptions(poll_s=0.01))
    [lost] = follow.events(1.0)
    assert isinstance(lost, Lost) and lost.error == "node n0: reading /l: connection refused"
    assert follow.events(0.05) == []  # nothing is read from a lost node
    follow.restart(0, 0)
    assert isinstance(follow.events(1.0)[0], Lost)


def test_a_log_that_shrank_is_lost_with_the_old_words(tmp_path):
    log = tmp_path / "l"
    log.write_bytes(b"abc")
    follow = PollingFollow(LocalHosts([Node("a", "a")]), [FollowTarget(str(log), str(tmp_path / "e"), 10)],
                           FollowOptions(poll_s=0.01))
    [lost] = follow.events(1.0)
    assert "shrank to 3 bytes below the read offset 10" in lost.error
