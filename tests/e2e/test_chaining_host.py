"""Ad hoc chaining rules (README, "The lifecycle, whole or by hand"), through the real invoke CLI
on this machine (host runtime, simulated trainer):

- a task that only reads records (metric, loss) launches and trains nothing when training is
  recorded, also after the run was torn down;
- an unknown --combo is refused (exit 2) before any stage runs;
- the pre-task graph mirrors the lifecycle: train <- smoke <- tokenizer <- container;
- a container an ad hoc command launched stays up, the console says so, teardown removes it;
- a run that is over is joined only to judge it: after `invoke all`, `invoke metric.check` launches
  and trains nothing (no stage record changes, the node's run folder is not made again) and
  `invoke train --combo X` exits 2 naming the run; a combo never trained is refused by `metric`;
- a command line is one run: two values of one flag exit 2 before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import edited_config, run_invoke
from tests.e2e.test_lifecycle_host import DEMO, FLAGS, LOCAL, combos


def _records(run_dir) -> dict[str, float]:
    return {p.name: json.loads(p.read_text())["started"] for p in (run_dir / "stages").glob("*.json")}


def test_metric_after_a_finished_run_launches_nothing(reports):
    done = run_invoke("all", *FLAGS, reports=reports)
    assert done.code == 0, done.out + done.err
    before = _records(done.run_dir)
    again = run_invoke("metric", "loss", reports=reports)
    assert again.code == 0, again.out + again.err
    assert again.run_dir == done.run_dir
    after = _records(done.run_dir)
    for stage in ("launch_container.json", "download_tokenizer.json", "smoke.json", "teardown.json"):
        assert after.get(stage) == before.get(stage), stage  # nothing relaunched, nothing torn down
    assert all(after[name] == before[name] for name in before if name.startswith("training"))
    assert "test_launch_container" not in again.out and "stays up" not in again.out


def test_an_unknown_combo_is_refused_before_any_stage(reports):
    res = run_invoke("train", "--combo", "MBS=3,GBS=9,PRECISION=FP8", *FLAGS, reports=reports)
    assert res.code == 2, res.out + res.err
    assert "MBS=3,GBS=9,PRECISION=FP8" in res.err and "Traceback" not in res.err
    assert not list(reports.glob("*/stages/*.json"))  # no stage started, on any run
    assert "test_launch_container" not in res.out


def test_train_runs_smoke_first_and_the_container_stays_up_until_teardown(reports, tmp_path):
    def edit(cfg):
        cfg["smoke"]["enabled"] = True

    flags = ["--config", str(edited_config(DEMO, tmp_path, edit)), "--cluster", str(LOCAL)]
    first = combos()[0]
    res = run_invoke("train", "--combo", first, *flags, reports=reports)
    assert res.code == 0, res.out + res.err
    order = sorted(_records(res.run_dir).items(), key=lambda item: item[1])
    names = [name for name, _ in order]
    assert names[:3] == ["launch_container.json", "download_tokenizer.json", "smoke.json"], names
    assert names[3].startswith("training[")
    assert "stays up" in res.out and "invoke teardown" in res.out

    down = run_invoke("teardown", reports=reports)
    assert down.code == 0, down.out + down.err
    assert down.record("teardown")["status"] == "PASS"
    assert "stays up" not in down.out


def _node_folder(run_dir) -> Path:
    """The run's folder on the (local) node: the launch makes it, teardown removes it
    (demo config: paths.scripts_dir /tmp/cvs-demo/runs, logs inside it)."""
    return Path("/tmp/cvs-demo/runs") / run_dir.name


def _stage_files(run_dir) -> dict[str, tuple[float, float]]:
    return {p.name: (json.loads(p.read_text())["started"], json.loads(p.read_text())["ended"])
            for p in (run_dir / "stages").glob("*.json")}


def test_after_all_judging_launches_nothing_and_training_needs_the_run_named(reports):
    done = run_invoke("all", *FLAGS, reports=reports)
    assert done.code == 0, done.out + done.err
    run = done.run_dir
    assert not _node_folder(run).exists()  # torn down: the node's run folder is gone
    before = _stage_files(run)

    judged = run_invoke("metric.check", reports=reports)  # no --combo: every combo of the run
    assert judged.code == 0, judged.out + judged.err
    assert judged.out.startswith(f"run {run.name}: joins the run that is over (finished ")
    assert _stage_files(run) == before  # nothing launched, trained, judged again or torn down
    assert not _node_folder(run).exists()  # no launch reached the node
    assert "test_launch_container" not in judged.out and "test_training" not in judged.out

    train = run_invoke("train", "--combo", combos()[0], reports=reports)
    assert train.code == 2, train.out + train.err
    assert f"the latest run {run.name} is over" in train.err and f"--run {run.name}" in train.err
    assert "--config <file>" in train.err and "Traceback" not in train.err
    assert _stage_files(run) == before and not _node_folder(run).exists()
    assert sorted(p.name for p in reports.iterdir()) == sorted([run.name, "latest", "history.sqlite"])


def test_judging_a_combo_never_trained_is_refused_after_teardown(reports):
    first, second = combos()[:2]
    trained = run_invoke("train", "--combo", first, *FLAGS, reports=reports)
    assert trained.code == 0, trained.out + trained.err
    down = run_invoke("teardown", reports=reports)
    assert down.code == 0, down.out + down.err
    run = trained.run_dir
    before = _stage_files(run)

    judged = run_invoke("metric.check", reports=reports)
    assert judged.code == 2, judged.out + judged.err
    assert f'invoke train --combo "{second}" --run {run.name}' in judged.err
    assert "--with-pre" in judged.err
    assert _stage_files(run) == before and not _node_folder(run).exists()  # nothing launched, nothing judged

    one = run_invoke("metric", "--combo", first, reports=reports)  # what is recorded is judged
    assert one.code == 0, one.out + one.err
    assert one.record("metric", first)["status"] == "PASS" and not _node_folder(run).exists()


def test_two_values_of_one_flag_in_one_command_line_exit_2_before_anything_runs(reports, tmp_path):
    other = edited_config(DEMO, tmp_path, lambda cfg: None)
    res = run_invoke("container", "--config", str(DEMO), "smoke", "--config", str(other), "--cluster", str(LOCAL),
                     reports=reports)
    assert res.code == 2, res.out + res.err
    assert "--config is given twice with different values" in res.err and str(other) in res.err
    assert list(reports.iterdir()) == [] and res.out == ""  # no run, no stage, not a line on stdout
