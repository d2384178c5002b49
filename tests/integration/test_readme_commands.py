"""The README is tested: every command in its ```bash blocks runs, so the README cannot drift.

Each command is run as a user would type it, in a scratch folder, with `invoke -r <repo>`:
for real where no cluster is needed; lifecycle commands with `--dry-run` against a throw-away
cluster file (a loopback address nobody listens on; a dry run connects to nothing) or the
testbed's. Between `config.copy` and the first run the test does what the README tells the user
to do: replace every `<changeme>` of the copied template.

`HOW` names every command the README shows and how it is run. A new README command without a
row here fails `test_every_readme_command_has_a_row`, so adding a command means testing it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.filled_templates import fill

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# The lifecycle tasks a dry run applies to (each takes --dry-run).
DRY_TASKS = {"all", "container", "tokenizer", "smoke", "checkpoint", "train", "metric", "loss", "teardown"}

# The chaining block's later lines join the run the first line started: a dry run keeps none.
CHAINED_FOR_REAL = "skip: run for real on the host runtime by tests/e2e/test_readme_chain_host.py"

# README command -> how it is run: "real", "dry" (--dry-run after every lifecycle task), "testbed"
# (the testbed block), "quick start" (only by the tests of the first screen, which run its sections
# as written, before and after the edits they ask for) or "skip: <why>". Substitutions for
# placeholders (RUN_A, C, K, testbed paths) are in `_prepare`.
HOW = {
    "pip install -e .": "skip: the install this test runs from (.ci/run installs '.[test]', which includes it)",
    "pip install -e '.[test]'": "skip: .ci/run runs this install before the tests",
    "python3 -m pytest": "skip: the command running this test",
    "invoke demo": "real",
    "invoke demo --fault oom": "quick start",
    "invoke config.list --filter llama-3.1-8b": "real",
    "invoke config.copy mi3xx_megatron_llama-3.1-8b_single.json --output site/8b_single.json --with-thresholds": "real",
    "invoke config.copy cluster.json --output site/cluster.json": "real",
    "invoke config.validate --config site/8b_single.json --cluster site/cluster.json": "quick start",
    "invoke cluster.trust --cluster site/cluster.json": "quick start",
    "invoke all --config site/8b_single.json --cluster site/cluster.json": "quick start",
    "invoke config.copy mi3xx_megatron_llama-3.1-8b_single.json --output site/ --with-thresholds --format toml": "real",
    "invoke all --config site/8b_single.json --cluster cluster.json": "dry",
    'invoke all --combo "MBS=4,GBS=128,PRECISION=FP8" --config site/8b_single.json --cluster cluster.json': "dry",
    "invoke all -x --config site/8b_single.json --cluster cluster.json": "dry",
    "invoke all --failed": "skip: needs a run with a failure; tests/e2e/test_pieces_host.py runs it",
    "invoke container smoke --config site/8b_single.json --cluster cluster.json": "dry",
    'invoke train --combo "MBS=4,GBS=128,PRECISION=FP8"': CHAINED_FOR_REAL,
    'invoke metric --combo "MBS=4,GBS=128,PRECISION=FP8" loss --combo "MBS=4,GBS=128,PRECISION=FP8" report':
        CHAINED_FOR_REAL,
    "invoke teardown": CHAINED_FOR_REAL,
    "invoke --list": "real",
    "invoke --help train": "real",
    "invoke history": "real",
    "invoke compare RUN_A RUN_B": "real",
    "invoke diagnose --config C --cluster K": "real",
    "invoke thresholds.calibrate --config C --cluster K --output site/calibrated_threshold.json": "real",
    "invoke testbed.up --nodes 2": "testbed",
    "invoke all --config configs/testbed/sim_megatron_distributed.json "
    "--cluster /tmp/cvs-testbed/cluster.json": "testbed",
    "invoke testbed.down": "testbed",
}

# What each command's output must show (beyond exit status 0), so a silent no-op fails.
EXPECT = {
    "invoke demo": "Verdict: PASS",
    "invoke config.list --filter llama-3.1-8b": "mi3xx_megatron_llama-3.1-8b_single.json",
    "invoke config.copy mi3xx_megatron_llama-3.1-8b_single.json --output site/ --with-thresholds --format toml":
        "wrote site/mi3xx_megatron_llama-3.1-8b_single.toml",
    "invoke config.copy cluster.json": "wrote site/cluster.json",
    "invoke config.copy": "wrote site/8b_single.json",
    "invoke all --config site/8b_single.json": "[dry-run]",
    "invoke all --combo": "[dry-run]",
    "invoke all -x": "[dry-run]",
    "invoke container smoke": "[dry-run]",
    "invoke --list": "teardown",
    "invoke --help train": "--combo",
    "invoke history": "PASS",
    "invoke compare": "metrics (delta = B - A)",
    "invoke diagnose": "PASS",
    "invoke thresholds.calibrate": "passing run(s)",
    "invoke testbed.up": "cluster",
    "invoke all --config configs/testbed": "[dry-run]",
    "invoke testbed.down": "nothing to stop",
}


def readme_commands(text: str) -> list[str]:
    """Commands in the README's ```bash blocks: one per line or per `;`, comments removed."""
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.extend(part.strip() for part in line.split(" ; "))
    return commands


