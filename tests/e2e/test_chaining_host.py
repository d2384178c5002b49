"""Ad hoc chaining rules (README, "The lifecycle, whole or by hand"), through the real invoke CLI
on this machine (host runtime, simulated trainer):

- a task that only reads records (metric, loss) launches and trains nothing when training is
  recorded, also after the run was torn down;
- an unknown --combo is refused (exit 2) before any stage runs;
- the pre-task graph mirrors the lifecycle: train <- smoke <- tokenizer <- container;
- a container an ad hoc command launched stays up, the console says so, teardown removes it.
"""

from __future__ import annotations

import json

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
