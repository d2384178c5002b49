"""The watcher, driven by a scripted fake node set and a fake clock: what ends a watch, and why."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cvs_tasks.lifecycle.watch import Watcher, WatchSettings, WatchTarget
from cvs_tasks.metrics import LogParser
from cvs_tasks.remote.testing import ScriptedHosts


def iteration(step: int, total: int, loss: float = 9.0) -> str:
    return (
        f" [2026-09-24 09:43:{step % 60:02d}] iteration {step:8d}/{total:8d} | consumed samples: {step * 16:12d} | "
        f"elapsed time per iteration (ms): 650.0 | mem usages: 0.5000 | throughput per GPU (TFLOP/s/GPU): 400.0 | "
        f"learning rate: 1.000000E-04 | global batch size:    16 | lm loss: {loss:.6E} | loss scale: 1.0 | "
        f"grad norm: 2.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Node:
    """What one node's log does: ``script`` is appended one chunk per poll (one look of the node's
    follower); the exit status shows from poll ``exit_after`` on; an unreachable node's follower
    never starts; ``drops``: the follower dies at these polls."""

    script: list[str] = field(default_factory=list)
    exit_after: int | None = None
    exit_code: int = 0
    unreachable: bool = False
    complete: bool = True  # every chunk must have been read by the end of the watch
    drops: tuple[int, ...] = ()


class FakeStop(threading.Event):
    """Event whose wait advances the fake clock instead of sleeping."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout=None):
        self.clock.now += timeout or 0
        return self.is_set()


def watch(nodes: list[Node], iterations: int = 4, tmp_path=None, **settings):
    """Watch scripted nodes n0, n1, ...; returns the outcome, the events, the clock and each node's log."""
    clock = Clock()
    events: list = []
    stop = FakeStop(clock)
    hosts = ScriptedHosts([f"n{i}" for i in range(len(nodes))], clock=clock, sleep=stop.wait)
    logs = [hosts.expect_read(f"/logs/out-node{i}/training.log", node.script,
                              exit_code=node.exit_code if node.exit_after is not None else None,
                              exit_after=node.exit_after, complete=node.complete,
                              error="connection refused" if node.unreachable else None, drops=node.drops,
                              on=f"n{i}")[0]
            for i, node in enumerate(nodes)]
    targets = [
        WatchTarget(i, f"n{i}", f"/logs/out-node{i}/training.log", f"/s/node{i}.exit",
                    (tmp_path / f"node{i}.log") if tmp_path else None)
        for i in range(len(nodes))
    ]
    w = Watcher(
        hosts,
        targets,
        iterations=iterations,
        settings=WatchSettings(**{"poll_interval_s": 1.0, "stall_timeout_s": 30, "startup_timeout_s": 60, **settings}),
        parser_factory=lambda: LogParser(seq_length=8192, world_size=8, global_batch_size=16),
        listener=events.append,
        stage="training",
        combo="C",
        stop=stop,
        clock=clock,
    )
    outcome = w.run()
    hosts.assert_done()
    return outcome, events, clock, logs


def test_completion_ends_the_watch_when_the_job_exits(tmp_path):
    node = Node(script=[iteration(1, 4), iteration(2, 4) + iteration(3, 4), iteration(4, 4)], exit_after=3)
    outcome, events, clock, [log] = watch([node], tmp_path=tmp_path)
    assert outcome.ok and outcome.status == "completed"
    assert outcome.reporting.last_step == 4
    assert (tmp_path / "node0.log").read_bytes() == log.content  # the pulled-back copy is exact
    assert log.sent == len(log.content)  # every byte travelled once
    assert any(getattr(e, "state", None) == "done" for e in events)


def test_a_fatal_signature_fails_the_watch_in_the_poll_that_reads_it():
    oom = ("[rank5]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB. "
           "GPU 5 has a total capacity of 191.98 GiB\n")
    node = Node(script=[iteration(1, 10), iteration(2, 10), oom])
    outcome, _, clock, [log] = watch([node], iterations=10)
    assert outcome.status == "failed"
    assert outcome.error["cls"] == "oom" and outcome.error["host"] == "n0"
    # read at the third look, two 1 s waits before it; then one more look of every node before the
    # cause is named (another node's log may hold the root cause), without waiting
    assert log.polls == 4 and clock.now == 2.0


def test_the_root_cause_outranks_the_nccl_echo_on_the_peer():
    peer = Node(script=[
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, remote process exited or there "
        "was a network error, NCCL version 2.21.5\n"
    ])
    culprit = Node(script=["Memory access fault by GPU node-9 (Agent handle: 0x55d0) on address 0x7f2a. "
                           "Reason: Page not present or supervisor privilege.\n"])
    outcome, _, _, _ = watch([peer, culprit])
    assert outcome.error["cls"] == "gpu_fault" and outcome.error["rank"] == 1
    assert "n0" in outcome.reason  # the peer's error is still mentioned


