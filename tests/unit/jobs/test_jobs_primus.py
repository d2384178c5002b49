"""Primus wrapper scripts, experiment-YAML lookup and checkpoint flags (docs/reference_suite.md#primus-command)."""

from __future__ import annotations

import pytest
from jobs_factory import make_job, with_params

from cvs_tasks.jobs import (
    JobSetupError,
    build_launch,
    checkpoint_root,
    experiment_header,
    missing_yaml_error,
    pick_existing_yaml,
    primus_yaml_candidates,
    resume_load_dir,
    yaml_check_command,
)

SCRIPTS = "/home/alice/SCRIPTS/megatron/run-7/MBS_4_GBS_128_PRECISION_FP8"
LOGS = "/home/alice/LOGS/megatron/primus-logs/MBS_4_GBS_128_PRECISION_FP8"
YAML = "examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"

# A backslash at a line's end below is Python's line continuation: the pinned text has no break there.
SINGLE_MI300X = f"""\
#!/bin/bash
# cvs-tasks Primus wrapper: MBS=4,GBS=128,PRECISION=FP8, node 0 of 1, run run-7
set -u
cvs_finish() {{ echo "$1" > {SCRIPTS}/node0.exit.tmp && mv -f {SCRIPTS}/node0.exit.tmp {SCRIPTS}/node0.exit; \
exit "$1"; }}
trap 'cvs_finish 143' TERM
trap 'cvs_finish 130' INT
export HF_TOKEN="$(cat /home/alice/.hf_token)"
export LOG_DIR=/home/alice/LOGS/megatron
export PRIMUS_TURBO_ATTN_V3_ATOMIC_FP32=1
export NVTE_CK_IS_V3_ATOMIC_FP32=1
cd /workspace/Primus || {{ echo 'cvs-tasks: cannot cd to /workspace/Primus (train_params.primus_root)' >&2; \
cvs_finish 1; }}
NODE_RANK=0 bash runner/primus-cli direct --log_file {LOGS}/out-node0/training.log -- train pretrain --config {YAML} \
--micro_batch_size 4 --global_batch_size 128 --train_iters 20 --tensor_model_parallel_size 1 \
--pipeline_model_parallel_size 1 --seq_length 8192 --recompute_granularity None --use_torch_fsdp2 False
cvs_finish "$?"
"""


def primus_job(**changes):
    return make_job(backend="primus", image="rocm/primus:v26.5", **changes)


def _run_line(script: str) -> str:
    return script.splitlines()[-2]


def test_single_node_mi300x_wrapper_is_exact():
    plan = build_launch(primus_job(), experiment=YAML)
    assert plan.combo_log_dir == LOGS
    assert plan.nodes[0].script_text == SINGLE_MI300X
    assert plan.warnings == []


def test_launch_sends_the_launcher_console_to_console_log_not_training_log():
    node = build_launch(primus_job(), experiment=YAML).nodes[0]
    assert node.log_path == f"{LOGS}/out-node0/training.log"
    assert node.console_path == f"{LOGS}/out-node0/console.log"
    assert node.launch_command == (
        f"mkdir -p {LOGS}/out-node0 && rm -f {SCRIPTS}/node0.exit {SCRIPTS}/node0.pid && "
        f"{{ setsid nohup bash {SCRIPTS}/node0.sh > {LOGS}/out-node0/console.log 2>&1 "
        f"< /dev/null & echo $! > {SCRIPTS}/node0.pid; }}"
    )


def test_tp_pp_come_from_train_params():
    job = with_params(primus_job(), tensor_parallelism="8", pipeline_parallelism="2")
    line = _run_line(build_launch(job, experiment=YAML).nodes[0].script_text)
    assert line.endswith("--tensor_model_parallel_size 8 --pipeline_model_parallel_size 2 --seq_length 8192 "
                         "--recompute_granularity None --use_torch_fsdp2 False")


def test_tp_pp_default_to_one_when_absent():
    params = {"model_name": "llama3.1_8B"}
    line = _run_line(build_launch(primus_job(train_params=params), experiment=YAML)
                     .nodes[0].script_text)
    assert line.endswith("--tensor_model_parallel_size 1 --pipeline_model_parallel_size 1 --seq_length 8192 "
                         "--recompute_granularity None --use_torch_fsdp2 False")


