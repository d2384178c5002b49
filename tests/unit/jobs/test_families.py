"""The model family table: every template's model is a row, and a family added as one row flows
through config validation, the launch, the mismatch causes, the FLOPs, judging and the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jobs_factory import make_job

from cvs_tasks import families
from cvs_tasks.config import ConfigError, list_templates, load_suite
from cvs_tasks.config.readiness import check_ready, is_gated
from cvs_tasks.config.sweep import KNOWN_PRECISIONS
from cvs_tasks.families import FAMILIES, Family, ModelSize, megatron_family, model_size_of
from cvs_tasks.jobs import build_launch, local_tokenizer_path, needs_local_tokenizer, tokenizer_download_command
from cvs_tasks.judge.kinds import evaluate
from cvs_tasks.lifecycle.gate_stages import actual_metrics
from cvs_tasks.metrics import LogParser, flops
from cvs_tasks.report.render import render_all
from cvs_tasks.run import StageRecord
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.verify.compare import VARIABLE, asked_from_job, check_effective
from cvs_tasks.verify.effective import EffectiveConfig
from tests.filled_templates import filled

REPO = Path(__file__).resolve().parents[3]
TEMPLATES = sorted(t.name for t in list_templates() if t.kind == "config")
TESTBED_CONFIGS = sorted((REPO / "configs" / "testbed").glob("*.json"))


def assert_model_is_a_row(suite) -> None:
    """The model name means one size of one row, with FLOPs dims; every combo's tokenizer picks that row."""
    named = model_size_of(suite.config.train_params["model_name"])
    assert named is not None, f"{suite.config.train_params['model_name']} is no size of any family row"
    family, size = named
    assert size.dims in flops.MODELS
    for combo in suite.combos:
        assert megatron_family(combo.train_params["tokenizer_model"]) is family
        assert family.size(combo.train_params["model_size"]) is size


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_packaged_template_model_resolves_to_a_family_row(name, tmp_path):
    image = "rocm/primus:v25.9" if "405b" in name else "rocm/megatron-lm:v25.9"
    assert_model_is_a_row(load_suite(filled(tmp_path, name, image=image)))


@pytest.mark.parametrize("path", TESTBED_CONFIGS, ids=lambda path: path.name)
def test_every_testbed_config_model_resolves_to_a_family_row(path):
    assert_model_is_a_row(load_suite(path))


def test_every_row_is_consistent():
    names = [size_name for family in FAMILIES for size in family.sizes for size_name in size.names]
    assert len(names) == len(set(names)), "a model name means one size of one family"
    assert len({family.name for family in FAMILIES}) == len(FAMILIES)
    for family in FAMILIES:
        re.compile(family.pattern)
        assert set(family.precision_env) <= set(KNOWN_PRECISIONS), family.name
        assert set(family.causes) <= set(VARIABLE), family.name  # only parameters the read-back compares
        assert all(prefix == prefix.lower() for prefix in family.gated), family.name
        assert all(size.dims is None or size.dims in flops.MODELS for size in family.sizes), family.name
        assert all(name == name.lower() for size in family.sizes for name in size.names), family.name


def test_the_shipped_rows_answer_what_the_modules_used_to_know_themselves():
    assert [f.name for f in FAMILIES if f.tokenizer_file] == ["mixtral"]
    assert [is_gated(repo) for repo in ("meta-llama/Llama-3.1-8B", "google/gemma-2b", "mistralai/Mistral-7B",
                                        "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-8B")] == [True] * 3 + [False] * 2
    assert megatron_family("google/gemma-2b") is None  # known for its gated tokenizer only: no launcher
    assert flops.model_dims("Llama-3.3-70B") is flops.MODELS["llama3.1_70b"]
    assert flops.model_dims("llama3.1_405B-pretrain") is flops.MODELS["llama3.1_405b"]


# The throw-away family: one row (and the shape of its one size in the FLOPs dims table).
FALCON = Family(
    "falcon", r"falcon", "examples/falcon/train_falcon.sh",
    {"FP8": (("FALCON_PRECISION", "fp8"),), "BF16": (("FALCON_PRECISION", "bf16"),)},
    mbs_var="FALCON_MBS", gbs_var="FALCON_GBS", seq_var="FALCON_SEQ", iters_var="FALCON_ITERS",
    causes={"seq_length": "{script} reads FALCON_SEQ only from its own defaults file"},
    tokenizer_file="tokenizer.model", gated=("tiiuae/",),
    sizes=(ModelSize("7", "falcon_7b", ("falcon_7b", "falcon-7b")),),
)
FALCON_DIMS = flops.ModelDims(32, 4544, 18176, 71, 1, vocab=65024, head_dim=64, gated_mlp=False)
FP8 = "MBS=4,GBS=128,PRECISION=FP8"
BF16 = "MBS=4,GBS=128,PRECISION=BF16"


