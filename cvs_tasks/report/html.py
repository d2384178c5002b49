"""report.html and metrics.html: jinja2 templates fed a view built from results.json.

Autoescape is on and undefined names are errors, so a ``<script>`` in a reason or a log tail is
shown as text and a template typo fails a test instead of rendering blank. The view below turns
raw values into display strings up front; templates only lay them out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from cvs_tasks.report import svg
from cvs_tasks.report.first_failure import error_where, where_text
from cvs_tasks.report.formatting import (
    DASH,
    fmt_duration,
    fmt_number,
    fmt_test_duration,
    fmt_time,
    or_dash,
    plain_text,
    plural,
    short_metric,
)
from cvs_tasks.report.nodes import health_rows, nodes_view
from cvs_tasks.run.records import StepRow
from cvs_tasks.run.sandbox import href
from cvs_tasks.run.stages import CHECKPOINT, LOSS_CURVE, METRIC, TRAINING
from cvs_tasks.verify.compare import effective_facts

TEMPLATES_DIR = Path(__file__).parent / "templates"
LOSS_COLOUR = "#1565c0"
SAMPLE_COLOUR = "#1565c0"
TREND_COLOUR = "#c62828"
TFLOPS_COLOUR = "#6a1b9a"


def make_environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=select_autoescape(enabled_extensions=("html", "j2", "xml"), default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_report(
    results: Mapping[str, Any],
    *,
    effective_config: Any = None,
    steps_by_combo: Mapping[str, Sequence[StepRow]] | None = None,
    trends: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
) -> str:
    """The full report page for a run (``trends``: combo -> metric -> last runs, for sparklines)."""
    view = report_view(results, effective_config, steps_by_combo or {}, trends or {})
    return make_environment().get_template("report.html.j2").render(**view)


def render_metrics(results: Mapping[str, Any]) -> str:
    """The consolidated Sweep / Metric / Expected / Actual / Unit / Status page."""
    view = {"header": header_view(results), "rows": consolidated_rows(results), "summary": metric_summary(results)}
    return make_environment().get_template("metrics.html.j2").render(**view)


# -- view building -------------------------------------------------------------------------------
def report_view(results: Mapping[str, Any], effective_config: Any, steps_by_combo: Mapping[str, Any],
                trends: Mapping[str, Any] | None = None) -> dict:
    tests = results.get("tests", [])
    return {
        "header": header_view(results),
        "facts": summary_facts(results),
        "total": results.get("counts", {}).get("total", 0),
        "chips": count_chips(results),
        "metric_summary": metric_summary(results),
        "tests": [test_view(t) for t in tests],
        "first_failure": failure_view(results.get("first_failure"), results.get("run_id")),
        "combos": [combo_view(results, c, steps_by_combo.get(c) or [], (trends or {}).get(c) or {})
                   for c in results.get("combos", [])],
        "checkpoint": checkpoint_view(_find(tests, CHECKPOINT.id, None)),
        "nodes": nodes_view(results),
        "config_json": json.dumps(effective_config, indent=2, sort_keys=True) if effective_config else "",
    }


def header_view(results: Mapping[str, Any]) -> dict:
    return {
        "run_id": or_dash(results.get("run_id")),
        "verdict": results.get("verdict", "FAIL"),
        "verdict_reason": results.get("verdict_reason", ""),
        "incomplete": bool(results.get("incomplete")),
        "not_run": list(results.get("not_run", [])),
        "title_suffix": " ".join(
            str(v) for v in (results.get("backend"), results.get("suite"), results.get("model_name")) if v
        ),
        "suite": or_dash(results.get("suite")),
    }


def summary_facts(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs for the summary grid; a missing manifest field shows as a dash."""
    hosts = results.get("hosts") if isinstance(results.get("hosts"), list) else []
    cluster = f"{', '.join(map(str, hosts))} ({plural(len(hosts), 'node')})" if hosts else DASH
    gpu = or_dash(results.get("gpu_name"))
    if results.get("gpus_per_node") and gpu != DASH:
        gpu = f"{gpu} × {results['gpus_per_node']} per node"
    return [
        ("Cluster", cluster),
        ("Image", or_dash(results.get("image"))),
        ("Backend", or_dash(results.get("backend"))),
        ("Suite", or_dash(results.get("suite"))),
        ("GPU", gpu),
        ("Model", or_dash(results.get("model_name"))),
        ("Started", fmt_time(results.get("created"))),
        ("Duration", fmt_duration(results.get("duration_s"))),
        ("Thresholds", _threshold_text(results)),
        ("Config file", or_dash(results.get("config_file"))),
        ("Cluster file", or_dash(results.get("cluster_file"))),
        ("Tool version", or_dash(results.get("tool_version"))),
    ]


