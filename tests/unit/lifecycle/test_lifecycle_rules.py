"""Every lifecycle rule, through a real Session whose node answers from a script (no root, no SSH).

The demo config (runtime ``host``, one node) runs the whole lifecycle; the node is a
``ScriptedHosts`` that expects each stage's commands in order, answers them, and serves the
training logs chunk by chunk. A command the rules should not send fails the test at once.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from invoke import Config

from cvs_tasks.inputs import read_secret
from cvs_tasks.lifecycle.flow import _SESSIONS, Scope, failed_scope, run_all, run_stage
from cvs_tasks.lifecycle.runner import Interrupted
from cvs_tasks.lifecycle.session import RunRequest, Session, open_session
from cvs_tasks.remote.connect import nodes_of
from cvs_tasks.remote.testing import ScriptedHosts
from cvs_tasks.report.results import build_results
from cvs_tasks.tasks.lifecycle import needs_work

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "configs" / "testbed" / "demo_host.json"
LOCAL = ROOT / "cluster" / "localhost.json"
BF16, FP8 = "MBS=2,GBS=16,PRECISION=BF16", "MBS=2,GBS=16,PRECISION=FP8"
LABEL = {"smoke": "smoke", BF16: "MBS_2_GBS_16_PRECISION_BF16", FP8: "MBS_2_GBS_16_PRECISION_FP8"}
OOM = ("[rank5]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB. "
       "GPU 5 has a total capacity of 191.98 GiB\n")
LATER = ["test_checkpoint", f"test_training[{BF16}]", f"test_training[{FP8}]", f"test_metric[{BF16}]",
         f"test_metric[{FP8}]", f"test_loss_curve[{BF16}]", f"test_loss_curve[{FP8}]"]


HEALTH = re.compile(r"^echo '@@cvs-health")  # the health snapshot around every job (remote/health.py)
HEALTHY = "@@cvs-health 1\n@@uptime 100.0\n@@counters none\n@@klog dmesg\n@@klog-mark 50.0\n@@end\n"


def iteration(step: int, total: int, loss: float | None = None) -> str:
    loss = 10 - step * 0.3 if loss is None else loss
    return (f" [2026-09-24 09:43:{step % 60:02d}] iteration {step:8d}/{total:8d} | consumed samples: "
            f"{step * 16:12d} | elapsed time per iteration (ms): 1600.0 | mem usages: 0.5000 | throughput per "
            f"GPU (TFLOP/s/GPU): 527.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: "
            f"{loss:.6E} | loss scale: 1.0 | grad norm: 2.000 | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |\n")


def log(total: int) -> str:
    return "".join(iteration(step, total) for step in range(1, total + 1))


def rising_log(total: int) -> str:
    """A training that completes with its loss going up: its loss-curve gate fails."""
    return "".join(iteration(step, total, loss=2 + step * 0.3) for step in range(1, total + 1))


def new_session(reports: Path, run: str | None = None) -> tuple[Session, ScriptedHosts]:
    session = open_session(RunRequest(config=str(DEMO), cluster=str(LOCAL), reports_dir=str(reports),
                                      run=run, new=run is None))
    hosts = ScriptedHosts(nodes_of(session.plan.cluster))
    session._hosts = hosts
    return session, hosts


@pytest.fixture
def run(tmp_path):
    session, hosts = new_session(tmp_path / "reports")
    yield session, hosts
    session.close()


# -- what the node is asked, stage by stage ----------------------------------------------------
def expect_launch(hosts: ScriptedHosts, session: Session) -> None:
    folder = shlex.quote(session.node_run_dir)
    token = read_secret(Path(session.config.paths.hf_token_file))[0]
    hosts.expect("true")  # runtime host: the node answers
    # the marked run folder and the log-folder lock, in one command
    hosts.expect(re.compile(rf"mkdir -p {re.escape(folder)}\).*\.cvs-run.*\.cvs-lock"), stdout="cvs-lock taken\n")
    hosts.expect_put(f"{session.node_run_dir}/hf_token", data=token)
    hosts.expect(re.compile(r"@@cvs-check fp_asic"))  # the fingerprint probe (nothing to report)


def expect_job(hosts: ScriptedHosts, what: str, chunks, *, exit_code: int | None = 0, stopped: bool = False,
               complete: bool = True, interrupted: bool = False) -> None:
    label = LABEL[what]
    hosts.expect(re.compile(rf"mkdir -p \S+/megatron-logs/{label} .*\.cvs-lock"),  # script and log folders, lock
                 stdout="cvs-lock taken\n")
    hosts.expect_put(re.compile(rf"/{label}/node0\.sh$"))
    hosts.expect(HEALTH, stdout=HEALTHY)  # the node's health before the job
    hosts.expect(re.compile(rf"^bash -lc .*setsid nohup bash \S+/{label}/node0\.sh"))
    hosts.expect_read(re.compile(rf"/{label}/out-node0/training\.log$"), chunks, exit_code=exit_code,
                      complete=complete)
    if stopped:  # a job that did not end well is stopped everywhere
        hosts.expect(re.compile(rf"^bash -lc .*kill -TERM .*{label}/node0\.pid|{label}/node0\.pid.*kill -TERM"))
    if not interrupted:  # an interrupted job is stopped at once, its health not judged
        hosts.expect(HEALTH, stdout=HEALTHY)  # and after it


def expect_teardown(hosts: ScriptedHosts, session: Session) -> None:
    hosts.expect(re.compile(r"^cvs_scan\(\)"))  # this run's host jobs a killed harness left: none
    hosts.expect(re.compile(rf"\.cvs-lock.*cvs_rm_run {re.escape(shlex.quote(session.config.paths.scripts_dir))} "
                            rf"{re.escape(session.run.run_id)} "))  # the lock released, the marked folder removed
    hosts.expect("true")


def statuses(session: Session) -> dict[str, str]:
    return {r.name: r.status for r in session.run.records()}


# -- the rules ---------------------------------------------------------------------------------
def test_a_whole_run_sends_every_stage_its_commands_in_order(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(10), log(20)[len(log(10)):]])  # two polls
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session) == 0
    hosts.assert_done()
    assert set(statuses(session).values()) == {"PASS", "SKIPPED"}
    assert statuses(session)["test_teardown"] == "PASS"
    written = hosts.written("localhost")
    fp8, bf16 = (written[f"{session.node_run_dir}/{LABEL[c]}/node0.sh"] for c in (FP8, BF16))
    assert b" TE_FP8=1 " in fp8 and b" TE_FP8=0 " in bf16  # each combo its own wrapper


def test_a_recorded_stage_is_not_redone_and_force_redoes_it(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    run_stage(session, "launch_container")
    [first] = run_stage(session, "smoke")
    [again] = run_stage(session, "smoke")  # the script holds nothing more: any command would fail
    assert again.ended == first.ended and again.status == "PASS"
    hosts.assert_done()
    expect_job(hosts, "smoke", [log(5)])
    [forced] = run_stage(session, "smoke", force=True)
    assert forced.ended > first.ended
    hosts.assert_done()


def test_a_resumed_run_does_only_what_is_not_recorded(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    run_stage(session, "launch_container")
    run_stage(session, "smoke")
    run_stage(session, "training", [BF16])
    hosts.assert_done()
    expect_job(hosts, FP8, [log(20)])  # the container is up: no relaunch; smoke and BF16 are done
    expect_teardown(hosts, session)
    assert run_all(session) == 0
    hosts.assert_done()


def test_an_early_failure_skips_every_later_stage_and_teardown_still_runs(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [iteration(1, 5), OOM], exit_code=1, stopped=True)
    hosts.expect("true")  # is the node still there (a lost node is named as such)
    expect_teardown(hosts, session)
    assert run_all(session) == 1
    hosts.assert_done()  # no training command was ever sent
    records = {r.name: r for r in session.run.records()}
    assert records["test_smoke"].status == "FAIL"
    for name in LATER:
        assert (records[name].status, records[name].reason) == ("SKIPPED", "skipped: test_smoke failed"), name
        assert records[name].data["blocked_by"] == "test_smoke"
    assert records["test_teardown"].status == "PASS"


def test_a_launch_error_skips_everything_after_it(run):
    session, hosts = run
    hosts.expect("true", error="ssh: connect to host localhost: Connection refused")
    expect_teardown(hosts, session)
    assert run_all(session) == 3
    hosts.assert_done()
    records = {r.name: r for r in session.run.records()}
    assert records["test_launch_container"].status == "ERROR"
    assert "Connection refused" in records["test_launch_container"].reason
    for name in ["test_download_tokenizer", "test_smoke", *LATER]:
        assert records[name].reason == "skipped: test_launch_container errored", name


def test_an_error_is_redone_by_the_next_run_and_a_fail_stays_until_forced(run):
    session, hosts = run
    hosts.expect("true", error="ssh: connect to host localhost: Connection refused")
    expect_teardown(hosts, session)
    assert run_all(session) == 3
    expect_launch(hosts, session)  # ERROR is not done: the next run launches again ...
    expect_job(hosts, "smoke", [iteration(1, 5), OOM], exit_code=1, stopped=True)  # ... and the skipped run
    hosts.expect("true")
    expect_teardown(hosts, session)
    assert run_all(session) == 1
    hosts.assert_done()
    expect_launch(hosts, session)  # a FAIL is done: smoke is not retried, the rest is skipped again
    expect_teardown(hosts, session)
    assert run_all(session) == 1
    hosts.assert_done()
    assert session.run.read_record("training", BF16).reason == "skipped: test_smoke failed"


def test_a_failing_combo_skips_only_its_own_gates(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [iteration(1, 20), OOM], exit_code=1, stopped=True)
    hosts.expect("true")
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session) == 1
    hosts.assert_done()
    records = {r.name: r for r in session.run.records()}
    assert records[f"test_training[{BF16}]"].status == "FAIL"
    assert records[f"test_training[{BF16}]"].data["error"]["cls"] == "oom"
    for gate in ("test_metric", "test_loss_curve"):
        skipped = records[f"{gate}[{BF16}]"]
        assert (skipped.status, skipped.reason) == ("SKIPPED", f"skipped: test_training[{BF16}] failed")
        assert records[f"{gate}[{FP8}]"].status == "PASS"
    assert records[f"test_training[{FP8}]"].status == "PASS"


def test_an_interrupt_during_training_is_recorded_teardown_runs_and_the_next_run_redoes_it(tmp_path):
    session, hosts = new_session(tmp_path / "reports")

    def ctrl_c():  # what the SIGINT handler does, at the moment the watcher reads the log
        session.stop.set()
        raise Interrupted("SIGINT")

    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [iteration(1, 20), ctrl_c], exit_code=None, stopped=True, interrupted=True)
    expect_teardown(hosts, session)
    assert run_all(session) == 130
    hosts.assert_done()
    interrupted = session.run.read_record("training", BF16)
    assert (interrupted.status, interrupted.reason) == ("ERROR", "interrupted by the user")
    assert interrupted.data["interrupted"] is True
    assert session.run.read_record("training", FP8) is None  # never started
    assert statuses(session)["test_teardown"] == "PASS" and session.run.manifest()["interrupted"] is True

    resumed, node = new_session(tmp_path / "reports", run=session.run.run_id)  # the next command
    expect_launch(node, resumed)  # torn down since the launch: launched again
    expect_job(node, BF16, [log(20)])  # the interrupted combo is redone, smoke is not
    expect_job(node, FP8, [log(20)])
    expect_teardown(node, resumed)
    assert run_all(resumed) == 0
    node.assert_done()
    assert resumed.run.read_record("training", BF16).status == "PASS"


def test_launch_after_teardown_relaunches_and_a_relaunched_container_is_torn_down(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session) == 0
    expect_launch(hosts, session)
    [launched] = run_stage(session, "launch_container")
    assert launched.ended > session.run.read_record("teardown").ended
    assert run_stage(session, "launch_container")[0].ended == launched.ended  # up: not again
    expect_teardown(hosts, session)
    [down] = run_stage(session, "teardown")  # launched since the last teardown: forced
    assert down.ended > launched.ended
    hosts.assert_done()


def test_judging_a_finished_run_launches_nothing(run, monkeypatch, capsys):
    """`invoke metric` / `invoke loss` after `invoke all`: the pre-tasks see nothing to train."""
    from cvs_tasks.tasks import namespace
    from cvs_tasks.tasks.chain import ForwardingExecutor

    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session) == 0
    hosts.assert_done()
    assert not needs_work(session, ("metric", False), None)
    assert not needs_work(session, ("metric", True), [FP8])  # a forced judge still only reads
    assert needs_work(session, ("training", True), None)
    before = len(hosts.calls)
    monkeypatch.setitem(_SESSIONS, str(session.run.path), session)  # the task chain gets this session
    executor = ForwardingExecutor(namespace(), config=Config(overrides={"cvs": {}}))
    flags = {"config": str(DEMO), "cluster": str(LOCAL), "run": str(session.run.path)}
    executor.execute(("metric", dict(flags)), ("loss", dict(flags, force=True)))
    assert len(hosts.calls) == before  # nothing launched, trained or torn down
    assert "container stays up" not in capsys.readouterr().out
    assert statuses(session)[f"test_loss_curve[{FP8}]"] == "PASS"


def test_judging_a_combo_never_trained_is_refused_and_with_pre_says_what_it_runs(run, monkeypatch, capsys):
    """`invoke metric` judges what is recorded: a combo without a training record is exit 2 naming the
    command that records it, before anything is judged or launched. `--with-pre` says which combos
    on which nodes, then relaunches the torn-down container and trains only that combo."""
    from invoke.exceptions import Exit

    from cvs_tasks.tasks import namespace
    from cvs_tasks.tasks.chain import ForwardingExecutor

    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    expect_teardown(hosts, session)
    for stage, combos in (("launch_container", None), ("smoke", None), ("training", [BF16]), ("teardown", None)):
        run_stage(session, stage, combos)
    hosts.assert_done()
    monkeypatch.setitem(_SESSIONS, (str(session.run.path), True), session)  # the task chain gets this session
    flags = {"config": str(DEMO), "cluster": str(LOCAL), "run": session.run.run_id,
             "reports_dir": str(session.run.path.parent)}
    executor = ForwardingExecutor(namespace(), config=Config(overrides={"cvs": {}}))
    with pytest.raises(Exit) as refused:
        executor.execute(("metric", dict(flags)))
    assert refused.value.code == 2
    assert f'invoke train --combo "{FP8}" --run {session.run.run_id}' in refused.value.message
    assert f"Recorded, judged with --combo: {BF16}" in refused.value.message
    assert session.run.read_record("metric", BF16) is None  # refused before judging anything
    hosts.assert_done()

    expect_launch(hosts, session)  # torn down since: launched again for the prerequisite
    expect_job(hosts, FP8, [log(20)])  # only the untrained combo; smoke and BF16 are recorded
    executor = ForwardingExecutor(namespace(), config=Config(overrides={"cvs": {}}))
    executor.execute(("metric", dict(flags, with_pre=True)))
    hosts.assert_done()
    out = capsys.readouterr().out
    plan = f"--with-pre: 1 combo(s) of run {session.run.run_id} have no training result: {FP8}"
    assert plan in out and "on 1 node(s): localhost" in out
    assert out.index(plan) < out.index("test_launch_container")  # said before anything runs
    assert statuses(session)[f"test_metric[{BF16}]"] == statuses(session)[f"test_metric[{FP8}]"] == "PASS"


# -- runs in pieces, one combo, --exitfirst, --failed ----------------------------------------
def results_of(session: Session) -> tuple[dict, dict[str, dict]]:
    results = build_results(session.run)
    return results, {t["name"]: t for t in results["tests"]}


def test_a_run_in_pieces_is_judged_on_what_was_asked(run):
    """`invoke container`, `smoke` (and its tokenizer), `train --combo`, `metric --combo`, `teardown`."""
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    expect_teardown(hosts, session)
    for stage, combos in (("launch_container", None), ("download_tokenizer", None), ("smoke", None),
                          ("training", [BF16]), ("metric", [BF16]), ("teardown", None)):
        run_stage(session, stage, combos)
    hosts.assert_done()
    results, tests = results_of(session)
    assert results["verdict"] == "PASS", results["verdict_reason"]
    assert results["not_asked"] == ["test_checkpoint", f"test_training[{FP8}]", f"test_metric[{FP8}]",
                                    f"test_loss_curve[{BF16}]", f"test_loss_curve[{FP8}]"]
    assert tests[f"test_training[{FP8}]"]["reason"].startswith("not asked: ")


def test_all_for_one_combo_trains_and_judges_only_it(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])  # FP8 is never trained
    expect_teardown(hosts, session)
    assert run_all(session, Scope(combos=(BF16,))) == 0
    hosts.assert_done()
    results, tests = results_of(session)
    assert results["verdict"] == "PASS", results["verdict_reason"]
    assert set(results["not_asked"]) == {f"test_{s}[{FP8}]" for s in ("training", "metric", "loss_curve")}
    assert tests[f"test_loss_curve[{BF16}]"]["status"] == "PASS"


def test_exitfirst_stops_after_a_failed_training_and_still_tears_down(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [iteration(1, 20), OOM], exit_code=1, stopped=True)
    hosts.expect("true")
    expect_teardown(hosts, session)  # FP8 is never trained
    assert run_all(session, Scope(exitfirst=True)) == 1
    hosts.assert_done()
    results, tests = results_of(session)
    assert results["verdict"] == "FAIL"
    assert tests[f"test_metric[{BF16}]"]["reason"] == f"skipped: test_training[{BF16}] failed"  # its own rule
    for stage in ("training", "metric", "loss_curve"):
        row = tests[f"test_{stage}[{FP8}]"]
        assert row["status"] == "NOT-RUN" and "stopped after the first failure (--exitfirst)" in row["reason"]
    assert tests["test_teardown"]["status"] == "PASS" and session.run.manifest()["finished"]


def test_exitfirst_judges_each_combo_before_the_next_trains(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [rising_log(20)])  # trains, then its loss-curve gate fails
    expect_teardown(hosts, session)
    assert run_all(session, Scope(exitfirst=True)) == 1
    hosts.assert_done()
    results, tests = results_of(session)
    assert tests[f"test_training[{BF16}]"]["status"] == "PASS"
    assert tests[f"test_loss_curve[{BF16}]"]["status"] == "FAIL"
    assert f"test_training[{FP8}]" in results["not_run"]


def test_failed_reruns_the_failed_and_not_run_combos_and_keeps_what_passed(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [iteration(1, 20), OOM], exit_code=1, stopped=True)
    hosts.expect("true")
    expect_teardown(hosts, session)
    assert run_all(session, Scope(exitfirst=True)) == 1
    smoke = session.run.read_record("smoke")

    scope = failed_scope(session)
    assert scope.combos == (BF16, FP8) and ("smoke", None) not in scope.redo
    expect_launch(hosts, session)  # torn down: launched again; smoke passed and is kept
    expect_job(hosts, BF16, [log(20)])  # the FAILed training is recorded, and redone
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session, scope) == 0
    hosts.assert_done()
    assert session.run.read_record("smoke").ended == smoke.ended
    results, _ = results_of(session)
    assert results["verdict"] == "PASS" and results["not_run"] == [] and results["not_asked"] == []
    assert failed_scope(session) is None  # nothing left: the task exits 0 with one line


def test_failed_redoes_a_failed_smoke_and_the_combos_it_skipped(run):
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [iteration(1, 5), OOM], exit_code=1, stopped=True)
    hosts.expect("true")
    expect_teardown(hosts, session)
    assert run_all(session) == 1
    scope = failed_scope(session)
    assert scope.combos == (BF16, FP8) and ("smoke", None) in scope.redo
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])  # a FAIL stays until forced: --failed forces it
    expect_job(hosts, BF16, [log(20)])
    expect_job(hosts, FP8, [log(20)])
    expect_teardown(hosts, session)
    assert run_all(session, scope) == 0
    hosts.assert_done()
    assert build_results(session.run)["verdict"] == "PASS"


def test_failed_judges_a_trained_combo_without_training_it_again(run):
    """`invoke train --combo BF16`, then `invoke all --failed`: BF16's gates never ran, its training passed."""
    session, hosts = run
    expect_launch(hosts, session)
    expect_job(hosts, "smoke", [log(5)])
    expect_job(hosts, BF16, [log(20)])
    for stage, combos in (("launch_container", None), ("download_tokenizer", None), ("smoke", None),
                          ("training", [BF16])):
        run_stage(session, stage, combos)
    trained = session.run.read_record("training", BF16)
    scope = failed_scope(session)
    assert scope.combos == (BF16, FP8) and ("training", BF16) not in scope.redo
    expect_job(hosts, FP8, [log(20)])  # the container is still up; BF16 is only judged
    expect_teardown(hosts, session)
    assert run_all(session, scope) == 0
    hosts.assert_done()
    assert session.run.read_record("training", BF16).ended == trained.ended
    assert session.run.read_record("metric", BF16).status == "PASS"
