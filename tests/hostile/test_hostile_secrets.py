"""Secrets against hostile files and jobs: a token file with comment lines, a job that prints its
token into the training log, a token split across two log reads. The token appears in no file of
the run directory, no console output and no node script."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvs_tasks.inputs import secret_lines
from cvs_tasks.run.redact import MASK, RedactingWriter, Redactor
from tests.hostile.hostile_helpers import REPO, TOKEN, assert_refused, one_short_combo

SIM_LAUNCHER = REPO / "testbed" / "trainer" / "workspace" / "Megatron-LM" / "examples" / "llama" / "train_llama3.sh"


@pytest.mark.parametrize("content", [
    f"{TOKEN}\n# rotated 2026-12-01\n",
    f"# the site token\n{TOKEN}\n",
    f"  {TOKEN}  \r\n\n#\n",
])
def test_every_non_comment_line_of_a_token_file_is_secret(content):
    assert secret_lines(content) == [TOKEN]
    redactor = Redactor()
    for line in secret_lines(content):
        redactor.add(line)
    assert TOKEN not in redactor(f"token={TOKEN}; again {TOKEN}")


@settings(max_examples=200, deadline=None)
@given(before=st.text(max_size=200), after=st.text(max_size=200), cuts=st.lists(st.integers(0, 500), max_size=8))
def test_a_token_split_across_log_reads_is_still_masked(before, after, cuts):
    """The watcher copies each read as it arrives; a read can end in the middle of the token."""
    text = f"{before}\nHF_TOKEN={TOKEN}\n{after}"
    redactor = Redactor()
    redactor.add(TOKEN)
    sink = io.BytesIO()
    sink.close = lambda: None  # keep the bytes readable after the writer closes it
    writer = RedactingWriter(sink, redactor)
    edges = sorted({0, len(text), *[c % (len(text) + 1) for c in cuts]})
    for start, end in zip(edges, edges[1:]):
        writer.write(text[start:end])
    writer.close()
    copied = sink.getvalue().decode("utf-8", "replace")
    assert TOKEN not in copied
    assert copied == text.encode("utf-8", "replace").decode("utf-8").replace(TOKEN, MASK)


def test_a_config_value_holding_the_token_is_refused(sandbox):
    sandbox.token.write_text(f"# comment first\n{TOKEN}\n")
    config = sandbox.config(lambda cfg: cfg["container"]["env"].update(NOTE=f"see {TOKEN}"))
    assert_refused(sandbox.dry_run(config), "container.env.NOTE", "secret")
    assert sandbox.written() == []


@pytest.fixture
def chatty_megatron(tmp_path) -> Path:
    """A Megatron-LM root whose launcher prints the job's HF_TOKEN (as a careless job would) and
    then runs the simulated trainer."""
    root = tmp_path / "chatty" / "Megatron-LM"
    launcher = root / "examples" / "llama" / "train_llama3.sh"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/bash\n"
                        'echo "debug: HF_TOKEN=$HF_TOKEN"\n'
                        f'exec bash {SIM_LAUNCHER} "$@"\n')
    launcher.chmod(0o755)
    return root


def test_a_job_that_prints_its_token_leaves_it_in_no_run_file_console_or_node_script(sandbox, chatty_megatron):
    sandbox.token.write_text(f"{TOKEN}\n# a comment line must not switch masking off\n")

    edit = one_short_combo(chatty_megatron)

    res = sandbox.cli("all", "--config", str(sandbox.config(edit)),
                      "--cluster", str(REPO / "cluster" / "localhost.json"), timeout=300)
    assert "Traceback" not in res.text, res.text[-3000:]
    assert res.code in (0, 1), res.text[-3000:]
    assert TOKEN not in res.text
    [run] = [p for p in sandbox.reports.iterdir() if p.is_dir() and not p.is_symlink()]
    copies = list(run.rglob("training.log"))
    assert copies and any(f"HF_TOKEN={MASK}" in p.read_text() for p in copies)  # the job did print it
    for path in run.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
    node_scripts = list((sandbox.node / "scripts").rglob("*.sh")) if (sandbox.node / "scripts").exists() else []
    for script in node_scripts:
        assert TOKEN not in script.read_text()
    assert json.loads((run / "run.json").read_text())["run_id"] == run.name