def test_a_job_that_exits_without_completing_is_reported_with_its_status():
    node = Node(script=[iteration(1, 10), iteration(2, 10)], exit_after=2, exit_code=137)
    outcome, _, _, _ = watch([node], iterations=10)
    assert outcome.status == "exited"
    assert "status 137" in outcome.reason and "n0" in outcome.reason and "2/10" in outcome.reason


def test_no_new_iteration_for_the_stall_timeout_is_a_stall():
    node = Node(script=[iteration(1, 10), iteration(2, 10)])
    outcome, _, clock, _ = watch([node], iterations=10, stall_timeout_s=5)
    assert outcome.status == "stalled" and "stuck at step 2/10" in outcome.reason
    assert 5 < clock.now <= 8


def test_no_first_iteration_within_the_startup_timeout_is_a_stall():
    outcome, _, clock, _ = watch([Node()], startup_timeout_s=10)
    assert outcome.status == "stalled" and "no training iteration within 10s" in outcome.reason


def test_a_node_that_stops_answering_is_an_infrastructure_failure():
    outcome, _, _, _ = watch([Node(script=[iteration(1, 4)]), Node(unreachable=True)])
    assert outcome.status == "unreachable" and outcome.infrastructure
    assert "n1" in outcome.reason


def test_the_overall_timeout_bounds_every_watch():
    node = Node(script=[iteration(i, 1000) for i in range(1, 200)], complete=False)
    outcome, _, clock, _ = watch([node], iterations=1000, timeout_s=20)
    assert outcome.status == "timeout" and clock.now <= 22


def test_more_bytes_than_one_read_carries_are_fetched_without_waiting():
    node = Node(script=["".join(iteration(i, 4) for i in range(1, 5))], exit_after=1)
    outcome, _, clock, _ = watch([node], max_bytes=200)
    assert outcome.ok
    assert clock.now < 2  # consecutive reads drained the log, no poll interval in between


def test_an_absurd_iteration_number_is_skipped_and_the_run_completes():
    huge = (iteration(3, 4).replace("       3/", " 9223372036854775808/")
            + iteration(3, 4).replace("       3/", " " + "7" * 4000 + "/"))
    node = Node(script=[iteration(1, 4) + iteration(2, 4), huge, iteration(3, 4) + iteration(4, 4)], exit_after=3)
    outcome, _, _, _ = watch([node])
    assert outcome.ok and outcome.reporting.last_step == 4
    assert outcome.reporting.parser.lines_skipped == 2


def test_a_ranks_exception_outranks_the_watchdog_timeout_a_peer_prints_later():
    peer = Node(script=[iteration(1, 10), "[rank0]:[E1130 04:22:55.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] "
                            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds "
                            "before timing out.\n"])
    # both lines arrive in the same poll (the peer's is read too: the script checks every chunk was)
    culprit = Node(script=[iteration(1, 10), "[rank12]: FileNotFoundError: [Errno 2] No such file or directory: "
                           "'/data/index.npy'\n"])
    outcome, _, _, _ = watch([peer, culprit], iterations=10)
    assert outcome.error["name"] == "python_exception" and outcome.error["rank"] == 1


def dump(**args: str) -> str:
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (47 - len(k))} {v}" for k, v in sorted(args.items())]
    return "\n".join(lines + ["-------------------- end of arguments ---------------------"]) + "\n"


@dataclass
class Check:
    ok: bool
    reason: str


def watch_checked(nodes: list[Node], check, iterations=4):
    """Watch scripted nodes with a config check; returns the outcome, the dumps checked and each log."""
    clock = Clock()
    stop = FakeStop(clock)
    hosts = ScriptedHosts([f"n{i}" for i in range(len(nodes))], clock=clock, sleep=stop.wait)
    logs = [hosts.expect_read(f"/l{i}", node.script, exit_code=node.exit_code if node.exit_after is not None else None,
                              exit_after=node.exit_after, complete=node.complete, on=f"n{i}")[0]
            for i, node in enumerate(nodes)]
    targets = [WatchTarget(i, f"n{i}", f"/l{i}", f"/e{i}") for i in range(len(nodes))]
    seen: list = []

    def config_check(parser):
        seen.append(dict(parser.arguments))
        return check(parser.arguments)

    w = Watcher(hosts, targets, iterations=iterations,
                settings=WatchSettings(poll_interval_s=1.0, stall_timeout_s=30, startup_timeout_s=60),
                parser_factory=LogParser, listener=lambda e: None, stage="training", combo="C",
                stop=stop, clock=clock, config_check=config_check)
    outcome = w.run()
    hosts.assert_done()
    return outcome, seen, logs


def test_a_mismatching_dump_fails_the_job_in_the_poll_that_completes_it_not_at_the_end():
    first, rest = dump(seq_length="2048", world_size="8").split("  world_size")
    node = Node(script=[first, "  world_size" + rest, iteration(1, 100)] + [iteration(s, 100) for s in range(2, 101)],
                complete=False)  # the watch ends long before the last chunk
    outcome, seen, [log] = watch_checked([node], lambda a: Check(a["seq_length"] == "4096", "seq_length 2048 != 4096"),
                                         iterations=100)
    assert outcome.status == "mismatch" and not outcome.ok and not outcome.infrastructure
    assert outcome.reason == "node n0: seq_length 2048 != 4096"
    assert log.polls == 2  # the dump's end line arrived in the second poll; no iteration was waited for
    assert seen == [{"seq_length": "2048", "world_size": "8"}]  # checked once, with the whole dump
    assert outcome.config_check.reason == "seq_length 2048 != 4096"


