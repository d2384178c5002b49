"""Text from nodes is text (issue #29, item 5).

A node's error line, kernel version, host fact or log line that holds rich markup (`[/oops]`)
must not crash a console view, and one that holds terminal escape sequences (window title,
hyperlink, screen reset, CSI, a C1 control) must reach the terminal as visible text, never as
bytes the terminal obeys. Each console command is driven with such text: `all` / `diagnose`
(the live listener and the summary), `report`, `compare`, `history`, `logs.scan`, `logs.parse`,
`cluster.check`, `cluster.trust`, and the error message of any task. The HTML report escapes the
same text (jinja2 autoescape).
"""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit
from rich.console import Console

from cvs_tasks.errors import InfraError
from cvs_tasks.report.console import make_console_listener, print_summary
from cvs_tasks.run.events import Message, NodeProgress, StageEvent
from cvs_tasks.terminal import cell, echo, line, make_console, visible
from tests.hostile.hostile_helpers import REPO, Sandbox
from tests.unit.history.runs import make_run

PAYLOADS = {
    "markup close": "[/oops]",
    "markup style": "[bold red]loud[/bold red]",
    "markup link": "[link=https://evil.example]click[/link]",
    "OSC 0 title": "\x1b]0;pwn-title\x07",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/x\x1b\\hyperlink\x1b]8;;\x1b\\",
    "reset": "\x1bc",
    "CSI": "\x1b[2J\x1b[31mcsi-red\x1b[0m",
    "carriage return": "over\rwrite",
    "C1 CSI": "c1-\x9b31m",
    "DEL": "del-\x7f",
    "newline": "first\nsecond",
    "bidi override": "\u202eevil",
}
HOSTILE = " ".join(PAYLOADS.values()) + " café 漢字"
# What must still be readable after the trip: the words, the markup as typed, the escapes shown.
READABLE = ("[/oops]", "[bold red]loud[/bold red]", "[link=https://evil.example]click[/link]", "pwn-title",
            "hyperlink", "csi-red", "\\x1b]0;", "\\x1bc", "\\x9b31m", "\\x7f", "café 漢字")
RAW = ("\x1b", "\x9b", "\x07", "\r", "\x7f", "\u202e")
HOSTILE_LOG = REPO / "tests" / "fixtures" / "logs" / "fail_hostile_terminal.log"


def assert_clean(out: str, *, readable=READABLE) -> None:
    """No control byte a terminal would obey, and the hostile text still there to read."""
    for raw in RAW:
        assert raw not in out, (raw, out[-2000:])
    for words in readable:
        assert words in out, (words, out[-2000:])


# --- the one function ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_visible_shows_every_control_and_keeps_the_words(name):
    shown = visible(PAYLOADS[name])
    assert all(raw not in shown for raw in RAW + ("\n",)), shown
    assert visible(shown) == shown  # idempotent: showing twice changes nothing


