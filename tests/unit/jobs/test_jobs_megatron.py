"""Megatron-LM wrapper scripts and launch commands, pinned as exact text
(docs/reference_suite.md#megatron-lm-wrapper)."""

from __future__ import annotations

import dataclasses

import pytest
from jobs_factory import LOGS, SCRIPTS, make_job, with_params

from cvs_tasks.families import megatron_family
from cvs_tasks.jobs import JobSetupError, build_launch

# A backslash at a line's end below is Python's line continuation: the pinned text has no break there.
ROCM_DETECT = """\
cvs_rocm_dir=
for cvs_candidate in $(printf '%s\\n' /opt/rocm/core-* | sort -rV); do
  if compgen -G "$cvs_candidate/lib/libamdhip64.so*" > /dev/null; then cvs_rocm_dir="$cvs_candidate"; break; fi
done
if [ -z "$cvs_rocm_dir" ]; then
  cvs_rocm_dir=/opt/rocm
  compgen -G "/opt/rocm/lib/libamdhip64.so*" > /dev/null || echo 'cvs-tasks: warning: libamdhip64.so not found \
under /opt/rocm/core-*/lib or /opt/rocm/lib; using /opt/rocm (set paths.rocm_dir)' >&2
fi
export LD_LIBRARY_PATH=/usr/local/lib/:"$cvs_rocm_dir"/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"""

SINGLE_LLAMA3_FP8 = f"""\
#!/bin/bash
# cvs-tasks Megatron-LM wrapper: MBS=4,GBS=128,PRECISION=FP8, node 0 of 1, run run-7
set -u
cvs_finish() {{ echo "$1" > {SCRIPTS}/node0.exit.tmp && mv -f {SCRIPTS}/node0.exit.tmp {SCRIPTS}/node0.exit; \
exit "$1"; }}
trap 'cvs_finish 143' TERM
trap 'cvs_finish 130' INT
cd /workspace/Megatron-LM || {{ echo 'cvs-tasks: cannot cd to /workspace/Megatron-LM (train_params.megatron_root)' \
>&2; cvs_finish 1; }}
export MOCK_DATA=1
export IMAGE=rocm/megatron-lm:v25.9
export HF_TOKEN="$(cat /home/alice/.hf_token)"
export DATA_CACHE_PATH=/home/alice/cache
export TOKENIZER_MODEL=meta-llama/Llama-3.1-8B
{ROCM_DETECT}\
export LOG_DIR={LOGS}/out-node0
export EXP_NAME=megatron_training
export TORCH_NCCL_ASYNC_ERROR_HANDLING=0
RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 TE_FP8=1 NODE_RANK=0 \
bash /workspace/Megatron-LM/examples/llama/train_llama3.sh
cvs_finish "$?"
"""


def _run_line(script: str) -> str:
    """The line that starts the launcher (the one before the exit-status line)."""
    lines = script.splitlines()
    assert lines[-1] == 'cvs_finish "$?"'
    return lines[-2]


def test_single_node_llama3_fp8_wrapper_is_exact():
    plan = build_launch(make_job())
    assert plan.combo_log_dir == LOGS
    assert [n.rank for n in plan.nodes] == [0]
    node = plan.nodes[0]
    assert node.script_text == SINGLE_LLAMA3_FP8
    assert node.script_path == f"{SCRIPTS}/node0.sh"
    assert node.log_path == f"{LOGS}/out-node0/training.log"
    assert node.console_path == node.log_path
    assert node.exit_path == f"{SCRIPTS}/node0.exit"
    assert node.pid_path == f"{SCRIPTS}/node0.pid"
    assert plan.warnings == []


def test_launch_command_detaches_and_records_the_pid():
    node = build_launch(make_job()).nodes[0]
    assert node.launch_command == (
        f"mkdir -p {LOGS}/out-node0 && rm -f {SCRIPTS}/node0.exit {SCRIPTS}/node0.pid && "
        f"{{ setsid nohup bash {SCRIPTS}/node0.sh > {LOGS}/out-node0/training.log 2>&1 "
        f"< /dev/null & echo $! > {SCRIPTS}/node0.pid; }}"
    )


def test_prepare_creates_private_script_dir_and_combo_log_dir_and_drops_stale_logs():
    plan = build_launch(make_job())
    assert plan.prepare == [
        f"(umask 077 && mkdir -p {SCRIPTS})",
        f"mkdir -p {LOGS}",
        f"rm -f -- {LOGS}/out-node0/training.log {LOGS}/out-node0/console.log",
    ]


