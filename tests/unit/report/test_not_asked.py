"""A run is judged on what its commands asked for (the ledger ``asked.jsonl``, ``cvs_tasks/run/asked.py``).

``pieces`` is the run of README's "by hand" block: `invoke container`, `smoke`, `train --combo FP8`,
`metric --combo FP8`, `teardown`, each line of its ledger written by one of them.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.report.html import render_report
from cvs_tasks.report.junit import junit_xml
from cvs_tasks.report.results import NOT_RUN, build_results
from cvs_tasks.run.asked import EXITFIRST, LEDGER, Ask, read_ledger, record_ask
from cvs_tasks.run.rundir import DryRunDir, RunDir

from .conftest import edit_manifest

FP8 = "MBS=4,GBS=128,PRECISION=FP8"
BF16 = "MBS=4,GBS=128,PRECISION=BF16"
NOT_ASKED = ["test_checkpoint", f"test_training[{BF16}]", f"test_metric[{BF16}]", f"test_loss_curve[{FP8}]",
             f"test_loss_curve[{BF16}]"]


def by_name(results: dict) -> dict[str, dict]:
    return {t["name"]: t for t in results["tests"]}


def append(run: RunDir, *lines: dict) -> None:
    with open(run.path / LEDGER, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)


def test_a_run_in_pieces_passes_on_what_was_asked_and_the_rest_is_not_asked(fixture_run):
    results = build_results(fixture_run("pieces"))
    tests = by_name(results)
    assert results["verdict"] == "PASS", results["verdict_reason"]
    assert results["incomplete"] is False and results["not_run"] == []
    assert results["not_asked"] == NOT_ASKED
    for name in NOT_ASKED:
        assert tests[name]["status"] == NOT_RUN and tests[name]["asked"] is False
        assert tests[name]["reason"].startswith("not asked: no command of this run asked for it; ")
        assert "`invoke all --run 20260530-090000-c3d4`" in tests[name]["reason"]
    assert tests[f"test_metric[{FP8}]"]["asked"] is True
    assert results["counts"]["NOT-RUN"] == 5 and results["counts"]["PASS"] == 5
    assert results["verdict_reason"] == "all 6 tests asked for passed or were skipped by rule; 5 not asked"


def test_junit_lists_a_not_asked_test_as_skipped_with_the_reason(fixture_run):
    suite = ET.fromstring(junit_xml(build_results(fixture_run("pieces")))).find("testsuite")
    assert (suite.get("errors"), suite.get("failures"), suite.get("skipped")) == ("0", "0", "6")
    case = next(c for c in suite.iter("testcase") if c.get("name") == f"test_training[{BF16}]")
    skipped = case.find("skipped")
    assert skipped is not None and case.find("error") is None
    assert skipped.get("message").startswith("not asked: ")


def test_the_report_says_a_combo_was_not_asked_and_shows_no_incomplete_banner(fixture_run):
    html = render_report(build_results(fixture_run("pieces")))
    assert "Not asked: no command of this run asked for this combo." in html
    assert "Run incomplete." not in html


def test_an_asked_combo_without_a_record_still_fails_as_killed(fixture_run):
    run = fixture_run("pieces")
    append(run, {"by": "train", "stages": ["training"], "combos": [BF16], "time": 1780001500.0})
    results = build_results(run)
    row = by_name(results)[f"test_training[{BF16}]"]
    assert results["verdict"] == "FAIL" and results["incomplete"] is True
    assert results["not_run"] == [f"test_training[{BF16}]"]
    assert row["asked"] is True
    assert row["reason"].startswith("not run: the run stopped before it (still going, or the harness was killed)")
    assert f"test_metric[{BF16}]" in results["not_asked"]  # the command asked for training only
    suite = ET.fromstring(junit_xml(results)).find("testsuite")
    assert (suite.get("errors"), suite.get("skipped")) == ("1", "5")


def test_a_stage_all_asked_for_and_never_recorded_is_not_run_and_fails(fixture_run):
    run = fixture_run("pieces")
    append(run, {"by": "all", "stages": ["launch_container", "download_tokenizer", "smoke", "checkpoint", "training",
                                         "metric", "loss_curve", "teardown"], "combos": None, "time": 1780002000.0})
    edit_manifest(run, lambda m: m.update(interrupted=True, finished=1780002100.0))
    results = build_results(run)
    assert results["verdict"] == "FAIL" and results["not_asked"] == []
    assert sorted(results["not_run"]) == sorted(NOT_ASKED)
    assert by_name(results)["test_checkpoint"]["reason"].startswith("not run: the run was interrupted before it")


def test_rows_stopped_by_exitfirst_are_not_run_with_that_reason_and_fail(fixture_run):
    run = fixture_run("pieces")
    append(run, {"by": "all", "stages": ["training", "metric", "loss_curve"], "combos": [BF16], "time": 1780002000.0,
                 "stopped": EXITFIRST})
    results = build_results(run)
    row = by_name(results)[f"test_training[{BF16}]"]
    assert results["verdict"] == "FAIL"
    assert row["reason"] == ("not run: stopped after the first failure (--exitfirst); "
                             "`invoke all --run 20260530-090000-c3d4 --failed` runs it")
    assert f"test_training[{BF16}]" in results["not_run"] and "test_checkpoint" in results["not_asked"]


def test_an_ask_after_a_stop_asks_again(fixture_run):
    run = fixture_run("pieces")
    append(run, {"by": "all", "stages": ["training"], "combos": [BF16], "time": 1.0, "stopped": EXITFIRST},
           {"by": "train", "stages": ["training"], "combos": [BF16], "time": 2.0})
    assert "harness was killed" in by_name(build_results(run))[f"test_training[{BF16}]"]["reason"]


def test_a_run_with_nothing_asked_is_not_a_pass(tmp_path):
    run = RunDir.create(tmp_path / "reports", "r0")
    run.write_manifest({"run_id": "r0", "combos": ["A"]})
    (run.path / LEDGER).write_text("")
    results = build_results(run)
    assert results["verdict"] == "FAIL"
    assert results["verdict_reason"] == "nothing was run: no command of this run asked for any test"


@pytest.mark.parametrize("ledger", ["not json\n", '{"by": "train", "stages": "training"}\n', '[1, 2]\n',
                                    '{"by": "x", "stages": ["teardown"], "combos": null}\n'])
def test_an_unreadable_ledger_counts_every_row_as_asked(fixture_run, ledger):
    run = fixture_run("pieces")
    (run.path / LEDGER).write_text((run.path / LEDGER).read_text() + ledger)
    results = build_results(run)
    assert results["verdict"] == "FAIL" and results["not_asked"] == []
    assert sorted(results["not_run"]) == sorted(NOT_ASKED)


def test_a_ledger_leading_out_of_the_run_is_not_read(fixture_run, tmp_path):
    run = fixture_run("pieces")
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text((run.path / LEDGER).read_text())
    (run.path / LEDGER).unlink()
    (run.path / LEDGER).symlink_to(outside)
    assert read_ledger(run) is None
    assert build_results(run)["verdict"] == "FAIL"


def test_asks_are_appended_in_order_and_read_back(tmp_path):
    run = RunDir.create(tmp_path / "reports", "r1")
    record_ask(run, Ask("train", ("training",), ("A",), time=1.0))
    record_ask(run, Ask("all", ("training", "metric"), ("B",), time=2.0, stopped=EXITFIRST))
    ledger = read_ledger(run)
    assert [a.by for a in ledger.asks] == ["train", "all"]
    assert ledger.state("training", "A") == "asked" and ledger.state("metric", "B") == "stopped"
    assert ledger.state("metric", "A") == "not asked" and ledger.state("teardown", None) == "not asked"
    assert Ask("all", ("smoke", "training")).covers("training", "any combo")


def test_an_ask_never_writes_through_a_planted_link(tmp_path):
    run = RunDir.create(tmp_path / "reports", "r2")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (run.path / LEDGER).symlink_to(victim)
    record_ask(run, Ask("train", ("training",)))
    assert victim.read_text() == "keep\n" and not (run.path / LEDGER).is_symlink()
    (run.path / LEDGER).unlink()
    os.link(victim, run.path / LEDGER)
    with pytest.raises(BadInput, match="never writes through another file"):
        record_ask(run, Ask("train", ("training",)))
    assert victim.read_text() == "keep\n"


def test_a_dry_run_asks_nothing(tmp_path):
    run = DryRunDir(tmp_path / "dry")
    record_ask(run, Ask("all", ("training",)))
    assert not (run.path / LEDGER).exists()