def test_visible_keeps_plain_unicode_and_shows_escapes_readably():
    assert visible("café 漢字 😀 ñ — x") == "café 漢字 😀 ñ — x"
    assert visible("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert visible("1\n2\r3\t4\x00\x9b\x7f") == "1\\n2\\r3\\t4\\x00\\x9b\\x7f"
    assert visible("l1\nl2\x1b", keep_newlines=True) == "l1\nl2\\x1b"
    assert visible(None) == "None" and visible(3.5) == "3.5"


def test_the_safe_console_cannot_be_bypassed_by_a_print_site_that_forgets_cell():
    """A raw str (markup and escapes), a Text built raw, a table of raw strs: all shown, none obeyed."""
    from rich.table import Table
    from rich.text import Text

    out = StringIO()
    console = make_console(file=out, width=400)
    console.print(HOSTILE)
    console.print(Text(HOSTILE.replace("\r", "")))
    table = Table(title=HOSTILE)
    table.add_column("raw")
    table.add_row(HOSTILE)
    console.print(table)
    assert_clean(out.getvalue(), readable=READABLE[:3] + ("pwn-title", "café 漢字"))


# --- `invoke all` / `diagnose`: the live listener and the end-of-run summary -------------------

def hostile_results() -> dict:
    return {"run_id": "run-1", "verdict": "FAIL", "verdict_reason": f"node0: {HOSTILE}",
            "tests": [{"name": f"test_training[{HOSTILE}]", "status": "FAIL", "duration_s": 3.0,
                       "reason": f"node node0 (10.0.0.1): exit status 1: {HOSTILE}"},
                      {"name": "test_smoke", "status": "PASS", "duration_s": 1.0, "reason": "[/oops]"}]}


@pytest.mark.parametrize("console_kind", ["safe", "plain rich Console"])
def test_the_summary_of_all_and_report_prints_node_text_as_text(console_kind):
    out = StringIO()
    console = make_console(file=out, width=2000) if console_kind == "safe" else Console(file=out, width=2000)
    print_summary(hostile_results(), console)
    text = out.getvalue()
    assert_clean(text)
    assert "Verdict: FAIL - node0: [/oops]" in text


@pytest.mark.parametrize("live", [False, True])
def test_the_progress_listener_prints_node_text_as_text(live):
    out = StringIO()
    console = Console(file=out, width=2000, force_terminal=live, color_system=None)
    with make_console_listener(console, live=live) as listener:
        listener(StageEvent("training", "MBS=1"))
        listener(NodeProgress("training", "MBS=1", f"node{HOSTILE}", 0, "running", step=3, total=10,
                              note=HOSTILE))
        listener(Message(f"warning from node: {HOSTILE}", "warning"))
        listener(StageEvent("training", "MBS=1", status="FAIL", reason=HOSTILE))
    text = out.getvalue()
    if live:  # the live display moves the cursor itself (CSI); no escape from the node text may pass
        for raw in ("\x1b]", "\x1bc", "\x9b", "\x07", "\x1b[2J", "\x1b[31m", "\u202e"):
            assert raw not in text
        assert "\\x1b]0;pwn-title" in text and "[/oops]" in text
    else:
        assert_clean(text)


# --- `invoke report`: the CLI on a run directory whose records hold node text ------------------

def hostile_run_dir(sandbox: Sandbox) -> Path:
    source = REPO / "tests" / "fixtures" / "rundir" / "failed_nccl"
    target = sandbox.reports / source.name
    shutil.copytree(source, target)
    record = target / "stages" / "training[MBS_4_GBS_128_PRECISION_FP8].json"
    data = json.loads(record.read_text())
    data["reason"] = f"node node1: {HOSTILE} <script>alert(1)</script>"
    for node in data.get("nodes", []):
        node["reason"] = f"{HOSTILE} <img src=x onerror=alert(2)>"
    record.write_text(json.dumps(data))
    return target


def test_invoke_report_prints_node_text_as_text_and_the_html_escapes_it(sandbox):
    run = hostile_run_dir(sandbox)
    res = sandbox.cli("report", "--run", str(run))
    assert res.code == 1 and "Traceback" not in res.text, res.text[-3000:]
    assert_clean(res.out)
    assert_clean(res.err, readable=("verdict FAIL",))
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html


# --- `invoke compare` and `invoke history`: a node's `uname -r` --------------------------------

def test_invoke_compare_prints_a_hostile_kernel_version_as_text(sandbox):
    facts = {"127.0.0.2": {"kernel": f"6.8.0 {HOSTILE}", "gpu_count": 8}}
    make_run(sandbox.reports, "run-a", created=1.0e9, hosts=["127.0.0.2"],
             facts={"127.0.0.2": {"kernel": "6.8.0", "gpu_count": 8}})
    make_run(sandbox.reports, "run-b", created=1.0e9 + 100, hosts=["127.0.0.2"], facts=facts)
    res = sandbox.cli("compare", "run-a", "run-b")
    assert res.code == 0 and "Traceback" not in res.text, res.text[-3000:]
    assert_clean(res.out)
    assert "kernel" in res.out


def test_the_history_table_prints_node_text_as_text():
    from cvs_tasks.history.commands import runs_table

    out = StringIO()
    rows = [{"run_id": "run-1", "started": 1.0e9, "verdict": "FAIL", "suite": "single", "backend": HOSTILE,
             "hosts": ["a"], "config_file": f"/cfg/{HOSTILE}.json", "config_hash": "abcdef0123",
             "combos": {f"MBS=1 {HOSTILE}": "FAIL"}}]
    Console(file=out, width=4000).print(runs_table(rows))
    assert_clean(out.getvalue())


# --- `logs.scan` / `logs.parse`: the log itself is hostile -------------------------------------

@pytest.mark.parametrize("command", ["logs.scan", "logs.parse"])
def test_log_commands_print_hostile_log_lines_as_text(sandbox, command):
    res = sandbox.cli(command, str(HOSTILE_LOG))
    assert res.code == 1 and "Traceback" not in res.text, res.text[-3000:]  # a fatal signature: exit 1
    assert_clean(res.out, readable=("[/oops]", "[bold red]loud[/bold red]", "pwn-title", "\\x1b]0;"))
    assert_clean(res.err, readable=("fatal error signature",))


def test_log_commands_json_escapes_the_same_text(sandbox):
    res = sandbox.cli("logs.scan", "--json", str(HOSTILE_LOG))
    assert all(raw not in res.out for raw in RAW)
    assert any("pwn-title" in hit["text"] and "\x1b" in hit["text"] for hit in json.loads(res.out))


# --- `cluster.check` / `cluster.trust`: what a node reports about itself -----------------------

def test_cluster_check_prints_node_details_as_text(monkeypatch, capsys):
    from cvs_tasks import remote
    from cvs_tasks.remote.check import CHECKS, CheckItem, NodeCheck
    from cvs_tasks.tasks import cluster as cluster_tasks

    items = tuple(CheckItem(name, False if name == "docker" else True, HOSTILE if name == "docker" else "ok")
                  for name in CHECKS)
    checks = [NodeCheck("localhost", 0, items)]
    monkeypatch.setattr(remote, "check_nodes", lambda *a, **k: checks)
    with pytest.raises(Exit) as info:
        cluster_tasks.check(Context(), cluster=str(REPO / "cluster" / "localhost.json"))
    out = capsys.readouterr().out
    assert_clean(out)
    assert_clean(info.value.message, readable=("cluster check failed", "docker"))


def test_cluster_trust_prints_outcomes_as_text(monkeypatch, capsys, tmp_path):
    from cvs_tasks.remote import hostkeys
    from cvs_tasks.tasks import cluster as cluster_tasks

    outcome = hostkeys.TrustOutcome("node0", "10.0.0.1", 22, "ssh-ed25519", "SHA256:x", "error",
                                    f"node node0: cannot fetch the host key: {HOSTILE}")
    monkeypatch.setattr(hostkeys, "scan_keys", lambda *a, **k: [outcome])
    with pytest.raises(Exit) as info:
        cluster_tasks.trust(Context(), cluster=str(REPO / "cluster" / "localhost.json"),
                            known_hosts=str(tmp_path / "kh"))
    assert_clean(capsys.readouterr().out)
    assert_clean(info.value.message, readable=("not recorded", "pwn-title", "\\x1bc"))


# --- every task: an error message quoting node text ------------------------------------------

def test_a_task_error_quoting_node_text_is_shown_not_obeyed():
    from cvs_tasks.tasks._common import user_errors

    with pytest.raises(Exit) as info:
        with user_errors():
            raise InfraError(f"2 node(s) failed:\n  node0: {HOSTILE}\n  node1: ok")
    message = info.value.message
    assert message.splitlines()[-1] == "  node1: ok"  # the message's own lines stay lines
    assert_clean(message)


def test_echo_and_line_helpers_show_node_text(capsys):
    echo(f"x {HOSTILE}")
    assert_clean(capsys.readouterr().out)
    assert "\x1b" not in line(("a\x1b[31m", "bold"), "b\x9b", cell("c\x07")).plain
