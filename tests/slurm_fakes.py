"""An ``srun`` stand-in for tests without Slurm: first on PATH, it runs ``bash -c PROGRAM ARGS`` once per
``--nodelist`` node at the same time (each with its SLURMD_NODENAME), hands its stdin to every task as
it arrives (as ``--input=all`` does), merges the tasks' stdout line by line (whole lines, as slurmstepd
forwards lines of up to 1,024 bytes), and logs each call. ``FAKE_SRUN_MODE``: ``no-step`` (Slurm refuses
the step), ``kill:<node>`` (that node's task is killed before it says anything), ``launch-fail:<node>``
(srun cannot launch that node's task and aborts the step before any task reads its stdin, as measured
on Slurm 22.05: docs/measured.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKE_SRUN = '''#!{python}
import json, os, subprocess, sys, threading
args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
mode = os.environ.get("FAKE_SRUN_MODE", "")
if mode == "no-step":
    sys.stderr.write("srun: error: Unable to create step for job 9: Job/step already completing or completed\\n")
    sys.exit(1)
nodes = next(a.split("=", 1)[1] for a in args if a.startswith("--nodelist=")).split(",")
if mode.startswith("launch-fail:") and mode.split(":", 1)[1] in nodes:  # as Slurm 22.05's srun: no task read stdin
    sys.stderr.write("srun: error: Task launch for StepId=9.3 failed on node " + mode.split(":", 1)[1]
                     + ": Communication connection failure\\n"
                     "srun: error: Application launch failed: Communication connection failure\\n")
    sys.stderr.write("".join(f"srun: error: {{n}}: task {{r}}: Killed\\n" for r, n in enumerate(nodes)
                             if n != mode.split(":", 1)[1]))
    sys.exit(233)
program = args[args.index("-c") + 1:]
lock = threading.Lock()
tasks = {{}}
for node in nodes:
    if mode == "kill:" + node:
        continue
    tasks[node] = subprocess.Popen(["bash", "-c", *program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env={{**os.environ, "SLURMD_NODENAME": node}})

def pump_out(proc):
    for line in iter(proc.stdout.readline, b""):
        with lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

def pump_in():
    while True:
        chunk = os.read(0, 65536)
        for proc in tasks.values():
            try:
                proc.stdin.write(chunk) if chunk else proc.stdin.close()
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass
        if not chunk:
            return

threading.Thread(target=pump_in, daemon=True).start()
readers = [threading.Thread(target=pump_out, args=(p,)) for p in tasks.values()]
for r in readers:
    r.start()
code = 0
for rank, node in enumerate(nodes):
    if node not in tasks:
        sys.stderr.write(f"srun: error: {{node}}: task {{rank}}: Killed\\n")
        code = 137
        continue
    proc = tasks[node]
    err = proc.stderr.read()
    proc.wait()
    sys.stderr.buffer.write(err)
    if proc.returncode:
        sys.stderr.write(f"srun: error: {{node}}: task {{rank}}: Exited with exit code {{proc.returncode}}\\n")
        code = proc.returncode
for r in readers:
    r.join()
sys.exit(code)
'''


def install_fake_srun(bin_dir: Path, log: Path, monkeypatch) -> None:
    """Put the stand-in first on PATH; every call is appended to ``log`` as its JSON argv."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    monkeypatch.delenv("FAKE_SRUN_MODE", raising=False)


def srun_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
