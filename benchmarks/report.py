"""Report rendering: ``render_all`` on a synthetic run of 64 nodes x 16 combos, timed; and the same
at 1,024 nodes (``run_fleet``), timed with the size of report.html, which must stay quick to open.

The target is a ratio measured in the same run, so that a slower or busier machine of this kind
does not miss for its speed alone: the render's CPU time over the CPU time of a plain pass over
the same run directory (every file listed, every JSON file read and parsed, the lot written back
as one ``json.dumps``: ``plain_read``). The render's wall time is reported.

The run directory is written with the real ``RunDir`` and ``StageRecord`` types and holds what a
real distributed run leaves behind: a manifest, every stage record, per-node outcomes and logs,
per-step rows for the loss plots, metric rows, two failed combos with an error and a log tail.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import at_most, least_cpu_seconds, ratio, reported
from cvs_tasks.report import render_all
from cvs_tasks.run import MetricRow, NodeOutcome, RunDir, StageRecord

# render CPU / a plain read of the same run directory (docs/measured.md): measured 14x at 64 nodes and
# 13.5x at 1,024 (2026-12-06, 0.55 s and 3.5 s); each target keeps the headroom its old absolute bound
# had over that run (2 s: 3.6x; 8 s: 2.3x), which stay in the detail
VS_PLAIN_READ = 50.0
FLEET_VS_PLAIN_READ = 30.0
OLD_TARGET_S, FLEET_OLD_TARGET_S = 2.0, 8.0
FLEET_NODES = 1024
FLEET_HTML_KIB = 2048  # report.html at 1,024 nodes: node tables list the failed and lagging nodes first, capped
PRECISIONS = ("FP8", "BF16")


def combos(count: int) -> list[str]:
    out = []
    for mbs in (1, 2, 4, 8):
        for gbs in (128, 256):
            for precision in PRECISIONS:
                out.append(f"MBS={mbs},GBS={gbs},PRECISION={precision}")
    return out[:count]


def manifest(run_id: str, hosts: list[str], combo_ids: list[str], t0: float) -> dict[str, Any]:
    return {
        "run_id": run_id, "tool_version": "bench", "created": t0, "finished": t0 + 7200,
        "suite": "distributed", "backend": "Megatron-LM", "image": "rocm/megatron-lm:v25.9_gfx942",
        "gpu_name": "MI300X", "gpus_per_node": 8, "hosts": hosts, "cluster_file": "cluster/cluster.json",
        "config_file": "configs/mi3xx_megatron_llama-3.1-8b_distributed.json",
        "threshold_file": "thresholds/mi300x_megatron_llama-3.1-8b_distributed_threshold.json",
        "files_hash": "sha256:bench", "combos": combo_ids, "model_name": "llama3.1_8b",
        "enforce_thresholds": True, "interrupted": False,
        "effective_config": {"gpu_name": "MI300X", "gpus_per_node": 8,
                             "container": {"image": "rocm/megatron-lm:v25.9_gfx942", "env": {"HF_TOKEN": "***"}},
                             "train_params": {"model_name": "llama3.1_8b", "sequence_length": "8192"}},
    }


def training_record(run: RunDir, combo: str, hosts: list[str], steps: int, t: float, rng: random.Random,
                    failed: bool) -> StageRecord:
    last = steps // 3 if failed else steps
    bad = min(17, len(hosts) - 1)  # the node whose NCCL watchdog fires in a failed combo
    rows = []
    for s in range(1, last + 1):
        ms = 2950.0 * (3.0 if s == 1 else 1.0) * (1 + rng.uniform(-0.015, 0.015))
        tokens = 128 * 8192 / (ms / 1000) / (8 * len(hosts))
        loss = 1.9 + 10 * math.exp(-s / 150) + rng.uniform(-0.03, 0.03)
        rows.append([s, round(ms, 1), round(tokens * 0.062, 1), round(tokens, 1), round(loss, 4)])
    rec = StageRecord("training", "FAIL" if failed else "PASS", combo,
                      reason=f"NCCL watchdog timeout on node {hosts[bad]}" if failed else f"{steps}/{steps} iterations",
                      started=t, ended=t + last * 2.95)
    for rank, host in enumerate(hosts):
        log = run.node_log_path("training", combo, rank)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"node {rank} log\n" * 20)
        rec.nodes.append(NodeOutcome(host, rank, "FAIL" if failed and rank == bad else rec.status,
                                     "exit 0", last, steps, run.relative(log)))
        rec.artifacts[f"node {rank} log ({host})"] = run.relative(log)
    tput = sum(r[2] for r in rows[2:]) / max(1, len(rows) - 2)
    rec.data = {
        "metrics": {"training.throughput_per_gpu": round(tput, 2), "training.tokens_per_gpu": 6647.9,
                    "training.elapsed_time_per_iteration": 2950.1, "training.mem_usage": 171.2},
        "last_step": last, "planned": steps, "completed": not failed, "steps": rows,
        "tflops_recomputed": round(tput * 0.998, 2), "scaling_efficiency_pct": 96.4,
    }
    if failed:
        rec.data["error"] = {"name": "nccl_watchdog_timeout", "cls": "nccl", "host": hosts[bad], "rank": bad,
                             "line": 48213, "text": f"[Rank {bad * 8}] Watchdog caught collective operation timeout"}
        rec.data["log_tail"] = [f"[rank136]:[E1203 10:44:0{i}] ProcessGroupNCCL.cpp:629 ..." for i in range(40)]
    return rec


def gate_records(combo: str, train: StageRecord, t: float) -> list[StageRecord]:
    if train.status != "PASS":
        return [StageRecord(stage, "SKIPPED", combo, reason=f"skipped: {train.name} failed", started=t, ended=t)
                for stage in ("metric", "loss_curve")]
    metric = StageRecord("metric", "PASS", combo, reason="4 metrics passed", started=t, ended=t + 0.1, metrics=[
        MetricRow("training.throughput_per_gpu", train.data["metrics"]["training.throughput_per_gpu"],
                  "TFLOP/s/GPU", ">= 380", "PASS"),
        MetricRow("training.tokens_per_gpu", 6647.9, "tok/s/GPU", ">= 6000", "PASS"),
        MetricRow("training.elapsed_time_per_iteration", 2950.1, "ms", "<= 3200 ms", "PASS"),
        MetricRow("training.mem_usage", 171.2, "GB", "<= 180", "PASS"),
        MetricRow("training.scaling_efficiency_pct", 96.4, "%", "info (90)", "RECORD")])
    points = [[r[0], r[4]] for r in train.data["steps"][19::20]]
    loss = StageRecord("loss_curve", "PASS", combo, reason=f"slope < 0 over {len(points)} samples",
                       started=t, ended=t + 0.1,
                       data={"points": points, "slope": -0.0139, "max_slope": 0.0, "n": len(points),
                             "decreasing": True, "enforced": True})
    return [metric, loss]


def build_run(root: Path, nodes: int, combo_count: int, steps: int, seed: int = 5) -> RunDir:
    """Write the synthetic run directory under ``root``; returns it."""
    rng = random.Random(seed)
    run = RunDir.create(root, "bench-run")
    hosts = [f"gpu-node-{i:02d}" for i in range(nodes)]
    ids = combos(combo_count)
    t = 1_780_000_000.0
    run.write_manifest(manifest(run.run_id, hosts, ids, t))
    everyone = [NodeOutcome(h, r, "PASS") for r, h in enumerate(hosts)]
    for stage, reason in (("launch_container", f"container running on {nodes}/{nodes} nodes"),
                          ("download_tokenizer", "tokenizer present"), ("smoke", "10/10 iterations"),
                          ("checkpoint", "checkpoint test is Primus-only")):
        status = "SKIPPED" if stage == "checkpoint" else "PASS"
        run.write_record(StageRecord(stage, status, None, reason, t, t + 30, nodes=list(everyone)))
        t += 30
    failed = {ids[3], ids[10]} if len(ids) > 10 else set()
    for combo in ids:
        train = training_record(run, combo, hosts, steps, t, rng, combo in failed)
        run.write_record(train)
        t = train.ended
        for rec in gate_records(combo, train, t):
            run.write_record(rec)
    run.write_record(StageRecord("teardown", "PASS", None, "removed on all nodes", t, t + 5, nodes=list(everyone)))
    return run


def plain_read(root: Path, out: Path) -> None:
    """The reference the render is set against: list every file under ``root``, read and parse
    each JSON file, stat the others (the node logs the report links), write it all to ``out``."""
    data = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".json"):
                with open(path, encoding="utf-8") as fh:
                    data[path] = json.load(fh)
            else:
                os.stat(path)
    out.write_text(json.dumps(data))


def render_rows(label: str, cpu: list[float], wall: list[float], plain_cpu: float, target: float,
                old_target_s: float, detail: str) -> list[dict[str, Any]]:
    """The reported wall time and the judged ratio, from the slowest of the renders (the first is cold)."""
    worst_cpu, worst_wall = max(cpu), max(wall)
    return [
        reported(f"report.render_s[{label}]", round(worst_wall, 3), "s",
                 f"{detail}; was a target of <= {old_target_s:g} s, now posed as the ratio below"),
        at_most(f"report.render_vs_plain_read[{label}]", ratio(worst_cpu, plain_cpu), target, "x plain read",
                f"render CPU {worst_cpu:.2f} s (slowest of " + ", ".join(f"{x:.2f}" for x in cpu) + "); a plain "
                f"read of the same run directory (list, parse every JSON file, json.dumps it back) "
                f"{plain_cpu:.3f} s CPU, least of 3 (docs/measured.md)"),
    ]


def _time_renders(rundir, repeats: int) -> tuple[list[float], list[float], dict]:
    cpu, wall, paths = [], [], {}
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        paths = render_all(rundir)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return cpu, wall, paths


def _plain_read_cpu(rundir, tmp: Path) -> float:
    return least_cpu_seconds(lambda: plain_read(rundir.path, tmp / "plain_read.json"))


def run(nodes: int = 64, combo_count: int = 16, steps: int = 1000, repeats: int = 3) -> list[dict[str, Any]]:
    """Build the run, render it ``repeats`` times; the figure is the slowest render (the first is cold)."""
    with tempfile.TemporaryDirectory(prefix="cvs_bench_report_") as tmp:
        built = time.perf_counter()
        rundir = build_run(Path(tmp), nodes, combo_count, steps)
        build_s = time.perf_counter() - built
        plain_cpu = _plain_read_cpu(rundir, Path(tmp))
        cpu, wall, paths = _time_renders(rundir, repeats)
        sizes = {k: p.stat().st_size for k, p in paths.items()}
    detail = (f"{nodes} nodes x {combo_count} combos x {steps} steps; renders "
              + ", ".join(f"{x:.2f}s" for x in wall)
              + " (first is cold); files " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items())
              + f"; building the run dir took {build_s:.1f}s (not timed)")
    return render_rows(f"{nodes}x{combo_count}", cpu, wall, plain_cpu, VS_PLAIN_READ, OLD_TARGET_S, detail)


def run_fleet(nodes: int = FLEET_NODES, combo_count: int = 16, steps: int = 1000,
              repeats: int = 2) -> list[dict[str, Any]]:
    """The render at fleet scale: its time (slowest of ``repeats``) and report.html's size."""
    with tempfile.TemporaryDirectory(prefix="cvs_bench_report_fleet_") as tmp:
        rundir = build_run(Path(tmp), nodes, combo_count, steps)
        plain_cpu = _plain_read_cpu(rundir, Path(tmp))
        cpu, wall, paths = _time_renders(rundir, repeats)
        html_kib = paths["report"].stat().st_size / 1024
        results_kib = paths["results"].stat().st_size / 1024
    label = f"{nodes}x{combo_count}"
    detail = (f"{nodes} nodes x {combo_count} combos x {steps} steps; renders "
              + ", ".join(f"{x:.2f}s" for x in wall) + f"; results.json {results_kib:.0f} KiB")
    # the page's size is set by what the report writes, not by the machine: an absolute bound
    return render_rows(label, cpu, wall, plain_cpu, FLEET_VS_PLAIN_READ, FLEET_OLD_TARGET_S, detail) + [
        at_most(f"report.html_kib[{label}]", round(html_kib), FLEET_HTML_KIB, "KiB",
                "report.html: two failed combos, every node of each listed in failing_nodes.txt")]