def _threshold_text(results: Mapping[str, Any]) -> str:
    name = or_dash(results.get("threshold_file"))
    enforce = results.get("enforce_thresholds")
    if enforce is None:
        return name
    return f"{name} ({'enforced' if enforce else 'record only'})"


def metric_summary(results: Mapping[str, Any]) -> str:
    """The metrics chip: "N metrics: F failed, P passed, R recorded, S skipped", naming only the
    statuses that occur, so a run that failed elsewhere (an OOM) never reads "0 Failed"."""
    mc = results.get("metric_counts", {})
    parts = [f"{mc.get(key, 0)} {word}" for key, word in
             (("FAIL", "failed"), ("PASS", "passed"), ("RECORD", "recorded"), ("SKIPPED", "skipped"))
             if mc.get(key, 0)]
    return plural(mc.get("total", 0), "metric") + (": " + ", ".join(parts) if parts else "")


def count_chips(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The test-count chips under the verdict: every status that occurs (PASS always), so the chips
    add up to the total and a FAIL verdict always has the chip that made it (or "interrupted")."""
    counts = results.get("counts", {})
    chips = [{"key": key, "count": counts.get(key, 0), "label": key}
             for key in ("PASS", "FAIL", "ERROR", "SKIPPED", "NOT-RUN") if key == "PASS" or counts.get(key, 0)]
    if results.get("interrupted"):
        chips.append({"key": "ERROR", "count": "", "label": "interrupted"})
    return chips


LINKS_SHOWN = 8  # log links in a test row; a combo's Nodes table links every node it shows


def test_view(test: Mapping[str, Any]) -> dict:
    blocked_by = (test.get("details") or {}).get("blocked_by")
    links = [{"label": log["label"], "path": href(log["path"])} for log in test.get("logs", [])
             if log.get("exists") and href(log.get("path"))]
    return {
        "name": test["name"],
        "row_id": _row_id(test["name"]),
        "blocked_href": "#" + _row_id(blocked_by) if isinstance(blocked_by, str) else "",
        "anchor": _anchor(test.get("combo")),
        "combo": test.get("combo"),
        "status": test["status"],
        "reason": test.get("reason") or "",
        "duration": fmt_test_duration(test.get("status"), test.get("duration_s")),
        **row_links(test, links),
    }


def row_links(test: Mapping[str, Any], links: list[dict]) -> dict:
    """A test row's log links: all of them up to LINKS_SHOWN; at scale the stage log and the failed
    nodes' logs first, then as many more as fit, and how many are left out (the combo's Nodes table
    and the run directory hold them all)."""
    if len(links) <= LINKS_SHOWN:
        return {"links": links, "more_links": 0}
    failed = {href(n.get("log")) for n in test.get("nodes") or [] if n.get("status") in ("FAIL", "ERROR")}
    first = [link for link in links if link["label"] == "stage log" or link["path"] in failed]
    rest = [link for link in links if link not in first]
    shown = (first + rest)[:max(LINKS_SHOWN, len(first))]
    return {"links": shown, "more_links": len(links) - len(shown)}


def metric_view(metric: Mapping[str, Any]) -> dict:
    return {
        "metric": short_metric(str(metric.get("name", ""))),
        "expected": metric.get("expected") or "-",
        "actual": fmt_number(metric.get("value")),
        "unit": metric.get("unit") or "",
        "status": metric.get("status", "RECORD"),
        "reason": metric.get("reason") or "",
    }


def consolidated_rows(results: Mapping[str, Any]) -> list[dict]:
    rows = []
    for test in results.get("tests", []):
        for metric in test.get("metrics", []):
            rows.append({"sweep": test.get("combo") or DASH, **metric_view(metric)})
    return rows


def combo_view(results: Mapping[str, Any], combo: str, steps: Sequence[StepRow],
               trends: Mapping[str, Any] | None = None) -> dict:
    tests = results.get("tests", [])
    training = _find(tests, TRAINING.id, combo)
    metric = _find(tests, METRIC.id, combo)
    loss = _find(tests, LOSS_CURVE.id, combo)
    details = (training or {}).get("details", {})
    recorded = any(t and t.get("recorded") for t in (training, metric, loss))
    return {
        "recorded": recorded,
        "not_asked": not recorded and all(t is None or t.get("asked") is False for t in (training, metric, loss)),
        "combo": combo,
        "anchor": _anchor(combo),
        "stages": [
            {"label": label, "status": t["status"] if t else "SKIPPED"}
            for label, t in (("training", training), ("metric", metric), ("loss curve", loss))
        ],
        "training_facts": training_facts(details, results),
        "metrics": [{**metric_view(m),
                     "trend": svg.sparkline((trends or {}).get(m.get("name")) or [], m.get("unit") or "")}
                    for m in (metric or {}).get("metrics", [])],
        "has_trend": bool(trends),
        "metric_reason": (metric or {}).get("reason", "") if metric and not metric.get("metrics") else "",
        "loss": loss_view(combo, (loss or {}).get("details", {}), steps),
        "throughput_svg": throughput_svg(combo, steps),
        "error": error_view(training),
        "health": health_rows(details),
        **node_rows((training or {}).get("nodes", []),
                    {log.get("path") for log in (training or {}).get("logs", []) if log.get("exists")},
                    culprit=_error_host(details)),
    }


NODE_ROWS = 64  # rows of a combo's node table; every node is in passing_nodes.txt / failing_nodes.txt


def node_rows(nodes: Sequence[Mapping[str, Any]], pulled: set | frozenset = frozenset(), *,
              culprit: Any = None) -> dict:
    """A combo's node table, the ones to read first: the node the failure was blamed on, the other
    failed nodes, the nodes behind the furthest step (outliers), then the rest, each by rank; at
    most NODE_ROWS rows, with how many of each kind are left out. A node's log is a link when its
    copy is in the run directory (``pulled``)."""
    steps = [n.get("last_step") for n in nodes if isinstance(n.get("last_step"), int)]
    furthest = max(steps) if steps else None

    def kind(n: Mapping[str, Any]) -> int:
        if n.get("status") in ("FAIL", "ERROR"):
            return 0 if culprit is not None and n.get("host") == culprit else 1
        step = n.get("last_step")
        return 2 if furthest is not None and isinstance(step, int) and step < furthest else 3

    ordered = sorted(nodes, key=lambda n: (kind(n), n.get("rank") if isinstance(n.get("rank"), int) else 0))
    shown, hidden = ordered[:NODE_ROWS], ordered[NODE_ROWS:]
    left_out = {word: sum(kind(n) in kinds for n in hidden)
                for word, kinds in (("failed", (0, 1)), ("behind", (2,)), ("passed", (3,)))}
    return {
        "nodes": [{**n, "status": n.get("status", ""), "progress": _progress(n.get("last_step"), n.get("planned")),
                   "href": href(n.get("log")) if n.get("log") in pulled else ""} for n in shown],
        "nodes_total": len(nodes),
        "nodes_hidden": len(hidden),
        "nodes_left_out": ", ".join(f"{count} {word}" for word, count in left_out.items() if count),
    }


def training_facts(details: Mapping[str, Any], results: Mapping[str, Any]) -> list[tuple[str, str]]:
    if not details:
        return []
    if "last_step" not in details:  # failed before any iteration: only what the trainer said it runs
        return effective_facts(details)
    facts = [("Steps", _progress(details.get("last_step"), details.get("planned")))]
    if "completed" in details:
        facts.append(("Completed", or_dash(details.get("completed"))))
    if details.get("tflops_recomputed") is not None:
        facts.append(("TFLOP/s/GPU (recomputed)", fmt_number(details.get("tflops_recomputed"))))
    distributed = results.get("suite") == "distributed" or len(results.get("hosts") or []) > 1
    if distributed or details.get("scaling_efficiency_pct") is not None:
        value = details.get("scaling_efficiency_pct")
        facts.append(("Scaling efficiency", f"{fmt_number(value)} %" if value is not None else DASH))
    return facts + effective_facts(details)


def _error_host(details: Mapping[str, Any]) -> Any:
    error = details.get("error")
    return error.get("host") if isinstance(error, dict) else None


def loss_view(combo: str, details: Mapping[str, Any], steps: Sequence[StepRow]) -> dict:
    """Loss-curve chart (all logged losses, the sampled points, their least-squares trend) and numbers."""
    points = [(p[0], p[1]) for p in details.get("points", []) if isinstance(p, (list, tuple)) and len(p) >= 2]
    logged = [(row.step, row.loss) for row in steps if row.loss is not None]
    series = []
    if logged:
        series.append(svg.Series("lm loss", logged, "#90a4ae", "line"))
    if points:
        series.append(svg.Series("sampled", points, SAMPLE_COLOUR, "dots"))
        numeric = [(float(x), float(y)) for x, y in points if _is_num(x) and _is_num(y)]
        trend = svg.trend_series(numeric, "least-squares trend", TREND_COLOUR)
        if trend:
            series.append(trend)
    chart = svg.line_chart(series, title=f"Loss curve {combo}", x_label="step", y_label="lm loss")
    facts = []
    if details:
        facts = [
            ("Slope", fmt_number(details.get("slope"))),
            ("Max slope", fmt_number(details.get("max_slope"))),
            ("Samples", fmt_number(details.get("n"))),
            ("Decreasing", or_dash(details.get("decreasing"))),
            ("Enforced", or_dash(details.get("enforced"))),
        ]
    return {"svg": Markup(chart), "facts": facts}


def throughput_svg(combo: str, steps: Sequence[StepRow]) -> Markup:
    points = [(row.step, row.tflops) for row in steps if row.tflops is not None]
    chart = svg.line_chart(
        [svg.Series("TFLOP/s/GPU", points, TFLOPS_COLOUR, "line")],
        title=f"Throughput per step {combo}",
        x_label="step",
        y_label="TFLOP/s/GPU",
    )
    return Markup(chart)


def error_view(training: Mapping[str, Any] | None) -> dict | None:
    """The failure block of a combo: signature, node, offending line and the log tail."""
    if not training or training.get("status") not in ("FAIL", "ERROR"):
        return None
    details = training.get("details", {})
    error = details.get("error") or {}
    node = error_where(error) or DASH  # the node, and the rank its failing line names
    return {
        "signature": or_dash(error.get("name")),
        "cls": or_dash(error.get("cls")),
        "node": node,
        "line": error.get("line"),
        "text": plain_text(error.get("text")),
        "reason": training.get("reason") or "",
        "tail": "\n".join(plain_text(line) for line in details.get("log_tail", []) or []),
    }


def checkpoint_view(test: Mapping[str, Any] | None) -> dict | None:
    if not test or not test.get("details"):
        return None
    d = test["details"]
    saves = d.get("save_times_s") or {}
    return {
        "status": test["status"],
        "reason": test.get("reason") or "",
        "facts": [
            ("Last checkpoint step", fmt_number(d.get("last_ckpt"))),
            ("First resumed step", fmt_number(d.get("first_resumed_step"))),
            ("Loss at save", fmt_number(d.get("save_loss"))),
            ("Loss at resume", fmt_number(d.get("resume_loss"))),
            ("Loss rtol", fmt_number(d.get("loss_rtol"))),
            ("Load time", fmt_duration(d.get("load_time_s"))),
        ],
        "saves": [(str(k), fmt_duration(v)) for k, v in saves.items()] if isinstance(saves, dict) else [],
    }


def _find(tests: Sequence[Mapping[str, Any]], stage: str, combo: str | None) -> Mapping[str, Any] | None:
    return next((t for t in tests if t.get("stage") == stage and t.get("combo") == combo), None)


def _progress(step: Any, total: Any) -> str:
    if step is None and total is None:
        return DASH
    return f"{fmt_number(step)} / {fmt_number(total)}"


def failure_view(failure: Mapping[str, Any] | None, run_id: Any = None) -> dict | None:
    """The callout under the verdict: test, node and the rank its line names, signature or failed
    gates (metric, value and bound with units), the line in its log context, the hint, the node log."""
    if not failure:
        return None
    return {
        "test": failure.get("test") or DASH,
        "href": "#" + _row_id(failure.get("test") or "") if failure.get("test") else "",
        "status": failure.get("status") or "FAIL",
        "interrupted": bool(failure.get("interrupted")),
        "run_id": or_dash(run_id),
        "reason": failure.get("reason") or "",
        "where": where_text(failure),
        "signature": " · ".join(str(v) for v in (failure.get("signature"), failure.get("cls")) if v),
        "metrics": list(failure.get("metrics") or []),
        "line_no": failure.get("line_no"),
        "line": plain_text(failure.get("line")),
        "hint": failure.get("hint") or "",
        "context": [(n, plain_text(text), n == failure.get("line_no")) for n, text in failure.get("context") or []],
        "log": href(failure.get("log")),
        "stage_log": href(failure.get("stage_log")),
    }


def _row_id(name: str) -> str:
    return "test-" + "".join(ch if ch.isalnum() else "-" for ch in name)


def _anchor(combo: str | None) -> str:
    return "combo-" + "".join(ch if ch.isalnum() else "-" for ch in combo) if combo else ""


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
