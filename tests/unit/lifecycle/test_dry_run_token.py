"""A dry run prints the HF_TOKEN export line exactly when a run would write it (the token file is readable)."""

from __future__ import annotations

from types import SimpleNamespace

from cvs_tasks.lifecycle.setup_stages import has_token


def _session(token_file, dry_run=True):
    return SimpleNamespace(dry_run=dry_run, config=SimpleNamespace(paths=SimpleNamespace(hf_token_file=str(token_file))))


def test_a_dry_run_exports_the_token_only_when_the_file_holds_one(tmp_path):
    token = tmp_path / "hf_token"
    assert has_token(_session(token)) is False  # missing: a run would warn and run without HF_TOKEN
    token.write_text("# comment only\n")
    assert has_token(_session(token)) is False
    token.write_text("hf_abc\n")
    assert has_token(_session(token)) is True


def test_a_real_run_asks_the_launch_record(tmp_path):
    record = SimpleNamespace(reason="running; no HF token (/x not readable)")
    session = SimpleNamespace(dry_run=False, run=SimpleNamespace(read_record=lambda name: record))
    assert has_token(session) is False
    record.reason = "running"
    assert has_token(session) is True
