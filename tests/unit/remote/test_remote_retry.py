"""Retry policy: bounded, growing waits, every failed attempt recorded."""

from __future__ import annotations

import pytest

from cvs_tasks.remote import LocalHosts, Node, RetryPolicy, retry_call


def test_delays_grow_and_are_capped():
    policy = RetryPolicy(attempts=5, first_delay=1, factor=3, max_delay=5)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1, 3, 5, 5]


@pytest.mark.parametrize("bad", [dict(attempts=0), dict(first_delay=-1), dict(factor=0.5)])
def test_nonsense_policies_are_rejected(bad):
    with pytest.raises(ValueError):
        RetryPolicy(**bad)


def test_retry_call_stops_at_the_first_success_and_records_failures():
    answers = iter(["refused", "refused", None])
    record, slept = [], []
    ticks = iter(range(100))
    result = retry_call("pull", lambda: next(answers), lambda r: r, RetryPolicy(attempts=5),
                        record, sleep=slept.append, clock=lambda: float(next(ticks)))
    assert result is None
    assert [(a.step, a.attempt, a.error, a.seconds) for a in record] == [
        ("pull", 1, "refused", 1.0), ("pull", 2, "refused", 1.0)]
    assert slept == [1.0, 2.0]


def test_retry_call_gives_up_after_the_last_attempt_without_sleeping_after_it():
    record, slept = [], []
    result = retry_call("rm", lambda: "busy", lambda r: r, RetryPolicy(attempts=2), record,
                        sleep=slept.append)
    assert result == "busy" and len(record) == 2 and slept == [1.0]
    assert record[0].to_dict()["step"] == "rm"


def test_run_until_ok_reruns_only_the_failing_node(tmp_path):
    flag = tmp_path / "second-try"
    hosts = LocalHosts([Node("a", "a", rank=0), Node("b", "b", rank=1)])
    commands = ["echo a >> " + str(tmp_path / "a.count"),
                f"if [ -e {flag} ]; then echo ok; else touch {flag}; echo flaky >&2; exit 1; fi"]
    record, slept = [], []
    results = hosts.run_until_ok(commands, timeout=10, step="docker pull",
                                 policy=RetryPolicy(attempts=3, first_delay=0.5), record=record,
                                 sleep=slept.append)
    assert [r.ok for r in results] == [True, True] and results[1].stdout == "ok\n"
    assert (tmp_path / "a.count").read_text() == "a\n"  # node a ran once
    assert [(a.step, a.attempt, a.error) for a in record] == [
        ("docker pull", 1, "node b: exit status 1: flaky")]
    assert slept == [0.5]


def test_a_final_refusal_is_not_asked_again():
    """Host-key and auth refusals are final: no second round, no repeated failed logins."""
    from cvs_tasks.remote.testing import ScriptedHosts

    hosts = ScriptedHosts(["a"])
    hosts.expect("docker rm -f x", error="host key refused", final=True)  # a second ask would fail
    record: list = []
    results = hosts.run_until_ok("docker rm -f x", timeout=5, step="docker rm", record=record,
                                 policy=RetryPolicy(attempts=3, first_delay=0), sleep=lambda s: None)
    hosts.assert_done()
    assert len(record) == 1 and results[0].final and results[0].error == "node a: host key refused"