def test_sweep_overlay_values_win():
    # The combo's effective train_params already carry the body overlay (4/2 over 8/2).
    job = with_params(primus_job(), tensor_parallelism="4", pipeline_parallelism="2")
    line = _run_line(build_launch(job, experiment=YAML).nodes[0].script_text)
    assert "--tensor_model_parallel_size 4 --pipeline_model_parallel_size 2" in line


def test_save_phase_sets_workspace_and_save_flags():
    ckpt = "/home/alice/LOGS/megatron/ckpt_primus"
    job = primus_job(label="ckpt_save", iterations=21, save_dir=ckpt, save_interval=20)
    script = build_launch(job, experiment=YAML).nodes[0].script_text
    assert (
        "export NVTE_CK_IS_V3_ATOMIC_FP32=1\n"
        f"export PRIMUS_WORKSPACE={ckpt}\n"
        'export PRIMUS_TEAM=""\n'
        'export PRIMUS_USER=""\n'
        'export PRIMUS_EXP_NAME=""\n'
        "cd /workspace/Primus || "
    ) in script
    assert _run_line(script).endswith(
        "--train_iters 21 --tensor_model_parallel_size 1 --pipeline_model_parallel_size 1 --seq_length 8192 "
        "--recompute_granularity None --use_torch_fsdp2 False "
        "--save --save_interval 20")


def test_resume_phase_loads_without_saving():
    ckpt = "/home/alice/LOGS/megatron/ckpt_primus"
    job = primus_job(label="ckpt_resume", iterations=25, save_dir=ckpt,
                     load_dir=resume_load_dir(ckpt))
    script = build_launch(job, experiment=YAML).nodes[0].script_text
    assert f"export PRIMUS_WORKSPACE={ckpt}\n" in script
    assert _run_line(script).endswith(
        f"--pipeline_model_parallel_size 1 --seq_length 8192 --recompute_granularity None --use_torch_fsdp2 False "
        f"--load {ckpt}/checkpoints")
    assert "--save" not in script


def test_resume_without_save_dir_derives_the_workspace_from_the_load_dir():
    job = primus_job(load_dir="/shared/ckpt/checkpoints", nnodes=2, distributed=True)
    plan = build_launch(job, experiment=YAML)
    script = plan.nodes[1].script_text
    assert "export PRIMUS_WORKSPACE=/shared/ckpt\n" in script
    assert _run_line(script).endswith("--load /shared/ckpt/checkpoints --auto_detect_ckpt_format")
    assert _run_line(script).startswith("NODE_RANK=1 bash runner/primus-cli direct --log_file "
                                        f"{LOGS}/out-node1/training.log -- ")


def test_saving_without_a_checkpoint_dir_is_a_setup_error():
    with pytest.raises(JobSetupError) as err:
        build_launch(primus_job(save_interval=20), experiment=YAML)
    assert err.value.field == "checkpoint.checkpoint_dir"


def test_no_checkpoint_env_outside_checkpoint_phases():
    assert "PRIMUS_WORKSPACE" not in build_launch(primus_job(), experiment=YAML).nodes[0].script_text


def test_mi355x_has_no_atomic_fp32_exports():
    script = build_launch(primus_job(gpu_name="MI355X"), experiment=YAML).nodes[0].script_text
    assert "ATOMIC_FP32" not in script


def test_host_runtime_exports_env_before_cd():
    job = primus_job(runtime="host", env={"NNODES": "2", "MASTER_ADDR": "127.0.0.2"})
    lines = build_launch(job, experiment=YAML).nodes[0].script_text.splitlines()
    at = lines.index("export NVTE_CK_IS_V3_ATOMIC_FP32=1")
    assert lines[at + 1:at + 4] == [
        "export MASTER_ADDR=127.0.0.2",
        "export NNODES=2",
        "cd /workspace/Primus || { echo 'cvs-tasks: cannot cd to /workspace/Primus "
        "(train_params.primus_root)' >&2; cvs_finish 1; }",
    ]


def test_primus_root_and_cli_come_from_train_params():
    job = with_params(primus_job(), primus_root="/opt/Primus", primus_cli="primus-cli")
    script = build_launch(job, experiment=YAML).nodes[0].script_text
    assert "cd /opt/Primus || " in script
    assert _run_line(script).startswith("NODE_RANK=0 bash primus-cli direct ")


