"""Run the benchmarks of issue #8 in one go: one JSON object on stdout, a table on stderr.

``python -m benchmarks [--only NAME[,NAME]] [--quick] [--json-out PATH] [--strict]``; names:
parse, polling, latency, fanout, report, history (the default set), scale (starts its own light
testbeds). The benchmarks that need nodes start their own testbed (``benchmarks.testbed_env``)
once and stop it at the end, whatever happens. A benchmark
that crashes yields MISS rows that carry the error, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from benchmarks import testbed_env
from benchmarks.common import MISS, PASS, not_measured
from cvs_tasks.errors import BadInput

NAMES = ("parse", "polling", "latency", "fanout", "report", "history", "scale")
DEFAULT_NAMES = NAMES[:-1]  # scale starts its own testbeds of up to 1,024 nodes (~8 min): asked by name
NEEDS_TESTBED = {"latency", "fanout", "polling"}
REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs" / "testbed"


@dataclass(frozen=True)
class Sizes:
    parse_mb: float
    poll_mb: float
    poll_rate: float
    fanout: tuple[int, ...]
    combos: int
    testbed_nodes: int


FULL = Sizes(parse_mb=1024, poll_mb=200, poll_rate=8.0, fanout=(1, 8, 32), combos=2, testbed_nodes=32)
QUICK = Sizes(parse_mb=32, poll_mb=16, poll_rate=8.0, fanout=(1, 4), combos=1, testbed_nodes=4)


# --- the five benchmarks, each from the shared context ----------------------------------------
@dataclass
class Context:
    sizes: Sizes
    work: Path
    testbed: testbed_env.BenchTestbed | None
    testbed_problem: str | None


def _parse(ctx: Context) -> list[dict]:
    from benchmarks import parse

    return parse.run(ctx.sizes.parse_mb)


def _polling(ctx: Context) -> list[dict]:
    from benchmarks import polling
    from cvs_tasks.config import load_cluster
    from cvs_tasks.remote import connect

    ssh = None
    if ctx.testbed is not None:
        ssh = connect(load_cluster(ctx.testbed.cluster(1, ctx.work)))
    try:
        rows = polling.run(ctx.sizes.poll_mb, ctx.sizes.poll_rate, ssh_hosts=ssh,
                           ssh_label=ctx.testbed.node0 if ctx.testbed else "", quick=ctx.sizes is QUICK)
    finally:
        if ssh is not None:
            ssh.close()
    if ssh is None:
        rows.append(not_measured("polling.bytes_ratio[ssh]", "x final size", "<= 1.1",
                                 f"no testbed: {ctx.testbed_problem}"))
    return rows


def _latency(ctx: Context) -> list[dict]:
    from benchmarks import latency

    setups = [latency.Setup("host-1", CONFIGS / "demo_host.json", REPO / "cluster" / "localhost.json", 1)]
    tb = ctx.testbed
    if tb is not None:
        shared = tb.shared_dir / "bench"
        setups += [
            latency.Setup("testbed-1", CONFIGS / "sim_megatron_single.json", tb.cluster(1, ctx.work), 1,
                          tb.config_replacements(), shared),
            latency.Setup("testbed-2", CONFIGS / "sim_megatron_distributed.json", tb.cluster(2, ctx.work), 2,
                          tb.config_replacements(), shared, (("nic_type", "ainic"),),
                          "train_params.nic_type=ainic set when the config has none (no Broadcom NIC library "
                          "on loopback nodes)"),
        ]
    rows = latency.run(setups, ctx.work / "latency", combos=ctx.sizes.combos)
    if tb is None:
        for label in ("testbed-1", "testbed-2"):
            rows.append(not_measured(f"latency.overhead_per_combo_vs_bound[{label}]", "x lower bound",
                                     f"<= {latency.OVERHEAD_VS_BOUND:g}", f"no testbed: {ctx.testbed_problem}"))
    return rows


def _fanout(ctx: Context) -> list[dict]:
    from benchmarks import fanout

    if ctx.testbed is None:
        return [not_measured("fanout.check_cold", "x", "<= 2", f"no testbed: {ctx.testbed_problem}")]
    cfg = json.loads((CONFIGS / "sim_megatron_single.json").read_text())
    text = json.dumps(cfg)
    for old, new in ctx.testbed.config_replacements():
        text = text.replace(old, new)
    cfg = json.loads(text)
    return fanout.run(ctx.testbed, cfg["container"], cfg["gpu"]["visible_check"], cfg["paths"]["log_dir"],
                      sizes=ctx.sizes.fanout)


def _scale(ctx: Context) -> list[dict]:
    from benchmarks import scale

    return scale.run(quick=ctx.sizes is QUICK)


def _report(ctx: Context) -> list[dict]:
    from benchmarks import report

    return report.run() + ([] if ctx.sizes is QUICK else report.run_fleet())


def _history(ctx: Context) -> list[dict]:
    from benchmarks import history_bench

    return history_bench.run(1000 if ctx.sizes is QUICK else 10_000, 64)


RUNNERS: dict[str, Callable[[Context], list[dict]]] = {
    "parse": _parse, "polling": _polling, "latency": _latency, "fanout": _fanout, "report": _report,
    "history": _history, "scale": _scale,
}


# --- the suite ---------------------------------------------------------------------------------
def selected(only: str | None) -> list[str]:
    if not only:
        return list(DEFAULT_NAMES)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise BadInput(f"--only: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    return [n for n in NAMES if n in names]


def run_suite(names: list[str], sizes: Sizes, say: Callable[[str], None]) -> dict[str, Any]:
    started = time.time()
    results: dict[str, Any] = {}
    rows: list[dict] = []
    tb, problem = None, None
    with tempfile.TemporaryDirectory(prefix="cvs_bench_") as tmp:
        try:
            if NEEDS_TESTBED & set(names):
                problem = testbed_env.unavailable()
                if problem is None:
                    say(f"starting the benchmark testbed ({sizes.testbed_nodes} nodes)")
                    try:
                        tb = testbed_env.BenchTestbed(sizes.testbed_nodes, docker_nodes=2).up()
                    except Exception as exc:  # noqa: BLE001 - reported in every testbed row
                        problem = f"testbed did not start: {exc}"
                        try:
                            testbed_env.BenchTestbed(sizes.testbed_nodes, 2).down()
                        except Exception as again:  # noqa: BLE001
                            problem += f"; and stopping it failed: {again}"
            ctx = Context(sizes, Path(tmp), tb, problem)
            for name in names:
                say(f"running {name} ...")
                t0 = time.monotonic()
                try:
                    got = RUNNERS[name](ctx)
                    error = None
                except Exception as exc:  # noqa: BLE001 - one crash must not hide the other figures
                    got = [not_measured(f"{name}.crashed", "-", "runs", f"{type(exc).__name__}: {exc}")]
                    error = traceback.format_exc(limit=6)
                took = time.monotonic() - t0
                rows += got
                results[name] = {"duration_s": round(took, 1), "rows": len(got), "error": error}
                say(f"{name}: {sum(r['status'] == PASS for r in got)} PASS, "
                    f"{sum(r['status'] == MISS for r in got)} MISS in {took:.0f}s")
        finally:
            if tb is not None:
                say("stopping the benchmark testbed")
                tb.down()
    return {
        "suite": "cvs-tasks benchmarks (issue #8)",
        "quick": sizes is QUICK,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "started": started,
        "duration_s": round(time.time() - started, 1),
        "summary": {PASS: sum(r["status"] == PASS for r in rows), MISS: sum(r["status"] == MISS for r in rows)},
        "rows": rows,
        "benchmarks": results,
    }


def print_table(result: dict[str, Any], stream) -> None:
    """A readable table of every row (rich), to ``stream``."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=stream, width=max(120, Console(file=stream).width))
    table = Table(title=f"cvs-tasks benchmarks ({result['duration_s']:.0f}s"
                        + (", quick sizes" if result["quick"] else "") + ")", show_lines=True)
    for column in ("figure", "value", "target", "status", "detail"):
        table.add_column(column, overflow="fold")
    for r in result["rows"]:
        value = "-" if r["value"] is None else f"{r['value']} {r['unit']}"
        colour = "green" if r["status"] == PASS else "red"
        target = f"{r['target']} {r['unit']}" if r["value"] is None else r["target"]
        table.add_row(escape(r["name"]), escape(value), escape(target), f"[{colour}]{r['status']}[/]",
                      escape(r["detail"]))
    console.print(table)
    console.print(f"{result['summary'][PASS]} PASS, {result['summary'][MISS]} MISS")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"comma-separated subset of: {', '.join(NAMES)}")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, figures not comparable)")
    ap.add_argument("--json-out", help="also write the JSON object to this file")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any figure misses its target")
    args = ap.parse_args(argv)
    names = selected(args.only)  # BadInput: the caller prints it and exits 2

    def say(text: str) -> None:
        print(f"bench: {text}", file=sys.stderr, flush=True)

    result = run_suite(names, QUICK if args.quick else FULL, say)
    text = json.dumps(result, indent=2)
    print(text, flush=True)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    print_table(result, sys.stderr)
    return 1 if args.strict and result["summary"][MISS] else 0
