"""Packaged templates: the inventory of docs/product.md#template-inventory, placeholders shipped, loading once
filled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from config_helpers import CHANGEME, fill_template, write_json

from cvs_tasks.config import ConfigError, copy_template, find_changeme, list_templates, load_suite
from cvs_tasks.errors import BadInput

REPO = Path(__file__).resolve().parents[3]
MODES = {
    "mi3xx": ["deepseek-v2-lite_single", "deepseek-v2-lite_distributed", "llama-3.1-8b_single",
              "llama-3.1-8b_distributed", "llama-3.1-405b_distributed", "llama-3.3-70b_single",
              "llama-3.3-70b_distributed"],
    "mi355x": ["llama-3.1-8b_single", "llama-3.3-70b_single"],
}
CONFIGS = [f"{family}_megatron_{rest}.json" for family, rests in MODES.items() for rest in rests]
SKUS = {"mi3xx": ["MI300X", "MI325X"], "mi355x": ["MI355X"]}
CASES = [(name, gpu) for name in CONFIGS for gpu in SKUS[name.split("_")[0]]]


def test_inventory_matches_the_product_document():
    configs = {t.name for t in list_templates() if t.kind == "config"}
    thresholds = {t.name for t in list_templates() if t.kind == "threshold"}
    assert configs == set(CONFIGS)
    expected = {f"{gpu.lower()}_{name.split('_', 1)[1].removesuffix('.json')}_threshold.json" for name, gpu in CASES}
    assert thresholds == expected
    assert {t.name for t in list_templates() if t.kind == "cluster"} == {"cluster.json", "localhost.json"}


@pytest.mark.parametrize("name", CONFIGS)
def test_each_config_ships_with_its_site_placeholders(name):
    data = json.loads((REPO / "configs" / name).read_text())
    paths = {path for path, _ in find_changeme(data) if not path.startswith("_")}
    expected = {"container.image", "train_params.training_iterations", "container.env.NCCL_SOCKET_IFNAME",
                "container.env.GLOO_SOCKET_IFNAME", "container.env.NCCL_IB_GID_INDEX", "container.env.NCCL_DEBUG"}
    if name.startswith("mi3xx"):
        expected |= {"gpu_name", "threshold_json"}
    if "_distributed" in name:
        expected |= {"container.env.MASTER_ADDR", "container.env.NCCL_IB_HCA", "checkpoint.checkpoint_dir",
                     "paths.data_cache_dir", "container.runtime.args.volumes[4]"}
    assert paths == expected


@pytest.mark.parametrize("name", CONFIGS)
def test_each_config_as_shipped_fails_listing_every_placeholder(name, tmp_path):
    path = write_json(tmp_path / name, json.loads((REPO / "configs" / name).read_text()))
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert info.value.problems and all("<changeme>" in message for _, message in info.value.problems)


@pytest.mark.parametrize("name, gpu", CASES)
def test_each_config_loads_once_filled(name, gpu, tmp_path):
    filled = fill_template(json.loads((REPO / "configs" / name).read_text()), gpu=gpu, config_name=name)
    assert find_changeme(filled) == []
    suite = load_suite(write_json(tmp_path / name, filled))
    assert suite.config.gpu_name == gpu
    assert suite.threshold_path.parent == (REPO / "thresholds").resolve()
    assert [c.id for c in suite.combos] == list(suite.thresholds)
    assert all(c.train_params["training_iterations"] == "20" for c in suite.combos)
    assert suite.backend == ("primus" if "405b" in name else "megatron")
    assert not any("threshold" in w for w in suite.warnings)


@pytest.mark.parametrize("name, gpu", CASES)
def test_threshold_files_gate_throughput_tokens_and_step_time(name, gpu):
    rest = name.split("_", 1)[1].removesuffix(".json")
    cells = json.loads((REPO / "thresholds" / f"{gpu.lower()}_{rest}_threshold.json").read_text())
    for key, cell in cells.items():
        if key.startswith("_"):
            continue
        assert cell["training.throughput_per_gpu"]["kind"] == "min"
        assert cell["training.tokens_per_gpu"]["kind"] == "min_tok_s"
        assert cell["training.elapsed_time_per_iteration"]["kind"] == "max_ms"
        assert cell["training.mem_usage"]["optional"] is True
        scaling = cell.get("training.scaling_efficiency_pct")
        if "_distributed" in name:
            assert scaling == {"kind": "info", "value": 85.0, "optional": True}
        else:
            assert scaling is None


def test_8b_throughput_minimums_are_hundreds_of_tflops():
    cells = json.loads((REPO / "thresholds" / "mi300x_megatron_llama-3.1-8b_single_threshold.json").read_text())
    assert 200 <= cells["MBS=4,GBS=128,PRECISION=FP8"]["training.throughput_per_gpu"]["value"] < 1000


def test_405b_is_primus_only_even_once_filled(tmp_path):
    name = "mi3xx_megatron_llama-3.1-405b_distributed.json"
    filled = fill_template(json.loads((REPO / "configs" / name).read_text()), gpu="MI300X", config_name=name)
    filled["container"]["image"] = "rocm/megatron-lm:v25.9"
    with pytest.raises(ConfigError, match="runs only on Primus"):
        load_suite(write_json(tmp_path / name, filled))


def test_list_filters_by_substring_case_insensitively():
    names = [t.name for t in list_templates("MI355X")]
    assert names and all("mi355x" in n for n in names)
    mi3xx = next(t for t in list_templates("mi3xx_megatron_llama-3.1-8b_single"))
    assert mi3xx.thresholds == ("mi300x_megatron_llama-3.1-8b_single_threshold.json",
                                "mi325x_megatron_llama-3.1-8b_single_threshold.json")
    assert list_templates("no-such-thing") == []


def test_copy_with_thresholds_then_refuses_to_overwrite(tmp_path):
    written = copy_template("training/megatron/mi355x_megatron_llama-3.1-8b_single.json", f"{tmp_path}/site/",
                            with_thresholds=True)
    assert [p.name for p in written] == ["mi355x_megatron_llama-3.1-8b_single.json",
                                         "mi355x_megatron_llama-3.1-8b_single_threshold.json"]
    assert all(p.parent == tmp_path / "site" for p in written)
    with pytest.raises(BadInput, match="not overwriting"):
        copy_template("mi355x_megatron_llama-3.1-8b_single.json", tmp_path / "site")
    again = copy_template("mi355x_megatron_llama-3.1-8b_single.json", tmp_path / "site", overwrite=True)
    assert again == written[:1]


def test_copy_to_a_file_name_and_unknown_names(tmp_path):
    (out,) = copy_template("localhost.json", tmp_path / "my_cluster.json")
    assert out == tmp_path / "my_cluster.json" and CHANGEME not in out.read_text()
    with pytest.raises(BadInput, match="did you mean 'localhost.json'"):
        copy_template("localhst.json", tmp_path / "x.json")