@pytest.fixture
def falcon(monkeypatch) -> Family:
    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, FALCON))
    monkeypatch.setitem(flops.MODELS, "falcon_7b", FALCON_DIMS)
    return FALCON


def falcon_suite(folder: Path, model_size: str = "7", image: str = "rocm/megatron-lm:test",
                 overlay: dict | None = None, **params: str) -> Path:
    """A single-node Falcon suite config (and its threshold file) in ``folder``; ``params`` change its
    train_params, ``overlay`` the FP8 combo's."""
    config = {
        "gpu_name": "MI300X",
        "threshold_json": "thr.json",
        "paths": {"hf_token_file": str(folder / "no_token_here"), "log_dir": "/home/{user-id}/LOGS",
                  "scripts_dir": "{log_dir}/scripts", "data_cache_dir": "/data/cache"},
        "container": {"name": "cvs_test", "image": image, "runtime": {"name": "docker"},
                      "env": {"NCCL_DEBUG": "ERROR"}},
        "train_params": {"model_name": "falcon_7b", "tokenizer_model": "tiiuae/falcon-7b", "model_size": model_size,
                         "training_iterations": "20", **params},
        "sweep": {"combinations": {FP8: overlay or {}, BF16: {}}, "runs": [FP8, BF16]},
    }
    cell = {"training.tokens_per_gpu": {"kind": "min_tok_s", "value": 1000}}
    (folder / "thr.json").write_text(json.dumps({FP8: cell, BF16: cell}))
    path = folder / "falcon_single.json"
    path.write_text(json.dumps(config))
    return path


def test_config_validation_takes_the_sizes_and_the_gated_organisation_from_the_row(falcon, tmp_path):
    suite = load_suite(falcon_suite(tmp_path))
    assert_model_is_a_row(suite)
    with pytest.raises(ConfigError) as refused:
        load_suite(falcon_suite(tmp_path, model_size="40"))
    assert dict(refused.value.problems)["train_params.model_size"] == (
        "'40' is not a size of the falcon family (the family of tiiuae/falcon-7b): use one of 7")
    with pytest.raises(ConfigError) as no_token:
        check_ready(suite, hosts=None, distributed=False)
    assert "tiiuae/falcon-7b (train_params.tokenizer_model) is a gated Hugging Face repo" in dict(
        no_token.value.problems)["paths.hf_token_file"]


def test_without_its_row_nothing_knows_the_family(tmp_path):
    suite = load_suite(falcon_suite(tmp_path, model_size="40"))  # no row: any size, no gate, no dims
    assert megatron_family("tiiuae/falcon-7b") is None and not is_gated("tiiuae/falcon-7b")
    assert flops.model_dims("falcon_7b") is None and suite.combo_ids == [FP8, BF16]


def refused(path: Path) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    return dict(info.value.problems)


LLAMA_8B = {"model_name": "llama3.1_8B", "tokenizer_model": "meta-llama/Llama-3.1-8B"}


def test_the_shipped_rows_hold_model_size_to_the_family(tmp_path):
    assert refused(falcon_suite(tmp_path, "13", **LLAMA_8B)) == {"train_params.model_size": (
        "'13' is not a size of the llama-3 family (the family of meta-llama/Llama-3.1-8B): use one of 8, 70, 405")}
    where = f'sweep.combinations["{FP8}"].model_size'
    assert list(refused(falcon_suite(tmp_path, "8", overlay={"model_size": "9"}, **LLAMA_8B))) == [where]
    assert load_suite(falcon_suite(tmp_path, "70B", **LLAMA_8B)).combos[0].train_params["model_size"] == "70B"
    deepseek = {"model_name": "deepseek_v2_lite", "tokenizer_model": "deepseek-ai/DeepSeek-V2-Lite"}
    load_suite(falcon_suite(tmp_path, "8", **deepseek))  # its script pins MODEL_SIZE=16B: the value is ignored
    load_suite(falcon_suite(tmp_path, "13", training_script="/opt/mine/train.sh", **LLAMA_8B))  # the user's own
    assert refused(falcon_suite(tmp_path, "405", **LLAMA_8B)) == {"container.image": (
        "model_size 405 of the llama-3 family runs only on Primus; use a Primus image (its name contains "
        "'primus'), got 'rocm/megatron-lm:test'")}
    load_suite(falcon_suite(tmp_path, "405", image="rocm/primus:v25.9", **LLAMA_8B))


def falcon_job(suite):
    combo = suite.combos[0]
    return make_job(label=combo.id, mbs=combo.mbs, gbs=combo.gbs, precision=combo.precision,
                    train_params=combo.train_params)


