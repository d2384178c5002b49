from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from jinja2 import UndefinedError

from cvs_tasks.errors import BadInput
from cvs_tasks.report.html import make_environment, render_metrics, render_report
from cvs_tasks.report.render import render_all
from cvs_tasks.report.results import build_results

from .conftest import edit_manifest, edit_record

VOID = {"meta", "br", "hr", "img", "input", "link", "circle", "line", "rect", "polyline", "path", "col", "wbr"}
PAGES = {"metrics.html", "results.json", "junit.xml", "run.json", "report.html"}


class TagBalance(HTMLParser):
    """Fails on a closing tag that does not match the open one (template mistakes)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.hrefs: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k == "href" and v is not None]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k == "href" and v is not None]

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def parse(html: str) -> TagBalance:
    parser = TagBalance()
    parser.feed(html)
    parser.close()
    return parser


def rendered(run) -> str:
    return Path(render_all(run)["report"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["passing_distributed", "failed_nccl", "partial"])
def test_every_fixture_renders_balanced_self_contained_html(fixture_run, name):
    html = rendered(fixture_run(name))
    parsed = parse(html)
    assert parsed.problems == [] and parsed.stack == []
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    urls = re.findall(r"https?://[^\s\"'<>]+", html)
    assert set(urls) <= {"http://www.w3.org/2000/svg"}, urls


def test_summary_shows_verdict_cluster_image_and_counts(fixture_run):
    html = rendered(fixture_run("passing_distributed"))
    assert '<div class="verdict PASS">' in html
    for text in ("gpu-node-01, gpu-node-02 (2 nodes)", "rocm/primus:v25.9_gfx942", "Primus", "distributed",
                 "MI300X × 8 per node", "llama3.1_8b", "2026-05-28", "25 m 10 s", "11 tests"):
        assert text in html, text
    assert "10 metrics: 6 passed, 2 recorded, 2 skipped" in html  # a status that does not occur is not named


def test_per_combo_sections_have_metrics_plots_scaling_and_checkpoint(fixture_run):
    html = rendered(fixture_run("passing_distributed"))
    assert html.count('<section class="combo"') == 2
    assert html.count("<th>Metric</th><th>Expected</th><th>Actual</th><th>Unit</th><th>Status</th>") == 2
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 4  # loss + throughput per combo
    assert html.count("<circle") >= 20  # sampled loss points (10 per combo)
    assert "stroke-dasharray" in html  # the trend line
    assert "Scaling efficiency</span>96.4 %" in html
    assert "Checkpoint save / resume" in html and "First resumed step" in html
    assert "throughput_per_gpu" in html and "training.throughput_per_gpu" not in html


def test_effective_config_is_collapsed_pretty_json(fixture_run):
    html = rendered(fixture_run("passing_distributed"))
    details = html[html.index("<details><summary>Show the effective config"):]
    assert "&#34;HF_TOKEN&#34;: &#34;***&#34;" in details or "&quot;HF_TOKEN&quot;: &quot;***&quot;" in details


def test_links_point_only_at_files_that_exist(fixture_run):
    run = fixture_run("failed_nccl")
    html = rendered(run)
    hrefs = parse(html).hrefs
    log_links = [h for h in hrefs if not h.startswith("#") and h not in PAGES]
    assert log_links, "expected links to logs"
    for href in log_links:  # percent-encoded relative links (a file name can never become a scheme)
        assert (run.path / unquote(href)).is_file(), href
    assert "MBS_4_GBS_128_PRECISION_BF16/out-node1/training.log\"" not in html  # listed, never pulled back


def test_failed_combo_shows_signature_node_line_and_clean_log_tail(fixture_run):
    html = rendered(fixture_run("failed_nccl"))
    assert "Training failed: NCCL timeout on mi300-b (rank 1) at step 37/200" in html
    assert "nccl_timeout" in html and "<span>Line</span>9</li>" in html
    assert "<span>Node</span>node mi300-b, rank 9</li>" in html  # the rank its failing line names
    assert "torch.distributed.DistBackendError" in html
    assert "\x1b" not in html and "[31m" not in html
    assert '<div class="verdict FAIL">' in html
    assert 'class="row-FAIL"' in html


def test_a_failed_run_opens_with_the_first_failure_and_skipped_rows_link_to_it(fixture_run):
    run = fixture_run("failed_nccl")
    edit_record(run, "metric[MBS_4_GBS_128_PRECISION_FP8].json",
                lambda d: d.update(reason="skipped: test_training[MBS=4,GBS=128,PRECISION=FP8] failed",
                                   data={"blocked_by": "test_training[MBS=4,GBS=128,PRECISION=FP8]"}))
    html = rendered(run)
    callout = html[html.index('id="first-failure"'):html.index('class="counts"')]
    assert 'href="#test-test-training-MBS-4-GBS-128-PRECISION-FP8-"' in callout
    assert "node mi300-b, rank 9" in callout and "nccl_timeout" in callout  # the rank the failing line names
    assert '<span class="hit">      9  [rank9]' in callout  # the line, in its log context
    assert "      8  " in callout and "     10  [rank9]: NCCL error in" in callout
    assert "What to do:" in callout and "collective failed" in callout
    assert 'href="logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node1/training.log"' in callout
    assert 'id="test-test-training-MBS-4-GBS-128-PRECISION-FP8-"' in html  # the row it links to
    assert ('<a href="#test-test-training-MBS-4-GBS-128-PRECISION-FP8-">skipped: '
            'test_training[MBS=4,GBS=128,PRECISION=FP8] failed</a>') in html


def test_a_passing_run_has_no_callout(fixture_run):
    assert 'id="first-failure"' not in rendered(fixture_run("passing_distributed"))


def test_script_in_reason_and_log_tail_renders_as_text(fixture_run):
    run = fixture_run("failed_nccl")
    evil = "<script>alert('x')</script>"
    name = "training[MBS_4_GBS_128_PRECISION_FP8].json"
    edit_record(run, name, lambda d: (d.update(reason=evil), d["data"]["log_tail"].append(evil)))
    edit_manifest(run, lambda m: m.update(image=evil))
    paths = render_all(run)
    for key in ("report", "metrics"):
        html = paths[key].read_text()
        assert "<script>" not in html
    report = paths["report"].read_text()
    assert report.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") >= 3


def test_partial_run_renders_dashes_and_the_incomplete_banner(fixture_run):
    html = rendered(fixture_run("partial"))
    assert "<dt>Image</dt><dd>—</dd>" in html
    assert "<dt>Model</dt><dd>—</dd>" in html
    assert "Run incomplete." in html and "5 expected tests did not run" in html
    assert ("not run: the run was interrupted before it" in html
            and '<span class="status NOT-RUN">NOT-RUN</span>' in html)
    assert "Not run (run incomplete): no training, metric or loss-curve record for this combo." in html


def test_manifest_with_missing_fields_still_renders(fixture_run):
    run = fixture_run("partial")
    edit_manifest(run, lambda m: [m.pop(k) for k in ("hosts", "created")] and m.update(gpus_per_node=None, combos=None))
    html = rendered(run)
    assert "<dt>Cluster</dt><dd>—</dd>" in html
    assert "<dt>Started</dt><dd>—</dd>" in html


def test_manifest_with_wrong_types_is_an_error_naming_the_fields(fixture_run):
    run = fixture_run("partial")
    edit_manifest(run, lambda m: m.update(hosts="not-a-list", created="yesterday"))
    with pytest.raises(BadInput, match=r"run\.json: created: should be a time.*hosts: should be a list"):
        rendered(run)


def test_render_report_needs_no_run_directory():
    results = {"verdict": "FAIL", "run_id": "x", "tests": [], "combos": [], "counts": {}, "metric_counts": {}}
    html = render_report(results)
    assert "cvs-tasks run <span class=\"mono\">x</span>" in html
    assert "No metric results" in render_metrics(results)


def test_templates_reject_undefined_names():
    env = make_environment()
    with pytest.raises(UndefinedError):
        env.from_string("{{ missing.field }}").render()
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


def test_results_drive_the_metrics_page(fixture_run):
    run = fixture_run("failed_nccl")
    results = build_results(run)
    html = render_metrics(results)
    assert "<th>Sweep</th><th>Metric</th><th>Expected</th><th>Actual</th><th>Unit</th><th>Status</th>" in html
    assert html.count("<tr class=\"row-") == results["metric_counts"]["total"] == 5
    assert "5 metrics: 1 failed, 3 passed, 1 recorded" in html
    assert '<td class="text-FAIL"' in html and "395.11" in html
    assert "Training Metric Results (distributed)" in html
    assert parse(html).problems == []


def test_health_rows_render_per_combo_and_a_kernel_line_is_text(fixture_run):
    from cvs_tasks.health import HealthCheck

    run = fixture_run("passing_distributed")
    line = "[ 8123.456789] amdgpu 0000:c1:00.0: amdgpu: GPU reset begin! <b>"
    checks = [HealthCheck("rdma_error_counters", "PASS", "no RDMA error counter grew (4 port(s) on 2 node(s))"),
              HealthCheck("kernel_log", "FAIL", f"1 amdgpu fault line(s): node 10.0.0.2: GPU reset: {line}",
                          [{"status": "FAIL", "node": "10.0.0.2", "kind": "gpu_reset", "what": "GPU reset",
                            "line": line}], [], 1)]
    edit_record(run, "training[MBS_4_GBS_128_PRECISION_FP8].json",
                lambda d: d["data"].update(health={"checks": [c.to_dict() for c in checks]}))
    html = rendered(run)
    assert parse(html).problems == []
    assert html.count("<h3>Health checks</h3>") == 1
    assert "no RDMA error counter grew (4 port(s) on 2 node(s))" in html
    assert "GPU reset begin! &lt;b&gt;" in html and "GPU reset begin! <b>" not in html


# -- issue #26 item 8: the first box is exact ---------------------------------------------------------
def callout_of(html: str) -> str:
    return html[html.index('id="first-failure"'):html.index('class="counts"')]


def test_a_threshold_failure_box_names_node_metric_unit_bound_and_links_the_node_log(fixture_run):
    run = fixture_run("failed_nccl")
    edit_record(run, "training[MBS_4_GBS_128_PRECISION_FP8].json", lambda d: d.update(started=1780001000.0))
    callout = callout_of(rendered(run))  # the BF16 metric gate now failed first
    assert "test_metric[MBS=4,GBS=128,PRECISION=BF16]" in callout
    assert " on <b" in callout and "—" not in callout  # never "on –"
    assert "node mi300-a" in callout  # the node whose log was measured: the one log of the combo pulled back
    assert "<td class=\"mono\">throughput_per_gpu</td><td class=\"num\">395.11 TFLOP/s/GPU</td>" in callout
    assert "&gt;= 420 TFLOP/s/GPU" in callout
    node_log = 'href="logs/training/MBS_4_GBS_128_PRECISION_BF16/out-node0/training.log">node log</a>'
    assert node_log in callout
    assert 'href="logs/metric%5BMBS_4_GBS_128_PRECISION_BF16%5D.log">node log' not in callout


def test_an_oom_run_s_chips_agree_with_the_fail_verdict(fixture_run):
    run = fixture_run("failed_nccl")
    def passed(record):
        record.update(status="PASS", reason="4 gated metrics passed")
        for m in record["metrics"]:
            m["status"] = "PASS" if m["status"] == "FAIL" else m["status"]

    edit_record(run, "metric[MBS_4_GBS_128_PRECISION_BF16].json", passed)  # only the OOM-like training fails
    html = rendered(run)
    assert '<div class="verdict FAIL">' in html
    counts = html[html.index('<ul class="counts">'):html.index("</ul>", html.index('<ul class="counts">'))]
    assert "0 Failed" not in counts and "0 failed" not in counts and "<b>0</b>" not in counts
    assert '<li class="FAIL"><b>1</b> FAIL</li>' in counts
    chips = [int(n) for n in re.findall(r"<b>(\d+)</b>", counts)]
    assert sum(chips) == int(re.search(r"<li>(\d+) tests</li>", counts).group(1))


def test_an_interrupted_run_is_called_interrupted_with_its_run_id(fixture_run):
    run = fixture_run("partial")  # the manifest says interrupted; training FP8 was stopped by Ctrl-C
    edit_record(run, "training[MBS_4_GBS_128_PRECISION_FP8].json",
                lambda d: d.update(status="ERROR", reason="interrupted by the user",
                                   data={**d.get("data", {}), "interrupted": True}))
    html = rendered(run)
    callout = callout_of(html)
    assert "Run <span class=\"mono\">20260529-080000-e5f6</span> was interrupted" in callout
    assert '<span class="status INTERRUPTED">INTERRUPTED</span>' in callout
    assert "`invoke all --run 20260529-080000-e5f6`" in callout
    assert "infrastructure problem" not in html and "&lt;id&gt;" not in html and "<id>" not in html
    assert '<li class="ERROR">interrupted</li>' in html


# -- issue #25 item 6: the report at 1,024 nodes ------------------------------------------------------
def test_a_combo_node_table_puts_the_culprit_failed_and_lagging_nodes_first_and_caps_the_rest():
    from cvs_tasks.report.html import NODE_ROWS, node_rows

    nodes = [{"host": f"n{r:04d}", "rank": r, "status": "PASS", "last_step": 200, "planned": 200,
              "log": f"logs/training/X/out-node{r}/training.log"} for r in range(1024)]
    nodes[900].update(status="FAIL", reason="stopped after peer failure")
    nodes[17].update(status="FAIL", reason="gpu_oom")
    nodes[400].update(last_step=150)
    view = node_rows(nodes, {"logs/training/X/out-node17/training.log"}, culprit="n0017")
    assert [n["host"] for n in view["nodes"][:4]] == ["n0017", "n0900", "n0400", "n0000"]
    assert len(view["nodes"]) == NODE_ROWS and view["nodes_total"] == 1024
    assert view["nodes_hidden"] == 1024 - NODE_ROWS and view["nodes_left_out"] == f"{1024 - NODE_ROWS} passed"
    assert view["nodes"][0]["href"] == "logs/training/X/out-node17/training.log" and view["nodes"][1]["href"] == ""


def test_a_test_row_links_the_stage_log_and_failed_nodes_first_then_says_how_many_more():
    from cvs_tasks.report.html import LINKS_SHOWN, test_view

    logs = [{"label": f"node {r} log", "path": f"logs/n{r}.log", "exists": True} for r in range(1024)]
    logs.append({"label": "stage log", "path": "logs/training[X].log", "exists": True})
    test = {"name": "test_training[X]", "combo": "X", "status": "FAIL", "logs": logs,
            "nodes": [{"host": "n700", "rank": 700, "status": "FAIL", "log": "logs/n700.log"}]}
    view = test_view(test)
    assert [link["label"] for link in view["links"][:2]] == ["node 700 log", "stage log"]
    assert len(view["links"]) == LINKS_SHOWN and view["more_links"] == 1025 - LINKS_SHOWN


def test_the_fingerprint_and_diagnose_tables_put_odd_nodes_first():
    from cvs_tasks.report.nodes import nodes_view

    prints = {f"n{r}": {"rocm": "6.4.1", "kernel": "6.8.0"} for r in range(40)}
    prints["n33"]["rocm"] = "6.2.0"
    results = {"tests": [
        {"stage": "launch_container", "recorded": True, "details": {"fingerprints": prints}, "nodes": []},
        {"stage": "diagnose", "recorded": True, "name": "test_diagnose", "nodes": [], "details": {
            "outliers": [{"host": "n20", "reason": "step time 30% above the median"}],
            "per_node": [{"host": f"n{r}", "status": "PASS"} for r in range(40)]}}]}
    view = nodes_view(results)
    assert view["rows"][0]["host"] in ("n33", "n20") and {r["host"] for r in view["rows"][:2]} == {"n33", "n20"}
    assert view["diagnose"][0]["host"] == "n20" and view["diagnose"][0]["outlier"] is True


def test_1024_nodes_render_a_page_that_stays_small_with_complete_node_lists(tmp_path):
    from cvs_tasks.report.nodes import write_node_lists

    def training(combo, failed):
        nodes = [{"host": f"gpu-{r:04d}", "rank": r, "status": "FAIL" if failed else "PASS", "reason": "",
                  "last_step": 37 if failed else 200, "planned": 200,
                  "log": f"logs/training/{combo}/out-node{r}/training.log"} for r in range(1024)]
        logs = [{"label": f"node {r} log", "path": n["log"], "exists": True} for r, n in enumerate(nodes)]
        error = {"name": "nccl_timeout", "cls": "nccl", "host": "gpu-0517", "rank": 517, "line": 9, "text": "x"}
        return {"name": f"test_training[{combo}]", "stage": "training", "combo": combo, "recorded": True,
                "status": "FAIL" if failed else "PASS", "reason": "", "nodes": nodes, "logs": logs, "metrics": [],
                "details": {"error": error} if failed else {}}

    combos = [f"C{i}" for i in range(16)]
    results = {"verdict": "FAIL", "run_id": "r", "combos": combos, "counts": {}, "metric_counts": {},
               "tests": [training(c, c in ("C3", "C10")) for c in combos]}
    html = render_report(results)
    assert len(html) < 1_000_000, len(html)  # was 5+ MB: a row and a link per node per combo
    assert html.count("<tr class=\"row-") <= 16 * 64 + 16
    write_node_lists(tmp_path, results)
    failing = (tmp_path / "failing_nodes.txt").read_text().split()
    passing = (tmp_path / "passing_nodes.txt").read_text().split()
    assert len(failing) == 1024 and passing == [] and len(set(failing)) == 1024
    assert "every node is in passing_nodes.txt / failing_nodes.txt" in html
