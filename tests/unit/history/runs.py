"""Synthetic run directories for history tests: a manifest plus training/metric records."""

from __future__ import annotations

from pathlib import Path

from cvs_tasks.run import MetricRow, NodeOutcome, RunDir, StageRecord

COMBO = "MBS=2,GBS=32,PRECISION=BF16"
HOSTS = ["127.0.0.2", "127.0.0.3"]


def make_run(root: Path, run_id: str, *, created: float, tput: float = 500.0, step_ms: float = 1600.0,
             metric_status: str = "PASS", hosts=None, combos=None, config=None, facts=None,
             node_fail: str | None = None, args=None) -> RunDir:
    hosts = list(hosts or HOSTS)
    combos = list(combos or [COMBO])
    run = RunDir.create(Path(root), run_id)
    run.write_manifest({
        "run_id": run_id, "created": created, "finished": created + 60, "hosts": hosts, "combos": combos,
        "suite": "distributed", "backend": "Megatron-LM", "image": "cvs-testbed/sim:latest",
        "gpu_name": "MI300X", "model_name": "llama3.1_8B", "config_file": "/cfg/sim_megatron_distributed.json",
        "effective_config": config or {"gpu_name": "MI300X", "train_params": {"x": "1"}},
    })
    launch = StageRecord("launch_container", "PASS", nodes=[NodeOutcome(h, i, "PASS") for i, h in enumerate(hosts)])
    launch.data["fingerprints"] = facts if facts is not None else {
        h: {"gpu_model": "MI300X", "gpu_count": 8, "driver": "6.10.5", "rocm": "6.4.1", "kernel": "6.8.0",
            "image_digest": "sha256:aaa"} for h in hosts}
    for rec in (launch, StageRecord("download_tokenizer", "SKIPPED"), StageRecord("smoke", "PASS"),
                StageRecord("checkpoint", "SKIPPED"), StageRecord("teardown", "PASS")):
        run.write_record(rec)
    for combo in combos:
        nodes = [NodeOutcome(h, i, "FAIL" if h == node_fail else "PASS") for i, h in enumerate(hosts)]
        training = StageRecord("training", "FAIL" if node_fail else "PASS", combo=combo, nodes=nodes)
        training.data = {"completed": not node_fail, "args_hash": args, "metrics": {}}
        run.write_record(training)
        rows = [MetricRow("training.throughput_per_gpu", tput, "TFLOP/s/GPU", ">= 400", metric_status),
                MetricRow("training.elapsed_time_per_iteration", step_ms, "ms", "<= 2000 ms", "PASS")]
        run.write_record(StageRecord("metric", "FAIL" if metric_status == "FAIL" else "PASS", combo=combo,
                                     metrics=rows))
        run.write_record(StageRecord("loss_curve", "PASS", combo=combo))
    return run
