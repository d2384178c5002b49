"""Batch / parallel layout at load: GBS % (MBS x DP), TP x PP dividing the world, the smoke default."""

from __future__ import annotations

import json

import pytest
from config_helpers import BF16, FP8, minimal_config, minimal_thresholds
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.config import load_suite
from cvs_tasks.config.errors import ConfigError
from cvs_tasks.config.layout import Layout, check_layout, combo_layout, layout_problems, smoke_global_batch
from cvs_tasks.tasks import config as config_tasks


def _suite(suite_files, config=None, thresholds=None, name="suite_distributed.json"):
    return load_suite(suite_files(config, thresholds, name=name))


def test_dp_is_world_over_model_parallel_and_none_when_it_does_not_divide():
    assert Layout(2, 8, 1, 1).dp == 16
    assert Layout(2, 8, 8, 1).dp == 2
    assert Layout(4, 8, 8, 2, cp=2).dp == 1
    assert Layout(1, 8, 3, 1).dp is None
    assert Layout(2, 8, 8, 4).dp is None  # the 405B layout needs at least 4 nodes


@pytest.mark.parametrize("nnodes, expected", [(1, "8"), (2, "16"), (3, "24"), (5, "40")])
def test_smoke_default_is_one_micro_batch_per_data_parallel_rank(nnodes, expected):
    assert smoke_global_batch("1", Layout(nnodes, 8, 1, 1)) == expected
    assert smoke_global_batch("2", Layout(nnodes, 8, 8, 1)) == str(2 * nnodes)


def test_the_templates_fit_the_clusters_they_are_meant_for(suite_files):
    suite = _suite(suite_files)
    assert layout_problems(suite.config, suite.combos, 1) == []
    assert layout_problems(suite.config, suite.combos, 2) == []  # 128 % (4 x 16)


def test_three_nodes_report_every_combo_and_the_smoke_cell_at_once(suite_files):
    config = minimal_config(smoke={"global_batch_size": "16"})
    suite = _suite(suite_files, config)
    problems = dict(layout_problems(suite.config, suite.combos, 3))
    assert set(problems) == {f'sweep.combinations["{FP8}"]', f'sweep.combinations["{BF16}"]',
                             "smoke.global_batch_size"}
    assert "GBS 128 is not a multiple of MBS x DP = 4 x 24 = 96" in problems[f'sweep.combinations["{FP8}"]']
    assert "DP = 24 GPUs (3 node(s) x 8) / (TP 1 x PP 1)" in problems[f'sweep.combinations["{FP8}"]']
    assert "e.g. GBS 96" in problems[f'sweep.combinations["{FP8}"]']
    smoke = problems["smoke.global_batch_size"]
    assert "GBS 16 is not a multiple of MBS x DP = 1 x 24 = 24" in smoke
    assert "leave smoke.global_batch_size empty" in smoke


def test_three_node_smoke_cell_with_the_derived_default_never_hits_the_assertion(suite_files):
    config = minimal_config()
    config["sweep"] = {"combinations": {"MBS=4,GBS=96,PRECISION=FP8": {}}}
    suite = _suite(suite_files, config, minimal_thresholds("MBS=4,GBS=96,PRECISION=FP8"))
    for nnodes in (1, 3):
        assert layout_problems(suite.config, suite.combos, nnodes) == []
        layout = combo_layout(suite.combos[0], nnodes, suite.config.gpus_per_node)
        assert int(smoke_global_batch("1", layout)) % (1 * layout.dp) == 0


def test_tp_times_pp_must_divide_the_world_and_names_the_overlay_that_set_it(suite_files):
    config = minimal_config()
    config["train_params"]["tensor_parallelism"] = "8"
    config["sweep"]["combinations"][FP8]["pipeline_parallelism"] = "4"
    suite = _suite(suite_files, config)
    problems = dict(layout_problems(suite.config, suite.combos, 2))
    message = problems[f'sweep.combinations["{FP8}"].pipeline_parallelism']
    assert "TP 8 x PP 4 = 32 does not divide the 16 GPUs (2 node(s) x 8)" in message
    assert "run it on 4 node(s)" in message
    assert list(problems) == [f'sweep.combinations["{FP8}"].pipeline_parallelism']  # BF16: TP 8 on 16 is fine


