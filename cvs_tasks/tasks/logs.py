"""``logs.parse FILE`` and ``logs.scan FILE``: work on any training log, no cluster needed.

A log is node text: every line printed goes through ``echo`` (control characters shown, never sent);
``--json`` output is JSON, whose encoder escapes them."""

from __future__ import annotations

import json as jsonlib
import os
import sys
from contextlib import contextmanager
from typing import Iterator

from invoke import Collection
from invoke.exceptions import Exit

from cvs_tasks.errors import GateFailed
from cvs_tasks.tasks._common import number_flag, task, user_errors
from cvs_tasks.terminal import echo


def _positive_int(flag: str, value) -> int | None:
    return number_flag(flag, value, None, 1, 10**9, whole=True)


@contextmanager
def _quiet_pipe() -> Iterator[None]:
    """``logs.parse F --json | head``: a reader that goes away ends the output quietly."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail
        raise Exit(code=0) from None


def _fatal_exit(parser, file) -> None:
    """Exit status 1 when the log holds a fatal signature, naming the root cause."""
    cause = parser.root_cause
    if cause is not None:
        raise GateFailed(f"fatal error signature in {file}: {cause.name} at line {cause.line}"
                         + (f" ({cause.hint})" if cause.hint else ""))


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


@task(positional=["file"], help={
    "file": "training log to read (any dialect)",
    "dialect": "auto (default), megatron or primus",
    "seq_length": "sequence length for tokens/s when the log has no arguments dump",
    "world_size": "total GPUs for tokens/s when the log has no arguments dump",
    "model": "model name for the recomputed TFLOP/s, e.g. llama3.1_8B",
    "json": "print one JSON object instead of a table",
})
def parse(c, file, dialect="auto", seq_length=None, world_size=None, model=None, json=False):
    """Print the run metrics of a training log; exit status 1 when it holds a fatal signature."""
    from cvs_tasks.judge.kinds import unit_for
    from cvs_tasks.metrics import parse_file
    from cvs_tasks.verify import effective_from_arguments
    from cvs_tasks.verify.compare import describe

    with user_errors(), _quiet_pipe():
        parser = parse_file(file, dialect=dialect, seq_length=_positive_int("seq-length", seq_length),
                            world_size=_positive_int("world-size", world_size), model=model)
        summary = parser.summary()
        effective = effective_from_arguments(parser.arguments)
        summary["effective_config"] = effective.known() if effective else None
        if json:
            print(jsonlib.dumps(summary, indent=2))
            _fatal_exit(parser, file)
            return
        used = summary["metrics_steps"]
        echo(f"{file}: dialect {summary['dialect']} ({summary['flavour']}), "
              f"step {summary['iterations']}/{summary['planned_iterations']}, "
              f"{'completed' if summary['completed'] else 'not completed'}, "
              f"warm-up steps <= {summary['warmup_cutoff']}; metrics from steps {used['first_step']}-"
              f"{used['last_step']} ({used['count']}, {used['basis'].replace('_', ' ')})")
        if used["averaged_steps"]:
            print(f"  steps {', '.join(map(str, used['averaged_steps']))} printed a running average, not their own"
                  " time (the time stamps say so): left out")
        for name, value in summary["metrics"].items():
            echo(f"  {name:<40} {_fmt(value):>14}  {unit_for(name)}")
        echo(f"  {'tflops recomputed (current formula)':<40} {_fmt(summary['tflops_recomputed']):>14}"
              f"  TFLOP/s/GPU")
        loss = summary["loss"]
        echo(f"  loss first {_fmt(loss['first'])} @ {loss['first_step']}, "
              f"last {_fmt(loss['last'])} @ {loss['last_step']}")
        echo(f"  trainer ran: {describe(effective) if effective else 'not stated (no arguments dump)'}")
        echo(f"  lines {summary['lines']}, skipped {summary['lines_skipped']}, "
              f"error signatures {len(summary['errors']) + summary['errors_dropped']}")
        cause = summary["root_cause"]
        if cause:
            echo(f"  root cause: {cause['name']} at line {cause['line']}: {cause['text'][:160]}")
            if cause["hint"]:
                echo(f"    hint: {cause['hint']}")
        _fatal_exit(parser, file)


@task(positional=["file"], help={"file": "training log to scan", "json": "print a JSON list"})
def scan(c, file, json=False):
    """List error signatures in a training log; exit status 1 when one of them is fatal."""
    from cvs_tasks.metrics import parse_file

    with user_errors(), _quiet_pipe():
        parser = parse_file(file)
        hits = parser.errors
        if json:
            print(jsonlib.dumps([h.to_dict() for h in hits], indent=2))
        else:
            for h in hits:
                echo(f"{file}:{h.line}: [{h.cls}] {h.name}{' (fatal)' if h.fatal else ''}: {h.text}")
            if parser.errors_dropped:
                echo(f"{file}: {parser.errors_dropped} more hits not listed")
            if not hits:
                echo(f"{file}: no error signatures")
        _fatal_exit(parser, file)


ns = Collection("logs")
ns.add_task(parse)
ns.add_task(scan)
