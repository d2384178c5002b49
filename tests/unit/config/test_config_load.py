"""The suite load pipeline: each rule with a good and a bad case, every problem collected."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from config_helpers import BF16, FIXTURES, FP8, minimal_config, minimal_thresholds, write_json

from cvs_tasks.config import Cluster, ConfigError, HostSpec, load_suite
from cvs_tasks.errors import EXIT_BAD_INPUT, BadInput
from cvs_tasks.templates import template_dir


def problems_of(path: Path, cluster: Cluster | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load_suite(path, cluster)
    return dict(info.value.problems)


def test_minimal_config_loads_with_combos_in_run_order(suite_files):
    suite = load_suite(suite_files())
    assert [c.id for c in suite.combos] == [FP8, BF16]
    assert suite.backend == "megatron"
    assert suite.config.gpu_name == "MI300X"
    assert set(suite.thresholds) == {FP8, BF16}
    assert suite.thresholds[FP8]["training.mem_usage"].optional is True


def test_files_hash_covers_config_and_threshold_bytes(suite_files, tmp_path):
    path = suite_files()
    expected = hashlib.sha256(path.read_bytes() + (tmp_path / "thr.json").read_bytes()).hexdigest()
    assert load_suite(path).files_hash == expected


def test_config_error_is_bad_input_with_exit_2(suite_files):
    config = minimal_config(gpu_name="MI400")
    with pytest.raises(BadInput) as info:
        load_suite(suite_files(config))
    assert info.value.exit_code == EXIT_BAD_INPUT


# --- file reading ---------------------------------------------------------------------------

def test_missing_config_file_names_the_path_tried(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_suite(tmp_path / "nope.json")
    assert str((tmp_path / "nope.json").resolve()) in str(info.value)
    assert info.value.file == tmp_path / "nope.json"


def test_invalid_json_names_line_and_column():
    with pytest.raises(ConfigError) as info:
        load_suite(FIXTURES / "broken_syntax.json")
    (path, message), = info.value.problems
    assert path == "line 5 column 5"
    assert "invalid JSON" in message and "delimiter" in message


def test_top_level_must_be_an_object(tmp_path):
    path = write_json(tmp_path / "list.json", [1, 2])
    with pytest.raises(ConfigError, match="top level must be a JSON object"):
        load_suite(path)


def test_duplicate_keys_are_reported_not_silently_dropped(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"gpu_name": "MI300X", "gpu_name": "MI325X"}')
    with pytest.raises(ConfigError, match="'gpu_name' appears twice"):
        load_suite(path)


# --- old formats -----------------------------------------------------------------------------

def test_sk_style_config_is_recognised_and_points_to_new_fields():
    with pytest.raises(ConfigError) as info:
        load_suite(FIXTURES / "sk_style_config.json")
    text = str(info.value)
    problems = dict(info.value.problems)
    assert "old SK-style config" in text
    assert "gpu_name" in problems["gpu_arch"]
    assert "paths.*" in problems["config"] and "container.env" in problems["config"]
    assert "train_params" in problems["model_params"]
    assert "delete" in problems["framework"]


def test_legacy_per_model_config_is_rejected_with_copy_advice():
    with pytest.raises(ConfigError) as info:
        load_suite(FIXTURES / "legacy_per_model_config.json")
    assert "legacy per-model suite config" in str(info.value)
    assert "config.copy" in str(info.value)


# --- top level -------------------------------------------------------------------------------

def test_unknown_top_level_key_gets_did_you_mean(suite_files):
    config = minimal_config(enforce_threshold=False)
    problems = problems_of(suite_files(config))
    assert problems["enforce_threshold"] == "unknown key (did you mean 'enforce_thresholds'?)"


def test_top_level_comment_keys_are_dropped_but_nested_ones_fail(suite_files):
    config = minimal_config(_comment="top-level note")
    load_suite(suite_files(config))
    config["container"]["_note"] = "nested"
    problems = problems_of(suite_files(config))
    assert "only allowed at the top level" in problems["container._note"]


@pytest.mark.parametrize("given, stored", [("mi300x", "MI300X"), (" MI355X ", "MI355X"), ("Mi325x", "MI325X")])
def test_gpu_name_is_stripped_and_upper_cased(suite_files, given, stored):
    assert load_suite(suite_files(minimal_config(gpu_name=given))).config.gpu_name == stored


def test_unknown_gpu_name_lists_the_choices(suite_files):
    problems = problems_of(suite_files(minimal_config(gpu_name="MI250X")))
    assert problems["gpu_name"] == "must be one of MI300X, MI325X, MI355X (got 'MI250X')"


@pytest.mark.parametrize("value, ok", [(1, True), (8, True), (0, False), (-2, False)])
def test_gpus_per_node_must_be_at_least_one(suite_files, value, ok):
    path = suite_files(minimal_config(gpus_per_node=value))
    if ok:
        assert load_suite(path).config.gpus_per_node == value
    else:
        assert "gpus_per_node" in problems_of(path)


def test_defaults_of_the_optional_blocks(suite_files):
    config = load_suite(suite_files()).config
    assert config.gpus_per_node == 8 and config.enforce_thresholds is True
    assert config.watch.poll_interval_s == 2.0 and config.watch.stall_timeout_s == 900
    assert config.watch.startup_timeout_s == 1800 and config.watch.timeout_s == 0
    assert config.gpu.visible_check == "test -e /dev/kfd"
    assert config.gpu.pids_command == "rocm-smi --showpids"
    assert config.smoke.iters == 10 and config.smoke.global_batch_size == ""
    assert config.checkpoint.save_interval == 20 and config.checkpoint.enforce is False
    assert config.loss_curve.milestone_steps == [100, 500, 1000, 5000]
    assert config.container.lifetime == "per_run" and config.container.runtime.args.network == "host"


def test_every_problem_is_collected_in_one_error(suite_files):
    config = minimal_config(gpu_name="MI999", gpus_per_node=0)
    config["container"]["env"]["NNODES"] = "2"
    config["sweep"]["runs"].append("MBS=8,GBS=8,PRECISION=FP8")
    problems = problems_of(suite_files(config))
    assert {"gpu_name", "gpus_per_node", "container.env.NNODES", "sweep.runs[2]"} <= set(problems)


# --- placeholders ----------------------------------------------------------------------------

def test_user_id_comes_from_the_cluster_username(suite_files, tmp_path):
    cluster = Cluster(path=tmp_path / "c.json", username="alice", priv_key_file="/k",
                      hosts=[HostSpec("n1", "n1")])
    suite = load_suite(suite_files(), cluster)
    assert suite.config.paths.hf_token_file == "/home/alice/.hf_token"


def test_user_id_falls_back_to_the_local_user(suite_files, monkeypatch):
    monkeypatch.setenv("USER", "bob")
    assert load_suite(suite_files()).config.paths.log_dir == "/home/bob/LOGS"


def test_paths_refer_to_each_other_and_are_usable_everywhere(suite_files, monkeypatch):
    monkeypatch.setenv("USER", "bob")
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"volumes": ["{paths.data_cache_dir}:/cache"]}
    suite = load_suite(suite_files(config))
    assert suite.config.paths.scripts_dir == "/home/bob/LOGS/scripts"
    assert suite.config.container.runtime.args.volumes == ["/data/cache:/cache"]


def test_unknown_paths_placeholder_is_a_problem(suite_files):
    config = minimal_config()
    config["container"]["env"]["LOG"] = "{paths.lgo_dir}/x"
    problems = problems_of(suite_files(config))
    assert problems["container.env.LOG"].startswith("unknown placeholder {paths.lgo_dir}")


def test_every_changeme_path_is_listed_once(suite_files):
    config = minimal_config(gpu_name="<changeme>")
    config["container"]["image"] = "<changeme>"
    config["container"]["env"]["NCCL_SOCKET_IFNAME"] = "enp193s0f1np1 <changeme>"
    config["container"]["runtime"]["args"] = {"devices": ["/dev/kfd", "/dev/dri <changeme>"]}
    problems = problems_of(suite_files(config))
    assert set(problems) == {"gpu_name", "container.image", "container.env.NCCL_SOCKET_IFNAME",
                             "container.runtime.args.devices[1]"}
    assert "still '<changeme>'" in problems["gpu_name"] and "MI300X or MI325X" in problems["gpu_name"]
    assert "'enp193s0f1np1'" in problems["container.env.NCCL_SOCKET_IFNAME"]


def test_checkpoint_placeholders_are_exempt_while_the_checkpoint_stage_is_off(suite_files):
    config = minimal_config(checkpoint={"enforce": False, "checkpoint_dir": "<changeme>"})
    config["container"]["runtime"]["args"] = {"volumes": ["/a:/a", "<changeme>:<changeme>"]}
    suite = load_suite(suite_files(config))
    assert suite.config.container.runtime.args.volumes == ["/a:/a"]
    assert suite.config.checkpoint.checkpoint_dir == ""
    config["checkpoint"]["enforce"] = True
    problems = problems_of(suite_files(config))
    assert {"checkpoint.checkpoint_dir", "container.runtime.args.volumes[1]"} <= set(problems)


# --- container -------------------------------------------------------------------------------

def test_nnodes_in_env_is_rejected_with_the_reason(suite_files):
    config = minimal_config()
    config["container"]["env"]["NNODES"] = "2"
    assert "number of hosts in the cluster file" in problems_of(suite_files(config))["container.env.NNODES"]


def test_env_values_must_be_strings(suite_files):
    config = minimal_config()
    config["container"]["env"]["NCCL_IB_GID_INDEX"] = 3
    message = problems_of(suite_files(config))["container.env.NCCL_IB_GID_INDEX"]
    assert message == 'must be a string (write "3" with quotes)'


def test_hf_token_in_env_is_refused(suite_files):
    config = minimal_config()
    config["container"]["env"]["HF_TOKEN"] = "hf_abc"
    assert "paths.hf_token_file" in problems_of(suite_files(config))["container.env.HF_TOKEN"]


def test_env_under_runtime_args_is_redirected(suite_files):
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"env": {"A": "1"}}
    assert "container.env" in problems_of(suite_files(config))["container.runtime.args.env"]


def test_runtime_is_docker_host_or_pyxis(suite_files):
    config = minimal_config()
    config["container"]["runtime"] = {"name": "enroot"}
    assert "'docker', 'host' or 'pyxis'" in problems_of(suite_files(config))["container.runtime.name"]
    config["container"]["runtime"] = {"name": "host"}
    config["container"]["name"] = ""
    assert load_suite(suite_files(config)).config.container.runtime.name == "host"


def test_docker_runtime_needs_a_container_name(suite_files):
    config = minimal_config()
    del config["container"]["name"]
    assert "container.name" in problems_of(suite_files(config))


def test_runtime_args_typo_gets_did_you_mean(suite_files):
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"volume": ["/a:/a"]}
    assert problems_of(suite_files(config))["container.runtime.args.volume"] == "unknown key (did you mean 'volumes'?)"


def test_malformed_volume_is_reported(suite_files):
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"volumes": ["/only-one-side"]}
    assert "host:container" in problems_of(suite_files(config))["container.runtime.args.volumes"]


def test_primus_image_selects_the_primus_backend(suite_files):
    config = minimal_config()
    config["container"]["image"] = "docker.io/ROCm/Primus:v25.9"
    assert load_suite(suite_files(config)).backend == "primus"


def test_405b_needs_a_primus_image(suite_files):
    config = minimal_config()
    config["train_params"]["model_name"] = "llama3.1_405B"
    assert "runs only on Primus" in problems_of(suite_files(config))["container.image"]
    config["container"]["image"] = "rocm/primus:v25.9"
    assert load_suite(suite_files(config)).backend == "primus"


def test_cluster_container_defaults_merge_under_the_suite_block(suite_files, tmp_path):
    config = minimal_config()
    del config["container"]["image"]
    cluster = Cluster(path=tmp_path / "c.json", username="u", priv_key_file="/k", hosts=[HostSpec("n", "n")],
                      container={"image": "site/megatron:1", "env": {"NCCL_DEBUG": "INFO", "EXTRA": "1"}})
    suite = load_suite(suite_files(config), cluster)
    assert suite.config.container.image == "site/megatron:1"
    assert suite.config.container.env == {"NCCL_DEBUG": "ERROR", "EXTRA": "1"}


# --- checkpoint ------------------------------------------------------------------------------

def test_checkpoint_save_iters_must_not_be_a_multiple_of_the_interval(suite_files):
    config = minimal_config(checkpoint={"enforce": True, "save_interval": 10, "save_iters": 20, "resume_iters": 15})
    problems = problems_of(suite_files(config))
    assert "multiple of save_interval" in problems["checkpoint.save_iters"]
    assert "greater than save_iters" in problems["checkpoint.resume_iters"]


def test_checkpoint_on_megatron_is_a_warning(suite_files):
    config = minimal_config(checkpoint={"enforce": True})
    assert any("checkpoint stage will be skipped" in w for w in load_suite(suite_files(config)).warnings)


# --- thresholds ------------------------------------------------------------------------------

def test_threshold_json_relative_to_the_config_folder(suite_files):
    assert load_suite(suite_files()).threshold_path.name == "thr.json"


def test_threshold_json_falls_back_to_the_packaged_thresholds_folder(suite_files, tmp_path):
    config = minimal_config(threshold_json="mi300x_megatron_llama-3.1-8b_single_threshold.json")
    config["sweep"] = {"combinations": {FP8: {}, BF16: {}}, "runs": [FP8]}
    suite = load_suite(suite_files(config))
    assert suite.threshold_path.parent == template_dir("thresholds")
    assert (Path(__file__).resolve().parents[3] / "thresholds").resolve() == template_dir("thresholds")


def test_missing_threshold_file_names_every_place_tried(suite_files, tmp_path):
    message = problems_of(suite_files(minimal_config(threshold_json="nope.json")))["threshold_json"]
    assert str(tmp_path / "nope.json") in message and "thresholds/nope.json" in message


def test_empty_threshold_json_uses_the_single_file_beside_the_config(suite_files, tmp_path):
    config = minimal_config(threshold_json="")
    path = suite_files(config)
    (tmp_path / "thr.json").rename(tmp_path / "x_threshold.json")
    assert load_suite(path).threshold_path == tmp_path / "x_threshold.json"
    write_json(tmp_path / "y_threshold.json", minimal_thresholds())
    assert "several threshold files" in problems_of(path)["threshold_json"]


def test_no_threshold_file_is_only_a_warning_when_record_only(tmp_path):
    path = write_json(tmp_path / "suite.json", minimal_config(threshold_json="", enforce_thresholds=False))
    suite = load_suite(path)
    assert suite.threshold_path is None and suite.thresholds == {}
    assert any("recorded without thresholds" in w for w in suite.warnings)
    write_json(path, minimal_config(threshold_json=""))
    assert "no *threshold.json" in problems_of(path)["threshold_json"]


def test_threshold_changeme_lists_the_sku_files_for_this_config(tmp_path):
    path = write_json(tmp_path / "mi3xx_megatron_llama-3.1-8b_single.json", minimal_config(threshold_json="<changeme>"))
    message = problems_of(path)["threshold_json"]
    assert "mi300x_megatron_llama-3.1-8b_single_threshold.json" in message
    assert "mi325x_megatron_llama-3.1-8b_single_threshold.json" in message


def test_coverage_gaps_fail_when_enforcing_and_name_the_threshold_file(suite_files, tmp_path):
    path = suite_files(thresholds=minimal_thresholds(FP8, "MBS=4,GBS=128,PRECISION=FP16"))
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    error = info.value
    assert [file for file, _ in error.groups] == [tmp_path / "thr.json"]
    problems = dict(error.problems)
    assert problems[f'["{BF16}"]'].startswith("missing: the config runs this combo")
    assert f"(did you mean {BF16!r}?)" in problems['["MBS=4,GBS=128,PRECISION=FP16"]']
    assert f"config error in {tmp_path / 'thr.json'}:" in str(error)


def test_coverage_gaps_only_warn_when_record_only(suite_files):
    path = suite_files(minimal_config(enforce_thresholds=False), thresholds=minimal_thresholds(FP8))
    suite = load_suite(path)
    assert any(BF16 in w and "record-only" in w for w in suite.warnings)


def test_cells_for_declared_but_unselected_combos_are_fine(suite_files):
    config = minimal_config()
    config["sweep"]["runs"] = [FP8]
    suite = load_suite(suite_files(config))
    assert [c.id for c in suite.combos] == [FP8] and BF16 in suite.thresholds


def test_config_and_threshold_problems_are_reported_together(suite_files, tmp_path):
    thresholds = minimal_thresholds()
    thresholds[FP8]["training.throughput_per_gpu"] = {"kind": "min"}
    with pytest.raises(ConfigError) as info:
        load_suite(suite_files(minimal_config(gpu_name="X"), thresholds))
    assert [file.name for file, _ in info.value.groups] == ["suite_single.json", "thr.json"]
    text = str(info.value)
    assert text.index("suite_single.json:") < text.index("gpu_name") < text.index("thr.json:")


def test_suite_combo_lookup_suggests_close_ids(suite_files):
    suite = load_suite(suite_files())
    assert suite.combo(FP8).precision == "FP8"
    with pytest.raises(ConfigError, match="did you mean"):
        suite.combo("MBS=4,GBS=128,PRECISION=FP9")


def test_problems_render_one_line_each_without_traceback(suite_files):
    config = minimal_config(gpu_name="MI1")
    config["sweep"]["runs"] = [FP8, FP8]
    with pytest.raises(ConfigError) as info:
        load_suite(suite_files(config))
    lines = str(info.value).splitlines()
    assert lines[0].startswith("config error in ") and lines[0].endswith("suite_single.json:")
    assert "  gpu_name: must be one of MI300X, MI325X, MI355X (got 'MI1')" in lines
    assert f"  sweep.runs[1]: {FP8!r} repeats sweep.runs[0]; each combo runs once" in lines
    assert "Traceback" not in str(info.value)
    json.dumps(info.value.problems)


def test_lax_booleans_are_read_consistently(suite_files):
    config = minimal_config(enforce_thresholds="false", verify_network_errors="True")
    suite = load_suite(suite_files(config, minimal_thresholds(FP8)))
    assert suite.config.enforce_thresholds is False and suite.config.verify_network_errors is True
    assert any("record-only" in w for w in suite.warnings)


def test_one_message_per_spot_when_model_and_sweep_both_object(suite_files):
    config = minimal_config()
    config["sweep"]["combinations"][FP8] = "20"
    with pytest.raises(ConfigError) as info:
        load_suite(suite_files(config))
    spots = [path for path, _ in info.value.problems]
    assert spots.count(f'sweep.combinations["{FP8}"]') == 1


def test_cvs_root_placeholder_points_at_this_checkout():
    from cvs_tasks.config import REPO_ROOT
    from cvs_tasks.config.placeholders import substitute_cvs_root

    assert substitute_cvs_root({"a": ["{cvs-root}/testbed"]}, str(REPO_ROOT)) == {"a": [f"{REPO_ROOT}/testbed"]}