def test_the_launch_uses_the_rows_script_env_names_and_tokenizer_file(falcon, tmp_path):
    job = falcon_job(load_suite(falcon_suite(tmp_path)))
    launch = build_launch(job)
    assert launch.nodes[0].script_text.splitlines()[-2] == (
        "RECOMPUTE=0 FALCON_SEQ=8192 FALCON_MBS=4 FALCON_GBS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=7 FALCON_ITERS=20 "
        "FALCON_PRECISION=fp8 NODE_RANK=0 bash /workspace/Megatron-LM/examples/falcon/train_falcon.sh")
    assert needs_local_tokenizer(job)
    assert local_tokenizer_path(job) == "/home/alice/cache/falcon_7b/tokenizer.model"
    assert "--include tokenizer.model" in tokenizer_download_command(job)
    assert launch.warnings == ["tiiuae/falcon-7b needs a local tokenizer.model but none was downloaded; passing "
                               "the repo id (run the tokenizer stage first)"]


def test_a_mismatch_names_the_rows_cause(falcon, tmp_path):
    job = falcon_job(load_suite(falcon_suite(tmp_path)))
    asked = asked_from_job(job, gpus_per_node=8)
    assert (asked.launcher, asked.script) == ("falcon", "train_falcon.sh")
    check = check_effective(asked, EffectiveConfig(seq_length=2048))
    assert check.reason == ("the trainer does not run what was asked: seq_length 2048 != 8192 (asked): "
                            "train_falcon.sh reads FALCON_SEQ only from its own defaults file")


def falcon_log(steps: int = 20) -> str:
    """Megatron-LM iteration lines without an arguments dump: the model's shape comes from the table."""
    line = (" [2026-01-01 00:00:{s:02d}] iteration {s:8d}/{t:8d} | consumed samples: 1 | elapsed time per "
            "iteration (ms): {ms:.1f} | learning rate: 1.0E-05 | global batch size:    32 | lm loss: "
            "1.0E+01 | loss scale: 1.0 | grad norm: 1.0 | number of skipped iterations:   0 | number of "
            "nan iterations:   0 |\n")
    return "".join(line.format(s=s, t=steps, ms=1000.0 + s) for s in range(1, steps + 1))


def test_its_flops_are_judged_and_reported_under_its_name(falcon, tmp_path):
    suite = load_suite(falcon_suite(tmp_path))
    combo = suite.combos[0]
    model = suite.config.train_params["model_name"]
    parser = LogParser(seq_length=2048, world_size=8, global_batch_size=32, model=model)
    parser.feed(falcon_log())
    parser.finish()
    metrics = parser.metrics()
    expected = metrics["training.tokens_per_gpu"] * flops.flops_per_token(FALCON_DIMS, 2048) / 1e12
    assert parser.tflops_recomputed() == pytest.approx(expected)

    data = {"metrics": metrics, "last_step": parser.last_step, "planned": parser.planned, "completed": True,
            "tflops_recomputed": parser.tflops_recomputed()}
    rows = evaluate(actual_metrics(data), suite.thresholds[combo.cell], enforce=True)
    assert [(r.name, r.status) for r in rows if r.status != "RECORD"] == [("training.tokens_per_gpu", "PASS")]

    run = RunDir.create(tmp_path / "reports")
    run.write_manifest({"run_id": run.run_id, "model_name": "falcon_7b", "backend": "Megatron-LM",
                        "suite": "single", "hosts": ["localhost"], "combos": [combo.id]})
    run.write_record(StageRecord(stage="training", combo=combo.id, status="PASS", data=data))
    run.write_record(StageRecord(stage="metric", combo=combo.id, status="PASS", metrics=rows))
    paths = render_all(run)
    results = json.loads(paths["results"].read_text())
    assert results["model_name"] == "falcon_7b"
    tests = {t["name"]: t for t in results["tests"]}
    training = next(t for t in tests.values() if t["stage"] == "training")
    assert training["details"]["tflops_recomputed"] == pytest.approx(expected)
    metric = next(t for t in tests.values() if t["stage"] == "metric")
    assert {m["name"]: m["status"] for m in metric["metrics"]}["training.tokens_per_gpu"] == "PASS"
    html = paths["report"].read_text()
    assert "falcon_7b" in html and "TFLOP/s/GPU (recomputed)" in html


@pytest.mark.parametrize("name, expected", [
    ("Llama-3.1-405B-Instruct", ("llama-3", "405")),  # a listed name inside a longer one
    ("my-405b", ("llama-3", "405")),  # the bare size, standing as its own word
    ("Llama-3.3-70B-Instruct", ("llama-3", "70")),
    ("qwen3-8b", None),  # names another family: no Llama size by its "8b"
    ("llama2-70b", None),
    ("model-1405b", None),  # not a word of its own
])
def test_a_model_name_holding_a_listed_name_resolves_to_its_row(name, expected):
    found = families.model_size_of(name)
    assert ((found[0].name, found[1].size) if found else None) == expected
