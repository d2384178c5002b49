"""Secrets are masked before any cut: a token split at any offset between two reads, a token in a
progress bar longer than 64 KiB that has no newline yet, a token in the trainer's arguments dump.
It appears in no node-log copy, stage record, results.json, report page, history database or
console line."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvs_tasks.lifecycle.watch import Watcher, WatchSettings, WatchTarget
from cvs_tasks.metrics import LogParser
from cvs_tasks.remote.testing import ScriptedHosts
from cvs_tasks.run.records import NodeOutcome, StageRecord
from cvs_tasks.run.redact import MASK, RedactingWriter, Redactor
from cvs_tasks.run.rundir import RunDir
from tests.hostile.hostile_helpers import LOCAL_CLUSTER, TOKEN, one_short_combo
from tests.hostile.test_hostile_secrets import SIM_LAUNCHER

KiB = 1024
PASSWORD = "pw_CANARYregistry-9f8e7d6c5b4a"


def redactor(*secrets: str) -> Redactor:
    r = Redactor()
    for secret in secrets or (TOKEN,):
        r.add(secret)
    return r


def copied(pieces, secrets=()) -> str:
    sink = io.BytesIO()
    sink.close = lambda: None  # keep the bytes readable after the writer closes it
    writer = RedactingWriter(sink, redactor(*secrets))
    for piece in pieces:
        writer.write(piece)
    writer.close()
    return sink.getvalue().decode("utf-8")


def test_a_token_split_at_every_offset_across_two_reads_is_masked():
    text = f"step 1\nHF_TOKEN={TOKEN} tail\n"
    start = text.index(TOKEN)
    for cut in range(start - 2, start + len(TOKEN) + 2):
        out = copied([text[:cut], text[cut:]])
        assert TOKEN not in out and out == text.replace(TOKEN, MASK), cut


@pytest.mark.parametrize("first", [64 * KiB - 1, 64 * KiB + 1, 68 * KiB, 100 * KiB])
def test_a_token_in_a_progress_bar_longer_than_64_kib_is_masked_wherever_a_cut_falls(first):
    """A progress bar with no newline arrives as a first read of ``first`` bytes and the rest. The
    token straddles, at every offset, the read boundary and the points 4 and 64 KiB before it
    (where a copy holding back only the tail of an over-long line used to cut it, unmasked)."""
    for cut in (first, first - 4 * KiB, first - 64 * KiB):
        for shift in range(max(0, len(TOKEN) - cut), len(TOKEN) + 1):
            start = cut - len(TOKEN) + shift
            text = "#" * start + TOKEN + "#" * (first + 8 * KiB - start) + "\n"
            out = copied([text[:first], text[first:]])
            assert TOKEN not in out and out == text.replace(TOKEN, MASK), (cut, shift)


NESTED = ("abcd1234", "abcd1234yy")  # one secret the start of another


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from([TOKEN, PASSWORD, TOKEN[:10], "x", "\n", "#" * 50, "é", TOKEN + TOKEN,
                                       *NESTED, "abcd", "y", "12"]), max_size=12),
       cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_any_stream_of_secrets_cut_anywhere_copies_as_the_whole_text_masked(parts, cuts):
    text = "".join(parts)
    edges = sorted({0, len(text), *[c % (len(text) + 1) for c in cuts]})
    out = copied([text[a:b] for a, b in zip(edges, edges[1:])], (TOKEN, PASSWORD, *NESTED))
    assert out == redactor(TOKEN, PASSWORD, *NESTED)(text)
    assert TOKEN not in out and PASSWORD not in out


def test_the_copy_is_current_after_each_read_unless_its_end_could_begin_a_secret():
    sink = io.BytesIO()
    writer = RedactingWriter(sink, redactor())
    writer.write(f"step 1 {TOKEN}\nstep 2 loss 3.1\n")
    assert sink.getvalue() == f"step 1 {MASK}\nstep 2 loss 3.1\n".encode()  # nothing held back: the tail is whole
    writer.write("progress hf_CANARYho")
    assert sink.getvalue().endswith(b"progress ")  # could be the token: held until the next read
    writer.write("stile, not it\n")
    assert sink.getvalue().endswith(b"progress hf_CANARYhostile, not it\n")


def test_a_secret_inside_a_longer_secret_is_masked_whole():
    r = redactor("abcd1234", "xxabcd1234yy")
    assert r("a xxabcd1234yy b abcd1234") == f"a {MASK} b {MASK}"
    assert r.data({"k": [f"{TOKEN}", ("abcd1234",)], "abcd1234": 1}) == {"k": [TOKEN, [MASK]], MASK: 1}


def test_the_watcher_copy_of_a_long_progress_bar_holds_no_token(tmp_path):
    """The one place node bytes arrive: reads of 64 KiB (``max_bytes``) of a 200 KiB line, the
    token 10 characters before where a 4 KiB hold-back of the line would cut after two reads."""
    bar = "\r" + "=" * (128 * KiB - 4 * KiB - 10 - 1) + TOKEN + "=" * (72 * KiB) + "\n"
    hosts = ScriptedHosts(["n0"])
    hosts.expect_read("/logs/training.log", [bar], exit_code=0, exit_after=1, on="n0")
    copy = tmp_path / "training.log"
    watcher = Watcher(hosts, [WatchTarget(0, "n0", "/logs/training.log", "/s/exit", copy)], iterations=4,
                      settings=WatchSettings(poll_interval_s=0.01, startup_timeout_s=60, max_bytes=64 * KiB),
                      parser_factory=LogParser, listener=lambda e: None, stage="smoke", combo=None,
                      redactor=redactor())
    watcher.run()
    data = copy.read_bytes()
    assert TOKEN.encode() not in data
    assert data == bar.replace(TOKEN, MASK).encode()


def test_every_file_a_run_directory_writes_is_masked(tmp_path):
    """Records, the manifest, results.json and the report pages: masked where they are written."""
    from cvs_tasks.report.render import render_all

    run = RunDir(tmp_path / "run", redactor(TOKEN, PASSWORD))
    run.write_manifest({"run_id": "run", "hosts": ["n0"], "combos": [], "note": f"token {TOKEN}"})
    record = StageRecord("smoke", "FAIL", reason=f"trainer said {TOKEN}",
                         nodes=[NodeOutcome("n0", 0, "FAIL", reason=f"password {PASSWORD}")],
                         data={"effective_config": {"tokenizer": TOKEN}, TOKEN: "as a key",
                               "log_tail": [f"--hf-token {TOKEN}"]})
    run.write_record(record)
    render_all(run)
    files = [p for p in run.path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "smoke.json", "results.json", "report.html", "junit.xml"}
    for path in files:
        data = path.read_bytes()
        assert TOKEN.encode() not in data and PASSWORD.encode() not in data, path
    assert MASK in (run.stages_dir / "smoke.json").read_text()


@pytest.fixture
def dumping_megatron(tmp_path) -> Path:
    """A Megatron-LM root whose launcher puts the job's HF token where a careless setup would: the
    tokenizer argument (so the trainer's arguments dump and effective config carry it) and a
    progress bar longer than 64 KiB without a newline; then it runs the simulated trainer."""
    root = tmp_path / "dumping" / "Megatron-LM"
    launcher = root / "examples" / "llama" / "train_llama3.sh"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/bash\n"
                        "printf 'downloading [%s' \"$(printf '=%.0s' $(seq 1 70000))\"\n"
                        'printf \' %s\' "$HF_TOKEN"\n'
                        "printf '=%.0s' $(seq 1 5000); printf ']\\n'\n"
                        'export TOKENIZER_MODEL="$HF_TOKEN"\n'
                        f'exec bash {SIM_LAUNCHER} "$@"\n')
    launcher.chmod(0o755)
    return root


def test_a_token_in_the_arguments_dump_and_a_long_line_reaches_no_file_of_the_run(sandbox, dumping_megatron):
    edit = one_short_combo(dumping_megatron)

    res = sandbox.cli("all", "--config", str(sandbox.config(edit)), "--cluster", str(LOCAL_CLUSTER), timeout=300)
    assert "Traceback" not in res.text, res.text[-3000:]
    assert res.code in (0, 1), res.text[-3000:]
    assert TOKEN not in res.text
    [run] = [p for p in sandbox.reports.iterdir() if p.is_dir() and not p.is_symlink()]
    [copy] = list(run.rglob("training.log"))
    assert f" {MASK}=" in copy.read_text()  # the long line did arrive, masked
    [training] = [json.loads(p.read_text()) for p in (run / "stages").glob("training*.json")]
    assert training["data"]["effective_config"]["tokenizer"] == MASK  # the dump did carry it
    leaks = [p for p in sandbox.reports.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaks == []
    db = sandbox.reports / "history.sqlite"
    if db.exists():
        dump = "\n".join(sqlite3.connect(db).iterdump())
        assert TOKEN not in dump


def test_a_fatal_line_cut_for_the_reason_is_masked_before_the_cut(tmp_path):
    """The watch's reason keeps the first 200 characters of the fatal line: the token straddles
    that cut, so masking afterwards would leave its first half."""
    head = "[rank5]: torch.OutOfMemoryError: HIP out of memory. "
    line = head + "." * (190 - len(head)) + f" {TOKEN} GPU 5 has a total capacity of 191.98 GiB\n"
    hosts = ScriptedHosts(["n0"])
    hosts.expect_read("/logs/training.log", [line], on="n0")
    watcher = Watcher(hosts, [WatchTarget(0, "n0", "/logs/training.log", "/s/exit", tmp_path / "copy.log")],
                      iterations=4, settings=WatchSettings(poll_interval_s=0.01, startup_timeout_s=60),
                      parser_factory=LogParser, listener=lambda e: None, stage="smoke", combo=None,
                      redactor=redactor())
    outcome = watcher.run()
    assert outcome.status == "failed" and MASK in outcome.reason
    assert TOKEN[:6] not in outcome.reason
