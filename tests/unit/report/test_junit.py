from __future__ import annotations

import xml.etree.ElementTree as ET

from cvs_tasks.report.junit import junit_xml, xml_safe
from cvs_tasks.report.render import render_all
from cvs_tasks.report.results import build_results

from .conftest import edit_record

FP8 = "MBS=4,GBS=128,PRECISION=FP8"
BF16 = "MBS=4,GBS=128,PRECISION=BF16"


def suite_of(xml: bytes) -> ET.Element:
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in suite.findall("testcase")}


def test_counts_match_results_and_one_testcase_per_row(fixture_run):
    run = fixture_run("failed_nccl")
    results = build_results(run)
    suite = suite_of(junit_xml(results))
    assert suite.get("name") == "cvs-tasks distributed Megatron-LM"
    assert int(suite.get("tests")) == len(results["tests"]) == len(suite.findall("testcase"))
    assert int(suite.get("failures")) == results["counts"]["FAIL"] == len(suite.findall("testcase/failure"))
    assert int(suite.get("errors")) == results["counts"]["ERROR"] == len(suite.findall("testcase/error"))
    assert int(suite.get("skipped")) == results["counts"]["SKIPPED"] == len(suite.findall("testcase/skipped"))
    assert float(suite.get("time")) > 0
    assert [c.get("name") for c in suite.findall("testcase")] == [t["name"] for t in results["tests"]]


def test_testcase_class_names_and_times(fixture_run):
    suite = suite_of(junit_xml(build_results(fixture_run("passing_distributed"))))
    by_name = cases(suite)
    assert by_name[f"test_training[{FP8}]"].get("classname") == "cvs.training"
    assert by_name[f"test_training[{FP8}]"].get("time") == "540.000"
    assert by_name["test_teardown"].get("classname") == "cvs.teardown"
    assert by_name["test_download_tokenizer"].find("skipped").get("message").startswith("Primus takes HF repo IDs")


def test_failure_carries_reason_violated_metric_and_log_path(fixture_run):
    by_name = cases(suite_of(junit_xml(build_results(fixture_run("failed_nccl")))))
    metric_failure = by_name[f"test_metric[{BF16}]"].find("failure")
    assert metric_failure.get("message") == "throughput_per_gpu 396.2 < 420 TFLOP/s/GPU"
    assert "throughput_per_gpu: 395.11 TFLOP/s/GPU (expected >= 420 TFLOP/s/GPU)" in metric_failure.text
    training_failure = by_name[f"test_training[{FP8}]"].find("failure")
    assert "error nccl_timeout on node mi300-b, rank 9" in training_failure.text  # the rank its line names
    assert "log: logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node1/training.log" in training_failure.text
    assert "[31m" not in training_failure.text


def test_error_rows_become_error_elements(fixture_run):
    run = fixture_run("passing_distributed")
    edit_record(run, "teardown.json", lambda d: d.update(status="ERROR", reason="docker rm timed out"))
    suite = suite_of(junit_xml(build_results(run)))
    error = cases(suite)["test_teardown"].find("error")
    assert error.get("message") == "docker rm timed out"
    assert "log: logs/teardown.log" in error.text
    assert suite.get("errors") == "1"


def test_not_run_rows_are_errors_with_the_reason(fixture_run):
    suite = suite_of(junit_xml(build_results(fixture_run("partial"))))
    error = cases(suite)["test_teardown"].find("error")
    assert (error.get("type") == "NotRun"
            and error.get("message").startswith("not run: the run was interrupted before it"))
    assert int(suite.get("errors")) >= 5  # every test the run never reached counts
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["verdict"] == "FAIL" and props["incomplete"] == "True"


def test_characters_illegal_in_xml_are_stripped_and_the_file_parses(fixture_run):
    run = fixture_run("failed_nccl")
    edit_record(
        run,
        "training[MBS_4_GBS_128_PRECISION_FP8].json",
        lambda d: (d.update(reason="bad\x00byte\x07 <&> \ufffe end"), d["data"]["error"].update(text="\x1b[1mx\x0c")),
    )
    path = render_all(run)["junit"]
    suite = suite_of(path.read_bytes())
    failure = cases(suite)[f"test_training[{FP8}]"].find("failure")
    assert failure.get("message") == "badbyte <&>  end"


def test_xml_safe_keeps_tabs_newlines_and_unicode():
    assert xml_safe("a\tb\nc\r😀é\x00\x1f") == "a\tb\nc\r😀é"
    assert xml_safe(None) == ""
