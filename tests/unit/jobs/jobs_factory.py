"""A JobSpec with the packaged single-node values, for the job-builder tests to vary."""

from __future__ import annotations

import dataclasses

from cvs_tasks.jobs.spec import JobSpec

CANARY_TOKEN = "hf_CANARYtoken0123456789abcdef"
TOKEN_FILE = "/home/alice/.hf_token"
SCRIPTS = "/home/alice/SCRIPTS/megatron/run-7/MBS_4_GBS_128_PRECISION_FP8"
LOGS = "/home/alice/LOGS/megatron/megatron-logs/MBS_4_GBS_128_PRECISION_FP8"

LLAMA_8B = {
    "model_name": "llama3.1_8B",
    "tokenizer_model": "meta-llama/Llama-3.1-8B",
    "model_size": "8",
    "sequence_length": "8192",
    "recompute": "0",
    "fsdp": "0",
    "tensor_parallelism": "1",
    "pipeline_parallelism": "1",
    "micro_batch_size": "4",
    "global_batch_size": "128",
    "precision": "FP8",
    "training_iterations": "20",
}


def make_job(**changes) -> JobSpec:
    base = JobSpec(
        backend="megatron",
        label="MBS=4,GBS=128,PRECISION=FP8",
        gpu_name="MI300X",
        image="rocm/megatron-lm:v25.9",
        runtime="docker",
        nnodes=1,
        distributed=False,
        mbs="4",
        gbs="128",
        precision="FP8",
        iterations=20,
        train_params=dict(LLAMA_8B),
        log_dir="/home/alice/LOGS/megatron",
        scripts_dir="/home/alice/SCRIPTS/megatron",
        data_cache_dir="/home/alice/cache",
        rocm_dir="",
        env={"MASTER_ADDR": "127.0.0.1", "NCCL_IB_GID_INDEX": "3", "NNODES": "1"},
        hf_token_path=TOKEN_FILE,
        tokenizer_path=None,
        save_dir=None,
        save_interval=None,
        load_dir=None,
        run_id="run-7",
    )
    return dataclasses.replace(base, **changes)


def with_params(job: JobSpec, **params: str) -> JobSpec:
    return dataclasses.replace(job, train_params={**job.train_params, **params})
