import json

from benchmarks import report
from cvs_tasks.report import render_all


def test_synthetic_run_renders_with_every_combo_and_node(tmp_path):
    run = report.build_run(tmp_path, nodes=3, combo_count=12, steps=30)
    manifest = run.manifest()
    assert len(manifest["hosts"]) == 3 and len(manifest["combos"]) == 12
    paths = render_all(run)
    results = json.loads(paths["results"].read_text())
    names = {t["name"] for t in results["tests"]}
    assert f"test_training[{manifest['combos'][0]}]" in names
    assert results["verdict"] == "FAIL"  # two combos fail on purpose, like a real broken node
    assert len(run.read_record("training", manifest["combos"][0]).data["steps"]) == 30


def test_run_returns_one_row_with_the_contract_keys():
    (r,) = report.run(nodes=2, combo_count=2, steps=10, repeats=1)
    assert set(r) == {"name", "value", "unit", "target", "status", "detail"}
    assert r["unit"] == "s" and r["target"] == "<= 2"


def test_the_fleet_rows_time_the_render_and_size_the_page():
    rows = report.run_fleet(nodes=40, combo_count=2, steps=10, repeats=1)
    assert [r["name"] for r in rows] == ["report.render_s[40x2]", "report.html_kib[40x2]"]
    assert rows[1]["unit"] == "KiB" and rows[1]["value"] > 0 and rows[1]["status"] == "PASS"