def test_a_default_combo_is_reported_at_its_train_params(suite_files):
    config = minimal_config()
    del config["sweep"]
    config["train_params"].update(micro_batch_size="2", global_batch_size="20", precision="BF16")
    suite = _suite(suite_files, config, minimal_thresholds("default"), name="suite_single.json")
    problems = dict(layout_problems(suite.config, suite.combos, 1))
    assert "GBS 20 is not a multiple of MBS x DP = 2 x 8 = 16" in problems["train_params.global_batch_size"]


def test_check_layout_raises_one_config_error_naming_the_file(suite_files):
    suite = _suite(suite_files)
    with pytest.raises(ConfigError) as info:
        check_layout(suite, 3)
    assert str(suite.config_path) in str(info.value) and len(info.value.problems) == 2


def _cluster(tmp_path, hosts):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": hosts}))
    return str(path)


def test_validate_exits_2_on_a_layout_that_megatron_would_refuse(suite_files, tmp_path):
    config = str(suite_files(name="suite_distributed.json"))
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=config,
                              cluster=_cluster(tmp_path, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]))
    assert info.value.code == 2
    assert f'sweep.combinations["{FP8}"]: GBS 128 is not a multiple' in info.value.message


def test_validate_checks_a_single_config_on_one_node_without_a_cluster(suite_files):
    config = minimal_config()
    config["train_params"]["tensor_parallelism"] = "3"
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=str(suite_files(config)))
    assert info.value.code == 2 and "TP 3 x PP 1 = 3 does not divide the 8 GPUs" in info.value.message


def _deepseek(iterations="20", **top):
    config = minimal_config(**top)
    config["train_params"].update(model_name="deepseek_v2_lite", tokenizer_model="deepseek-ai/DeepSeek-V2-Lite",
                                  training_iterations=iterations)
    config["sweep"]["combinations"][FP8]["training_iterations"] = iterations
    return config


def test_a_distributed_deepseek_megatron_config_is_refused_with_the_reason(suite_files, tmp_path):
    from cvs_tasks.jobs.contracts import contract_problems

    suite = _suite(suite_files, _deepseek())
    problems = dict(contract_problems(suite, distributed=True))
    assert "train_deepseekv2.sh (the deepseek launcher of Megatron-LM images) pins NNODES=1" in \
        problems["train_params.tokenizer_model"]
    assert contract_problems(suite, distributed=False) == []
    with pytest.raises(Exit) as info:  # the same refusal from config.validate, with the cluster or without
        config_tasks.validate(Context(), config=str(suite.config_path),
                              cluster=_cluster(tmp_path, ["10.0.0.1", "10.0.0.2"]))
    assert info.value.code == 2 and "pins NNODES=1" in info.value.message
    with pytest.raises(Exit):
        config_tasks.validate(Context(), config=str(suite.config_path))


def test_deepseek_iterations_past_the_pinned_exit_interval_are_refused_per_combo(suite_files):
    from cvs_tasks.jobs.contracts import contract_problems

    config = _deepseek("60", smoke={"iters": 51})
    suite = _suite(suite_files, config, name="suite_single.json")
    problems = dict(contract_problems(suite, distributed=False))
    assert set(problems) == {f'sweep.combinations["{FP8}"].training_iterations', "train_params.training_iterations",
                             "smoke.iters"}
    assert "passes --exit-interval 50: training stops at step 50" in problems["train_params.training_iterations"]


def test_primus_and_a_users_own_script_are_not_held_to_the_megatron_family_contract(suite_files):
    from cvs_tasks.jobs.contracts import contract_problems

    primus = _deepseek("60")
    primus["container"]["image"] = "rocm/primus:v25.10"
    assert contract_problems(_suite(suite_files, primus), distributed=True) == []
    own = _deepseek("60")
    own["train_params"]["training_script"] = "examples/custom/run.sh"
    assert contract_problems(_suite(suite_files, own), distributed=True) == []
