"""The class of "the image's launcher predates the setting", on the testbed: the Feb-2025
train_llama3.sh stand-in (/workspace/Megatron-LM-v25.3) reads no TE_FP8_RECIPE. Run unchecked, as the
user's own launcher, its MXFP8 trains plain FP8 and only the read-back catches it after launch; as the
family script, `config.validate --cluster` and the run refuse it before anything starts, because the
probe reads the script in the image."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import REPO, edited_config, run_invoke
from tests.e2e.test_lifecycle_testbed import containers_on

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

SINGLE = REPO / "configs" / "testbed" / "sim_megatron_single.json"
MXFP8 = "MBS=2,GBS=16,PRECISION=MXFP8"
OLD_ROOT = "/workspace/Megatron-LM-v25.3"


def _mxfp8(**params):
    def edit(cfg):
        cfg["train_params"].update(params)
        cfg["sweep"]["combinations"][MXFP8] = {"training_iterations": "20"}
        cfg["sweep"]["runs"] = [MXFP8]
        cfg["smoke"]["enabled"] = False
        cfg["enforce_thresholds"] = False  # record-only: no threshold cell for MXFP8
    return edit


def test_mxfp8_on_the_feb_2025_script_is_refused_by_validate_and_by_the_run(testbed_cluster, reports, tmp_path):
    cluster = str(testbed_cluster.single_cluster_file)
    old = edited_config(SINGLE, tmp_path, _mxfp8(megatron_root=OLD_ROOT))
    checked = run_invoke("config.validate", "--config", str(old), "--cluster", cluster, reports=reports)
    assert checked.code == 2, checked.out + checked.err
    why = (f'sweep.combinations["{MXFP8}"]: {OLD_ROOT}/examples/llama/train_llama3.sh in this image does not read '
           "TE_FP8_RECIPE")
    assert why in checked.err and "would train plain (delayed-scaling) FP8" in checked.err
    before = [containers_on(node) for node in testbed_cluster.nodes]
    run = run_invoke("all", "--config", str(old), "--cluster", cluster, reports=reports)
    assert run.code == 2 and why in run.out + run.err
    assert [containers_on(node) for node in testbed_cluster.nodes] == before  # refused before any launch
    assert not (reports / "latest").exists()
    (tmp_path / "new").mkdir()
    new = edited_config(SINGLE, tmp_path / "new", _mxfp8())
    accepted = run_invoke("config.validate", "--config", str(new), "--cluster", cluster, reports=reports)
    assert accepted.code == 0 and "OK: the config is valid" in accepted.out, accepted.out + accepted.err


def test_unchecked_the_feb_2025_script_trains_mxfp8_as_fp8_and_the_read_back_names_it(testbed_cluster, reports,
                                                                                     tmp_path):
    cfg = edited_config(SINGLE, tmp_path, _mxfp8(training_script=f"{OLD_ROOT}/examples/llama/train_llama3.sh"))
    assert json.loads(cfg.read_text())["sweep"]["runs"] == [MXFP8]
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    assert res.code == 1, res.out + res.err
    training = res.record("training", MXFP8)
    assert training["status"] == "FAIL" and "precision FP8 (delayed recipe) != MXFP8" in training["reason"]
    assert training["data"]["effective_config"]["precision"] == "FP8"


def test_a_multi_node_run_on_the_feb_2025_script_is_warned_that_data_cache_path_is_ignored(testbed_cluster, reports,
                                                                                          tmp_path):
    def edit(cfg):
        cfg["train_params"]["megatron_root"] = OLD_ROOT

    cfg = edited_config(REPO / "configs" / "testbed" / "sim_megatron_distributed.json", tmp_path, edit)
    res = run_invoke("config.validate", "--config", str(cfg), "--cluster", str(testbed_cluster.cluster_file),
                     reports=reports)
    assert res.code == 0, res.out + res.err
    assert (f"warning: paths.data_cache_dir: {OLD_ROOT}/examples/llama/train_llama3.sh in this image does not read "
            "DATA_CACHE_PATH: paths.data_cache_dir is not used") in res.out