def test_without_a_checked_yaml_the_first_candidate_is_used():
    plan = build_launch(primus_job(gpu_name="MI325X"))
    assert ("--config examples/megatron/configs/MI325X/llama3.1_8B-FP8-pretrain.yaml "
            in plan.nodes[0].script_text)


def test_yaml_candidates_fall_back_from_mi325x_to_mi300x():
    assert primus_yaml_candidates(primus_job(gpu_name="MI325X", precision="BF16")) == [
        "examples/megatron/configs/MI325X/llama3.1_8B-BF16-pretrain.yaml",
        "examples/megatron/configs/MI325X/llama3.1_8B-pretrain.yaml",
        "examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml",
        "examples/megatron/configs/MI300X/llama3.1_8B-pretrain.yaml",
        "examples/megatron/configs/llama3.1_8B-pretrain.yaml",
    ]
    assert primus_yaml_candidates(primus_job(gpu_name="MI355X", precision="MXFP8")) == [
        "examples/megatron/configs/MI355X/llama3.1_8B-MXFP8-pretrain.yaml",
        "examples/megatron/configs/MI355X/llama3.1_8B-pretrain.yaml",
        "examples/megatron/configs/llama3.1_8B-pretrain.yaml",
    ]


def test_yaml_candidates_need_a_model_name():
    with pytest.raises(JobSetupError) as err:
        primus_yaml_candidates(primus_job(train_params={}))
    assert err.value.field == "train_params.model_name"


def test_yaml_check_is_one_command_and_its_output_picks_the_first_existing():
    candidates = ["examples/megatron/configs/MI325X/a.yaml", "examples/megatron/configs/MI300X/a.yaml"]
    assert yaml_check_command(candidates, "/workspace/Primus") == (
        "cd /workspace/Primus && found= && for f in examples/megatron/configs/MI325X/a.yaml "
        "examples/megatron/configs/MI300X/a.yaml; do if [ -f \"$f\" ]; then echo \"EXISTS $f\"; "
        "[ -n \"$found\" ] || found=$f; else echo \"MISSING $f\"; fi; done; [ -z \"$found\" ] || "
        "grep -E '^(workspace|work_group|user_name|exp_name):' -- \"$found\" | sed 's/^/HEADER /'; true"
    )
    output = ("MISSING examples/megatron/configs/MI325X/a.yaml\n"
              "EXISTS examples/megatron/configs/MI300X/a.yaml\n")
    assert pick_existing_yaml(output) == "examples/megatron/configs/MI300X/a.yaml"
    assert pick_existing_yaml("MISSING x.yaml\nMISSING y.yaml\n") is None
    assert pick_existing_yaml("") is None


def test_missing_yaml_error_names_every_path_tried():
    candidates = primus_yaml_candidates(primus_job(gpu_name="MI325X"))
    err = missing_yaml_error(candidates, "/workspace/Primus/")
    assert isinstance(err, JobSetupError)
    assert err.field == "train_params.model_name"
    assert str(err).startswith(
        "Primus experiment YAML not found in the image: tried "
        "/workspace/Primus/examples/megatron/configs/MI325X/llama3.1_8B-FP8-pretrain.yaml, "
        "/workspace/Primus/examples/megatron/configs/MI325X/llama3.1_8B-pretrain.yaml, "
        "/workspace/Primus/examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml, "
        "/workspace/Primus/examples/megatron/configs/MI300X/llama3.1_8B-pretrain.yaml, "
        "/workspace/Primus/examples/megatron/configs/llama3.1_8B-pretrain.yaml; ")


def test_sequence_length_recompute_and_fsdp_are_overrides_so_the_suite_config_wins_over_the_yaml():
    job = primus_job(train_params={**primus_job().train_params, "sequence_length": "4096", "recompute": "1",
                                   "fsdp": "1"})
    line = _run_line(build_launch(job, experiment=YAML).nodes[0].script_text)
    assert line.endswith("--seq_length 4096 --recompute_granularity full --recompute_method uniform "
                         "--recompute_num_layers 1 --use_torch_fsdp2 True")