def section(text: str, heading: str) -> str:
    """The README's ``## heading`` section, up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"README.md has no section '## {heading}'"
    return match.group(1)


def test_every_readme_command_has_a_row():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert commands, "no ```bash command found in README.md"
    missing = [c for c in commands if c not in HOW]
    assert not missing, f"README commands with no row in HOW (say how the test runs them): {missing}"
    stale = [c for c in HOW if c not in commands]
    assert not stale, f"rows in HOW for commands the README no longer shows: {stale}"


def test_extraction_reads_blocks_comments_and_chains():
    text = "x\n```bash\ninvoke a --b 1   # note\n# only a comment\ninvoke c ; invoke d\n```\n```json\n{}\n```\n"
    assert readme_commands(text) == ["invoke a --b 1", "invoke c", "invoke d"]


def _with_dry_run(argv: list[str]) -> list[str]:
    out: list[str] = []
    for token in argv:
        out.append(token)
        if token in DRY_TASKS:
            out.append("--dry-run")
    return out


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    if argv[0] == "invoke":
        argv = [sys.executable, "-m", "invoke", "-r", str(ROOT), *argv[1:]]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _check(command: str, proc: subprocess.CompletedProcess) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{output[-3000:]}"
    expected = next((v for k, v in EXPECT.items() if command.startswith(k)), None)
    assert expected is not None, f"no EXPECT entry for `{command}`"
    assert expected in output, f"`{command}` did not print {expected!r}:\n{output[-3000:]}"


@pytest.fixture
def scratch(tmp_path):
    """A user's working folder: a throw-away cluster file, reports and site files inside it."""
    (tmp_path / "cluster.json").write_text(json.dumps(
        {"username": "ops", "priv_key_file": str(tmp_path / "id_ed25519"), "node_dict": {"127.0.0.9": {}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_CVS_", "CVS_REPORTS_DIR"))}
    env["CVS_HISTORY_DB"] = str(tmp_path / "reports" / "history.sqlite")
    return tmp_path, env


@pytest.mark.testbed  # the slow tier: three demo runs and a dozen CLI processes
def test_readme_commands_run(scratch):
    """Every command outside the testbed block, in README order, in one working folder."""
    cwd, env = scratch
    demo = ROOT / "configs" / "testbed" / "demo_host.json"
    local = ROOT / "cluster" / "localhost.json"
    commands = [c for c in readme_commands(README.read_text(encoding="utf-8")) if HOW[c] in ("real", "dry")]
    demo_runs = 0
    for command in commands:
        argv = shlex.split(command)
        if command == "invoke demo":  # thresholds.calibrate below needs three passing runs
            for _ in range(3):
                _check(command, _run(argv, cwd, env))
            demo_runs = 3
            continue
        if argv[:2] == ["invoke", "compare"]:
            runs = sorted(p.name for p in (cwd / "reports").iterdir()
                          if not p.is_symlink() and (p / "run.json").is_file())
            assert len(runs) == demo_runs, runs
            argv = ["invoke", "compare", runs[0], runs[1]]
        argv = [str(demo) if a == "C" else str(local) if a == "K" else a for a in argv]
        if HOW[command] == "dry":
            argv = _with_dry_run(argv)
        _check(command, _run(argv, cwd, env))
        if argv[:2] == ["invoke", "config.copy"] and argv[2] != "cluster.json":
            fill(cwd / "site" / "8b_single.json", template=argv[2])  # what the README asks: replace every <changeme>


@pytest.mark.testbed
def test_readme_testbed_commands_run(scratch, testbed_cluster):
    """The testbed block, from the repo root as the README runs it: up (reuses the session's
    testbed), a dry run of the distributed config against its cluster file, and down on a state
    folder of its own (the session's testbed stays)."""
    cwd, env = scratch
    commands = [c for c in readme_commands(README.read_text(encoding="utf-8")) if HOW[c] == "testbed"]
    assert len(commands) == 3
    for command in commands:
        argv = [str(testbed_cluster.cluster_file) if a == "/tmp/cvs-testbed/cluster.json" else a
                for a in shlex.split(command)]
        if argv[:2] == ["invoke", "testbed.up"] and len(testbed_cluster.nodes) > 2:
            argv[argv.index("--nodes") + 1] = str(len(testbed_cluster.nodes))  # a kept, larger testbed
        if argv[:2] == ["invoke", "all"]:
            argv = _with_dry_run(argv)
        if argv[:2] == ["invoke", "testbed.down"]:
            argv += ["--state-dir", str(cwd / "no-testbed-here")]
        _check(command, _run(argv, ROOT, env, timeout=600))


# -- the first screen: set up, the demo, the quick start on a real cluster -------------------------
SET_UP = "Set up and try it"
QUICK_START = "Quick start on a real cluster"


def test_the_first_screen_installs_without_the_test_extras_and_shows_the_report():
    """What an ops reader sees first: the install for use (no test extras), the demo, the picture;
    the test command only in the developers' section."""
    text = README.read_text(encoding="utf-8")
    first = text[:text.index(f"## {QUICK_START}")]
    assert readme_commands(section(text, SET_UP)) == ["pip install -e .", "invoke demo", "invoke demo --fault oom"]
    assert "](docs/report-screenshot.png)" in first and (ROOT / "docs" / "report-screenshot.png").is_file()
    assert "[test]" not in first and "pytest" not in first
    developers = section(text, "For developers")
    assert "pip install -e '.[test]'" in developers and "python3 -m pytest" in developers


def _quick_start(text: str) -> tuple[list[str], list[str]]:
    """The quick start's commands: (up to the last `config.copy`, the rest: after the edits it asks for)."""
    commands = readme_commands(section(text, QUICK_START))
    last_copy = max(i for i, c in enumerate(commands) if c.startswith("invoke config.copy"))
    return commands[:last_copy + 1], commands[last_copy + 1:]


def _edit_the_cluster_file(site: Path) -> None:
    """Step 2 for the cluster file: one node for a `_single` config (a loopback address nobody
    listens on: only a dry run goes near it)."""
    cluster = json.loads((site / "cluster.json").read_text())
    cluster["node_dict"] = {"127.0.0.9": {}}
    (site / "cluster.json").write_text(json.dumps(cluster))


def test_readme_quick_start_runs_as_written(scratch):
    """The quick start's commands in order, as typed. Before the edits the README asks for, the
    commands after the copies exit 2 listing each <changeme> left with its file and field, and
    nothing runs; after them `config.validate` prints the resolved suite and `invoke all` runs
    (here as a dry run: there is no cluster). `cluster.trust` needs a node that answers SSH:
    the testbed's tests record keys for real."""
    cwd, env = scratch
    copies, after_edit = _quick_start(README.read_text(encoding="utf-8"))
    assert [c.split()[1] for c in after_edit] == ["config.validate", "cluster.trust", "all"]
    for command in copies:
        assert HOW[command] == "real", command
        _check(command, _run(shlex.split(command), cwd, env))
    for command in after_edit:
        proc = _run(shlex.split(command), cwd, env)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 2, f"`{command}` exited {proc.returncode} before the edits:\n{output[-3000:]}"
        assert "<changeme>" in output and "site/cluster.json" in output and "node_dict" in output, output
    assert not (cwd / "reports").exists(), "a command ran before the <changeme> values were replaced"

    _edit_the_cluster_file(cwd / "site")  # half done: now the config's own <changeme> values are named
    proc = _run(shlex.split(after_edit[0]), cwd, env)
    assert proc.returncode == 2 and "config error in site/8b_single.json" in proc.stderr, proc.stdout + proc.stderr
    assert "container.image: still '<changeme>'" in proc.stderr, proc.stderr

    template = next(shlex.split(c)[2] for c in copies if ".json --output site/8b_single.json" in c)
    fill(cwd / "site" / "8b_single.json", template=template)
    for command in after_edit:
        argv = shlex.split(command)
        if argv[1] == "cluster.trust":
            continue
        proc = _run(_with_dry_run(argv), cwd, env)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"`{command}` exited {proc.returncode} after the edits:\n{output[-3000:]}"
        assert ("OK: the config is valid" if argv[1] == "config.validate" else "[dry-run]") in output, output
    assert "suite      single" in _run(shlex.split(after_edit[0]), cwd, env).stdout


@pytest.mark.testbed  # the slow tier: two whole demo runs
def test_readme_set_up_demo_lines_run_as_written(scratch):
    """`invoke demo` ends in reports/latest/report.html with a PASS; `invoke demo --fault oom` in a
    failing report that opens with the OOM, and exit 1."""
    cwd, env = scratch
    demo_lines = [c for c in readme_commands(section(README.read_text(encoding="utf-8"), SET_UP))
                  if c.startswith("invoke demo")]
    assert demo_lines == ["invoke demo", "invoke demo --fault oom"]
    passing = _run(shlex.split(demo_lines[0]), cwd, env)
    _check(demo_lines[0], passing)
    report = cwd / "reports" / "latest" / "report.html"
    assert report.is_file() and "Report: " in passing.stdout
    first_run = report.resolve().parent

    failing = _run(shlex.split(demo_lines[1]), cwd, env)
    output = failing.stdout + failing.stderr
    assert failing.returncode == 1, output[-3000:]
    assert "Verdict: FAIL" in output and "HIP out of memory" in output
    run = report.resolve().parent
    assert run != first_run and json.loads((run / "results.json").read_text())["verdict"] == "FAIL"
    html = report.read_text(encoding="utf-8")
    assert "What failed first" in html and "HIP out of memory" in html