@pytest.mark.parametrize(
    ("tokenizer", "precision", "expected_run_line"),
    [
        ("meta-llama/Llama-3.1-8B", "FP8",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP8=1 NODE_RANK=0 bash /workspace/Megatron-LM/examples/llama/train_llama3.sh"),
        ("meta-llama/Llama-3.3-70B-Instruct", "BF16",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP8=0 TE_FP4=0 NODE_RANK=0 bash /workspace/Megatron-LM/examples/llama/train_llama3.sh"),
        ("meta-llama/Llama-3.1-8B", "MXFP4",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP4=1 TE_FP4_RECIPE=mxfp4 NODE_RANK=0 bash "
         "/workspace/Megatron-LM/examples/llama/train_llama3.sh"),
        ("meta-llama/Llama-3.1-8B", "MXFP8",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP8=1 TE_FP8_RECIPE=mxfp8 NODE_RANK=0 bash "
         "/workspace/Megatron-LM/examples/llama/train_llama3.sh"),
        ("meta-llama/Llama-2-7b-hf", "BF16",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP8=0 TE_FP4=0 NODE_RANK=0 bash /workspace/Megatron-LM/examples/llama/train_llama2.sh"),
        ("deepseek-ai/DeepSeek-V2-Lite", "FP8",
         "AC=none SEQ_LEN=8192 PAD_LEN=8192 MBS=4 GBS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TRAIN_ITERS=20 "
         "PR=fp8 NODE_RANK=0 bash /workspace/Megatron-LM/examples/deepseek_v2/train_deepseekv2.sh"),
        ("deepseek-ai/DeepSeek-V2-Lite", "FP16",
         "AC=none SEQ_LEN=8192 PAD_LEN=8192 MBS=4 GBS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TRAIN_ITERS=20 "
         "PR=fp16 NODE_RANK=0 bash /workspace/Megatron-LM/examples/deepseek_v2/train_deepseekv2.sh"),
        ("mistralai/Mixtral-8x7B-v0.1", "BF16",
         "RECOMPUTE=0 SEQLEN=8192 MBS=4 GBS=128 TP_SIZE=1 PP_SIZE=1 FSDP=0 MODEL_SIZE=8 "
         "TRAIN_ITERS=20 PR=bf16 NODE_RANK=0 bash "
         "/workspace/Megatron-LM/examples/mixtral/train_mixtral_moe.sh"),
        ("Qwen/Qwen3-30B-A3B", "MXFP8",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MICRO_BATCH_SIZE=4 GLOBAL_BATCH_SIZE=128 TP=1 PP=1 FSDP=0 "
         "MODEL_SIZE=8 TRAIN_ITERS=20 PR=fp8 FP8_RECIPE=mxfp8 NODE_RANK=0 bash "
         "/workspace/Megatron-LM/examples/qwen3/train_qwen3.sh"),
        ("Qwen/Qwen2.5-7B", "BF16",
         "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
         "TE_FP8=0 NODE_RANK=0 bash /workspace/Megatron-LM/examples/qwen2/train_qwen2.sh"),
    ],
)
def test_family_and_precision_select_script_and_env_names(tokenizer, precision, expected_run_line):
    job = with_params(make_job(precision=precision), tokenizer_model=tokenizer)
    plan = build_launch(job)
    assert _run_line(plan.nodes[0].script_text) == expected_run_line
    # Only the deepseek/mixtral "no local tokenizer.model" note may appear: no precision fallback.
    assert all("needs a local tokenizer.model" in w for w in plan.warnings)


def test_qwen3_wins_over_qwen2_and_first_match_wins():
    assert megatron_family("Qwen/Qwen3-8B").name == "qwen3"
    assert megatron_family("Qwen/Qwen2-7B").name == "qwen2"
    assert megatron_family("META-LLAMA/LLAMA-3.1-405B").name == "llama-3"
    assert megatron_family("gpt2") is None


def test_unknown_precision_falls_back_to_te_fp8_with_a_warning():
    job = make_job(precision="INT4")
    plan = build_launch(job)
    assert _run_line(plan.nodes[0].script_text).startswith(
        "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
        "TE_FP8=1 NODE_RANK=0 bash ")
    assert plan.warnings == [
        "precision 'INT4' is not known for the llama-3 family (known: FP8, BF16, MXFP4, MXFP8); "
        "using TE_FP8=1"
    ]


def test_fp16_is_unknown_for_llama_and_warns():
    plan = build_launch(make_job(precision="FP16"))
    assert " TOTAL_ITERS=20 TE_FP8=1 NODE_RANK=0 " in _run_line(plan.nodes[0].script_text)
    assert len(plan.warnings) == 1 and "'FP16'" in plan.warnings[0]


def test_unknown_family_without_script_is_a_setup_error():
    job = with_params(make_job(), tokenizer_model="openai-community/gpt2")
    with pytest.raises(JobSetupError) as err:
        build_launch(job)
    assert err.value.field == "train_params.tokenizer_model"
    assert "'openai-community/gpt2' matches no Megatron-LM model family" in str(err.value)
    assert "train_params.training_script" in str(err.value)


def test_unknown_family_with_training_script_uses_generic_names_and_warns():
    job = with_params(make_job(precision="BF16"), tokenizer_model="gpt2",
                      training_script="examples/gpt3/train_gpt3.sh")
    plan = build_launch(job)
    assert _run_line(plan.nodes[0].script_text) == (
        "RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 GBS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8 TOTAL_ITERS=20 "
        "TE_FP8=1 NODE_RANK=0 bash /workspace/Megatron-LM/examples/gpt3/train_gpt3.sh")
    assert plan.warnings == ["precision 'BF16': no Megatron-LM model family known, using TE_FP8=1"]


def test_train_params_drive_inline_values_and_root():
    job = with_params(make_job(iterations=50), recompute="1", fsdp="1", tensor_parallelism="8",
                      pipeline_parallelism="2", sequence_length="4096", model_size="70",
                      megatron_root="/opt/Megatron-LM/")
    script = build_launch(job).nodes[0].script_text
    assert _run_line(script) == (
        "RECOMPUTE=1 SEQ_LENGTH=4096 MBS=4 BS=128 TP=8 PP=2 FSDP=1 MODEL_SIZE=70 TOTAL_ITERS=50 "
        "TE_FP8=1 NODE_RANK=0 bash /opt/Megatron-LM/examples/llama/train_llama3.sh")
    assert "cd /opt/Megatron-LM/ || " in script


def test_configured_rocm_dir_replaces_detection():
    script = build_launch(make_job(rocm_dir="/opt/rocm-6.4.1/")).nodes[0].script_text
    assert "cvs_rocm_dir" not in script
    assert "export LD_LIBRARY_PATH=/usr/local/lib/:/opt/rocm-6.4.1/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n" in script


def test_changeme_rocm_dir_means_detect():
    script = build_launch(make_job(rocm_dir="<changeme>")).nodes[0].script_text
    assert ROCM_DETECT in script


def test_downloaded_tokenizer_path_is_passed_instead_of_repo_id():
    job = with_params(make_job(tokenizer_path="/home/alice/cache/mixtral_8x7B/tokenizer.model"),
                      tokenizer_model="mistralai/Mixtral-8x7B-v0.1", model_name="mixtral_8x7B")
    plan = build_launch(job)
    assert "export TOKENIZER_MODEL=/home/alice/cache/mixtral_8x7B/tokenizer.model\n" in (
        plan.nodes[0].script_text)
    assert plan.warnings == []


def test_missing_local_tokenizer_warns_and_passes_repo_id():
    job = with_params(make_job(), tokenizer_model="mistralai/Mixtral-8x7B-v0.1")
    plan = build_launch(job)
    assert "export TOKENIZER_MODEL=mistralai/Mixtral-8x7B-v0.1\n" in plan.nodes[0].script_text
    assert plan.warnings == [
        "mistralai/Mixtral-8x7B-v0.1 needs a local tokenizer.model but none was downloaded; "
        "passing the repo id (run the tokenizer stage first)"
    ]


def test_deepseek_loads_its_tokenizer_from_the_hub_so_nothing_is_downloaded_or_warned():
    job = with_params(make_job(), tokenizer_model="deepseek-ai/DeepSeek-V2-Lite")
    assert build_launch(job).warnings == []


def test_distributed_writes_one_script_per_node_with_its_rank_and_gid_reexport():
    job = make_job(nnodes=3, distributed=True, env={"NNODES": "3", "NCCL_IB_GID_INDEX": "3"})
    plan = build_launch(job)
    assert [n.script_path for n in plan.nodes] == [f"{SCRIPTS}/node{i}.sh" for i in range(3)]
    assert [n.log_path for n in plan.nodes] == [
        f"{LOGS}/out-node{i}/training.log" for i in range(3)]
    for node in plan.nodes:
        script = node.script_text
        assert f" NODE_RANK={node.rank} bash " in _run_line(script)
        assert f"export LOG_DIR={LOGS}/out-node{node.rank}\n" in script and "TRAIN_LOG" not in script
        assert f"> {SCRIPTS}/node{node.rank}.exit.tmp" in script
        # MI300X -> thor2 (Broadcom): the GID index is really exported, right before the launch.
        assert script.splitlines()[-3] == "export NCCL_IB_GID_INDEX=3"
    assert len({n.script_text for n in plan.nodes}) == 3


def test_gid_reexport_keeps_a_configured_index():
    job = make_job(nnodes=2, distributed=True, env={"NCCL_IB_GID_INDEX": "1"})
    assert "export NCCL_IB_GID_INDEX=1\n" in build_launch(job).nodes[0].script_text


def test_no_gid_reexport_on_ainic_or_single_node():
    ainic = make_job(gpu_name="MI355X", nnodes=2, distributed=True)
    single = make_job()
    override = with_params(make_job(nnodes=2, distributed=True), nic_type="ainic")
    for job in (ainic, single, override):
        assert "NCCL_IB_GID_INDEX" not in build_launch(job).nodes[0].script_text


def test_single_node_on_several_hosts_uses_rank_zero_everywhere_but_own_files():
    plan = build_launch(make_job(nnodes=2, distributed=False))
    assert [" NODE_RANK=0 bash " in _run_line(n.script_text) for n in plan.nodes] == [True, True]
    assert plan.nodes[1].log_path == f"{LOGS}/out-node1/training.log"


def test_host_runtime_exports_env_quoted_before_the_launch():
    env = {"NNODES": "1", "MASTER_ADDR": "127.0.0.1", "NCCL_SOCKET_IFNAME": "enp 1",
           "ODD": "it's", "bad-name": "x"}
    plan = build_launch(make_job(runtime="host", env=env))
    lines = plan.nodes[0].script_text.splitlines()
    start = lines.index("export TORCH_NCCL_ASYNC_ERROR_HANDLING=0") + 1
    assert lines[start:start + 4] == [
        "export MASTER_ADDR=127.0.0.1",
        "export NCCL_SOCKET_IFNAME='enp 1'",
        "export NNODES=1",
        "export ODD='it'\"'\"'s'",
    ]
    assert lines[start + 4].startswith("RECOMPUTE=0 ")
    assert plan.warnings == [
        "container.env.bad-name: not a valid environment variable name; not exported by the "
        "host-runtime wrapper"
    ]


def test_docker_runtime_does_not_repeat_the_container_env():
    script = build_launch(make_job(env={"NNODES": "1", "MASTER_ADDR": "10.1.1.1"})).nodes[0].script_text
    assert "MASTER_ADDR" not in script and "NNODES" not in script


def test_no_token_file_means_no_hf_token_export():
    script = build_launch(make_job(hf_token_path=None)).nodes[0].script_text
    assert "HF_TOKEN" not in script


def test_scripts_are_per_run_and_label():
    a = build_launch(make_job(run_id="run-1", label="smoke")).nodes[0]
    b = build_launch(make_job(run_id="run-2", label="smoke")).nodes[0]
    c = build_launch(make_job(run_id="run-2", label="MBS=1,GBS=8,PRECISION=BF16")).nodes[0]
    assert a.script_path == "/home/alice/SCRIPTS/megatron/run-1/smoke/node0.sh"
    assert b.script_path == "/home/alice/SCRIPTS/megatron/run-2/smoke/node0.sh"
    assert c.script_path == "/home/alice/SCRIPTS/megatron/run-2/MBS_1_GBS_8_PRECISION_BF16/node0.sh"
    assert c.log_path == (
        "/home/alice/LOGS/megatron/megatron-logs/MBS_1_GBS_8_PRECISION_BF16/out-node0/training.log")


def test_checkpoint_fields_are_ignored_with_a_warning_for_megatron():
    plan = build_launch(make_job(save_dir="/x", save_interval=5))
    assert "--save" not in plan.nodes[0].script_text
    assert plan.warnings == [
        "checkpoint save/resume is Primus-only; ignored for the Megatron-LM job"]


@pytest.mark.parametrize(("field", "value", "where"),
                         [("nnodes", 0, "node_dict"),
                          ("iterations", 0, "train_params.training_iterations")])
def test_impossible_jobs_are_setup_errors(field, value, where):
    with pytest.raises(JobSetupError) as err:
        build_launch(dataclasses.replace(make_job(), **{field: value}))
    assert err.value.field == where


def test_deepseek_gets_the_names_its_script_reads_recompute_on_is_ac_full():
    job = with_params(make_job(precision="BF16"), tokenizer_model="deepseek-ai/DeepSeek-V2-Lite", recompute="1",
                      sequence_length="4096")
    line = _run_line(build_launch(job).nodes[0].script_text)
    assert line.startswith("AC=full SEQ_LEN=4096 PAD_LEN=4096 MBS=4 GBS=128 ")
    assert "RECOMPUTE=" not in line and "SEQ_LENGTH=" not in line
