"""`invoke bench`: the benchmarks of issues #8 and #25 (parse, polling, latency, fan-out, report, history, scale)."""

from __future__ import annotations

from invoke import Collection
from invoke.exceptions import Exit

from cvs_tasks.tasks._common import task, user_errors


@task(help={
    "only": "Comma-separated: parse, polling, latency, fanout, report, history (the default set), scale "
            "(watching 64 / 256 / 1,024 light SSH nodes, ~8 min)",
    "quick": "Small sizes: a smoke run whose figures are not comparable with the targets",
    "json_out": "Also write the JSON object to this file",
    "strict": "Exit 1 when any figure misses its target",
})
def bench(c, only=None, quick=False, json_out=None, strict=False):
    """Run the benchmarks: one JSON object on stdout, a PASS/MISS table on stderr (full run < 10 min)."""
    with user_errors():
        from benchmarks.suite import main

        argv = (["--only", only] if only else []) + (["--quick"] if quick else [])
        argv += (["--json-out", json_out] if json_out else []) + (["--strict"] if strict else [])
        code = main(argv)
    if code:
        raise Exit(code=code)


ns = Collection("bench", bench)
