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


def test_run_reports_the_wall_time_and_judges_the_ratio_to_a_plain_read():
    timed, judged = report.run(nodes=2, combo_count=2, steps=10, repeats=1)
    assert set(timed) == set(judged) == {"name", "value", "unit", "target", "status", "detail"}
    assert (timed["name"], timed["unit"], timed["target"]) == ("report.render_s[2x2]", "s", "reported")
    assert judged["name"] == "report.render_vs_plain_read[2x2]" and judged["target"] == "<= 50"
    assert judged["value"] > 0 and judged["unit"] == "x plain read"


def test_the_fleet_rows_time_the_render_and_size_the_page():
    rows = report.run_fleet(nodes=40, combo_count=2, steps=10, repeats=1)
    assert [r["name"] for r in rows] == ["report.render_s[40x2]", "report.render_vs_plain_read[40x2]",
                                         "report.html_kib[40x2]"]
    assert rows[1]["target"] == "<= 30"
    assert rows[2]["unit"] == "KiB" and rows[2]["value"] > 0 and rows[2]["status"] == "PASS"


def test_the_ratio_is_the_slowest_renders_cpu_over_the_plain_reads():
    rows = report.render_rows("64x16", cpu=[0.6, 0.5], wall=[0.7, 0.55], plain_cpu=0.04, target=50.0,
                              old_target_s=2.0, detail="d")
    assert rows[0]["value"] == 0.7 and rows[0]["status"] == "PASS" and "was a target of <= 2 s" in rows[0]["detail"]
    assert rows[1]["value"] == 15.0 and rows[1]["status"] == "PASS"
    slow = report.render_rows("64x16", cpu=[2.4], wall=[2.5], plain_cpu=0.04, target=50.0, old_target_s=2.0,
                              detail="d")
    assert slow[1]["value"] == 60.0 and slow[1]["status"] == "MISS"
    unmeasured = report.render_rows("64x16", cpu=[0.6], wall=[0.6], plain_cpu=0.0, target=50.0, old_target_s=2.0,
                                    detail="d")
    assert unmeasured[1]["value"] is None and unmeasured[1]["status"] == "MISS"


def test_the_plain_read_parses_every_json_file_and_writes_them_back(tmp_path):
    root = tmp_path / "run"
    (root / "stages").mkdir(parents=True)
    (root / "run.json").write_text('{"a": 1}')
    (root / "stages" / "x.json").write_text('[1, 2]')
    (root / "node0.log").write_text("log")
    report.plain_read(root, tmp_path / "out.json")
    written = json.loads((tmp_path / "out.json").read_text())
    assert sorted(written.values(), key=str) == [[1, 2], {"a": 1}]