@pytest.mark.parametrize("yaml, precision, tail", [
    ("examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml", "FP8", "--use_torch_fsdp2 False"),  # v0.6.0+
    ("examples/megatron/configs/MI300X/llama3.1_8B-pretrain.yaml", "FP8",
     "--use_torch_fsdp2 False --fp8 hybrid"),  # v0.5.0
    ("examples/megatron/configs/llama3.1_8B-pretrain.yaml", "BF16", "--use_torch_fsdp2 False"),  # v0.4.0
])
def test_each_primus_layout_gets_the_precision_the_way_it_reads_it(yaml, precision, tail):
    job = primus_job(precision=precision, label=f"MBS=4,GBS=128,PRECISION={precision}")
    line = _run_line(build_launch(job, experiment=yaml).nodes[0].script_text)
    assert f"--config {yaml} " in line and line.endswith(tail)


def test_a_precision_an_old_primus_layout_cannot_select_is_refused():
    job = primus_job(precision="MXFP8", label="MBS=4,GBS=128,PRECISION=MXFP8")
    with pytest.raises(JobSetupError) as err:
        build_launch(job, experiment="examples/megatron/configs/MI355X/llama3.1_8B-pretrain.yaml")
    assert "MXFP8 cannot be selected on this image" in str(err.value)


# -- where Primus saves: <workspace>/<work_group>/<user_name>/<exp_name>/checkpoints -----------------

HEADER_8B = ("HEADER work_group: ${PRIMUS_TEAM:amd}\nHEADER user_name: ${PRIMUS_USER:root}\n"
             "HEADER exp_name: ${PRIMUS_EXP_NAME:llama3.1_8B-pretrain}\n"
             "HEADER workspace: ${PRIMUS_WORKSPACE:./output}\n")


def test_the_experiment_header_is_read_from_the_check_output():
    out = "MISSING a.yaml\nEXISTS b.yaml\n" + HEADER_8B.replace("root}", "root}   # who") + "HEADER other: x\n"
    assert experiment_header(out) == {"work_group": "${PRIMUS_TEAM:amd}", "user_name": "${PRIMUS_USER:root}",
                                      "exp_name": "${PRIMUS_EXP_NAME:llama3.1_8B-pretrain}",
                                      "workspace": "${PRIMUS_WORKSPACE:./output}"}
    assert experiment_header('HEADER exp_name: "exp-a"\n') == {"exp_name": "exp-a"}


def test_a_yaml_that_reads_the_exports_saves_straight_under_the_checkpoint_directory():
    header = experiment_header(HEADER_8B)
    assert checkpoint_root("/shared/ckpt/", header, {}) == "/shared/ckpt"
    assert resume_load_dir(checkpoint_root("/shared/ckpt", header, {})) == "/shared/ckpt/checkpoints"


def test_a_pinned_exp_name_moves_the_checkpoints_into_its_folder():
    """Primus's 405B YAML: `exp_name: exp-llama3_405B-pretrain` is not a placeholder, so the
    emptied PRIMUS_EXP_NAME does not reach it."""
    header = experiment_header(HEADER_8B.replace("${PRIMUS_EXP_NAME:llama3.1_8B-pretrain}", "exp-llama3_405B-pretrain"))
    root = checkpoint_root("/shared/ckpt", header, {})
    assert root == "/shared/ckpt/exp-llama3_405B-pretrain"
    assert resume_load_dir(root) == "/shared/ckpt/exp-llama3_405B-pretrain/checkpoints"


def test_other_placeholders_resolve_from_the_job_env_or_their_default():
    header = {"workspace": "${PRIMUS_WORKSPACE}", "work_group": "${SITE_TEAM:ops}", "user_name": "${ME:}",
              "exp_name": "run-${RUN_TAG:x}"}
    assert checkpoint_root("/c", header, {"RUN_TAG": "7"}) == "/c/ops/run-7"
    assert checkpoint_root("/c", header, {"SITE_TEAM": ""}) == "/c/run-x"   # set but empty stays empty


def test_a_pinned_workspace_or_an_unset_required_variable_is_refused():
    pinned = checkpoint_root("/c", {"workspace": "./output", "exp_name": "e"}, {})
    assert isinstance(pinned, JobSetupError) and "pins workspace: './output'" in str(pinned)
    assert pinned.field == "checkpoint.checkpoint_dir"
    unset = checkpoint_root("/c", {"workspace": "${PRIMUS_WORKSPACE}", "exp_name": "${SITE_EXP}"}, {})
    assert isinstance(unset, JobSetupError) and "exp_name" in str(unset) and unset.field == "container.env"