def test_a_matching_dump_is_checked_once_and_kept_on_the_outcome():
    node = Node(script=[dump(seq_length="4096"), iteration(1, 2), iteration(2, 2)], exit_after=3)
    outcome, seen, _ = watch_checked([node], lambda a: Check(True, ""), iterations=2)
    assert outcome.ok and len(seen) == 1 and outcome.config_check.ok and outcome.warnings == []


def test_a_log_without_a_dump_completes_with_a_warning_not_a_failure():
    node = Node(script=[iteration(1, 2), iteration(2, 2)], exit_after=2)
    outcome, seen, _ = watch_checked([node], lambda a: Check(False, "never"), iterations=2)
    assert outcome.ok and seen == [] and outcome.config_check is None
    assert "no node's log holds an arguments dump" in outcome.warnings[0]


def test_every_node_that_prints_a_dump_is_checked():
    good, bad = dump(world_size="16"), dump(world_size="8")
    nodes = [Node(script=[good]), Node(script=[bad])]
    outcome, seen, _ = watch_checked(nodes, lambda a: Check(a["world_size"] == "16", "world_size 8 != 16"))
    assert outcome.status == "mismatch" and outcome.reason == "node n1: world_size 8 != 16"


def test_a_lost_follower_is_restarted_from_the_held_offset_and_the_copy_stays_exact(tmp_path):
    node = Node(script=[iteration(1, 4), iteration(2, 4), iteration(3, 4), iteration(4, 4)], exit_after=4,
                drops=(2,))  # the follower dies at its second look, after the log grew
    outcome, _, _, [log] = watch([node], tmp_path=tmp_path)
    assert outcome.ok and outcome.reporting.last_step == 4
    assert outcome.notes == [f"the log follower of node n0 was restarted from byte {len(iteration(1, 4))} after: "
                             "node n0: following /logs/out-node0/training.log: the follower ended: "
                             "killed by signal 9"]
    assert (tmp_path / "node0.log").read_bytes() == log.content  # no byte lost
    assert log.sent == len(log.content)  # and none sent twice


def test_a_follower_that_keeps_dying_makes_the_node_unreachable():
    node = Node(script=[iteration(1, 10)] * 6, drops=(2, 3, 4, 5), complete=False)
    outcome, _, _, _ = watch([node], iterations=10)
    assert outcome.status == "unreachable" and "n0" in outcome.reason and "killed by signal 9" in outcome.reason


def test_after_a_node_exits_every_other_node_is_drained_for_the_root_cause():
    # n1 exits at its first look; the GPU fault n0 wrote before that is only seen by the drain
    culprit = Node(script=[iteration(1, 10), "Memory access fault by GPU node-9 (Agent handle: 0x55d0) on "
                                             "address 0x7f2a. Reason: Page not present.\n"], complete=True)
    peer = Node(script=[iteration(1, 10)], exit_after=1, exit_code=1)
    outcome, _, clock, _ = watch([culprit, peer], iterations=10)
    assert outcome.status == "failed" and outcome.error["cls"] == "gpu_fault" and outcome.error["rank"] == 0
    assert clock.now == 0.0  # no poll interval waited for it


def test_before_a_stall_is_declared_every_follower_looks_once_more():
    nccl = ("[rank0]:[E1130 04:22:55.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600081 milliseconds before timing out.\n")
    node = Node(script=[iteration(1, 10), iteration(2, 10), "", "", "", "", nccl])
    outcome, _, clock, [log] = watch([node], iterations=10, stall_timeout_s=4.5)
    # the stall was due at 5.5 s, before the next scheduled look (6 s): the look it asked for found the cause
    assert outcome.status == "failed" and outcome.error["cls"] == "nccl", outcome.reason
    assert clock.now < 6 and log.polls == 8  # 6 scheduled looks, the stall's look, the cause's look


def test_a_peers_echo_is_not_taken_for_the_cause_before_every_node_looked_again():
    # n0's follower sends the NCCL echo at its second look; n1's GPU fault, written first, would only
    # come with n1's next look: the watcher asks every follower to look before it names the cause
    peer = Node(script=[iteration(1, 10), "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, "
                                          "remote process exited or there was a network error\n"])
    culprit = Node(script=[iteration(1, 10), "", "Memory access fault by GPU node-9 (Agent handle: 0x55d0) on "
                                                 "address 0x7f2a. Reason: Page not present.\n"])
    outcome, _, clock, _ = watch([peer, culprit], iterations=10)
    assert outcome.error["cls"] == "gpu_fault" and outcome.error["rank"] == 1, outcome.reason
    assert clock.now == 1.0  # found at the second look, without waiting for the third
