"""The README's chaining block ("The lifecycle, whole or by hand"), typed as written, flags on the last
task, on this machine (host runtime, simulated trainer): only the config, the cluster file and the
combo are replaced by the demo's. Every task of every line works on the run of the config the
first line names, also while the latest run is another config's, still open."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tests.e2e.conftest import REPO, edited_config, run_invoke
from tests.e2e.test_lifecycle_host import DEMO, LOCAL

README = REPO / "README.md"
README_COMBO = "MBS=4,GBS=128,PRECISION=FP8"


def chaining_block() -> list[str]:
    """The commands of the README's ```bash block that starts `invoke container smoke`."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.M | re.S)
    block = next(b for b in blocks if b.startswith("invoke container smoke"))
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
    return [part.strip() for line in lines if line for part in line.split(" ; ")]


def as_typed(command: str, config: Path, combo: str) -> list[str]:
    swap = {"site/8b_single.json": str(config), "cluster.json": str(LOCAL), README_COMBO: combo}
    argv = [swap.get(word, word) for word in shlex.split(command)]
    assert argv[0] == "invoke", command
    return argv[1:]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def records(run_dir: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in (run_dir / "stages").glob("*.json")}


def test_the_readme_chaining_block_runs_as_written(reports, tmp_path):
    commands = chaining_block()
    assert commands[0].startswith("invoke container smoke --config site/8b_single.json --cluster cluster.json")
    assert len(commands) == 6, commands
    (tmp_path / "mine").mkdir()
    (tmp_path / "other").mkdir()
    config = edited_config(DEMO, tmp_path / "mine", lambda cfg: cfg["smoke"].update(enabled=True))
    other = edited_config(DEMO, tmp_path / "other", lambda cfg: None)
    combo = next(c for c in json.loads(DEMO.read_text())["sweep"]["runs"] if c.endswith("PRECISION=FP8"))

    # the latest run is another config's, torn down: `container`, given no flag of its own, used to
    # launch that run's container again (Invoke hands the line's flags to `smoke` only)
    previous = run_invoke("container", "--config", str(other), "--cluster", str(LOCAL), reports=reports)
    assert previous.code == 0, previous.out + previous.err
    assert run_invoke("teardown", reports=reports).code == 0
    old_run = previous.run_dir
    old_records = records(old_run)

    results = []
    for command in commands:
        res = run_invoke(*as_typed(command, config, combo), reports=reports)
        results.append(res)
        if command.startswith("invoke metric"):  # ends in `report`: exit 1 unless its verdict is PASS
            verdict = res.results()["verdict"]
            assert res.code == (0 if verdict == "PASS" else 1), (command, res.out + res.err)
        else:
            assert res.code == 0, (command, res.out + res.err)

    run = results[0].run_dir
    assert run != old_run
    assert manifest(run)["config_file"] == str(config.resolve())
    assert results[0].out.startswith(f"run {run.name}: new run; config {config}")
    for res in results[1:4]:  # train, metric/loss/report, teardown: the same run, found open
        assert res.out.startswith(f"run {run.name}: joins the open run"), res.out[:300]
    done = records(run)
    for name in ("launch_container.json", "smoke.json", f"training[{combo.replace('=', '_').replace(',', '_')}].json"):
        assert done[name]["status"] == "PASS", name
    for stage in ("metric", "loss_curve"):
        assert results[2].record(stage, combo)["status"] == "PASS"
    assert json.loads((run / "results.json").read_text())["run_id"] == run.name  # `report` rendered this run
    assert done["teardown.json"]["status"] == "PASS"
    assert records(old_run) == old_records  # the other config's run was not touched
    assert "teardown" in results[4].out and "--combo" in results[5].out  # --list, --help train
