"""Hostile configs and threshold files through the real CLI: `config.validate` and `all --dry-run`
refuse each one the same way (exit 2, the file and dotted path named), with no traceback, no
secret on the console, and nothing written: no run folder, no temp folder, no node folder.

Both commands refuse through one loader (`config.load_suite`), which the dry run calls before it
builds anything. So every case goes through `config.validate` and through the loader itself, and
one case per layer of the loader (JSON text, model field, sweep key, threshold file, placeholders,
secrets) also through `all --dry-run`: one CLI process per case instead of two."""

from __future__ import annotations

import pytest

from cvs_tasks.config import ConfigError, load_cluster, load_suite
from tests.hostile.hostile_helpers import KEYS, LOCAL_CLUSTER, assert_refused

INJECTED = "MBS=4,GBS=128,PRECISION=FP8\ntouch pwned #"


def add_key(key: str):
    def edit(cfg):
        cfg["sweep"]["combinations"][key] = {}
        cfg["sweep"]["runs"].append(key)
    return edit


def set_in(path: str, value):
    def edit(cfg):
        *parents, last = path.split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return edit


def threshold_value(value):
    def edit(thr):
        thr[KEYS[0]]["training.throughput_per_gpu"]["value"] = value
    return edit


# (case id, config edit, threshold edit, raw-text edit, words the user must see)
CASES = [
    ("newline-in-sweep-key", add_key(INJECTED), None, None, ["sweep.combinations", "control character"]),
    ("path-in-sweep-key", add_key("MBS=4,GBS=128,PRECISION=../../x"), None, None, ["sweep.combinations", "'..'"]),
    ("unknown-precision", add_key("MBS=2,GBS=16,PRECISION=BF61"), None, None, ["unknown precision 'BF61'"]),
    ("arabic-digit-mbs", add_key("MBS=٤,GBS=16,PRECISION=BF16"), None, None, ["sweep.combinations"]),
    ("superscript-gbs", add_key("MBS=2,GBS=1²,PRECISION=BF16"), None, None, ["sweep.combinations"]),
    ("arabic-digit-tp", set_in("train_params.tensor_parallelism", "٢"), None, None,
     ["train_params.tensor_parallelism", "ASCII digits"]),
    ("model-name-escapes", set_in("train_params.model_name", "../../etc"), None, None,
     ["train_params.model_name", "'..'"]),
    ("tokenizer-is-an-option", set_in("train_params.tokenizer_model", "--help"), None, None,
     ["train_params.tokenizer_model"]),
    ("same-folder-keys", add_key("MBS=2,GBS=16,PRECISION=bf16"), None, None, ["same folder name"]),
    ("image-is-an-option", set_in("container.image", "--privileged"), None, None,
     ["container.image", "'--privileged'"]),
    ("name-is-an-option", set_in("container.name", "-it"), None, None, ["container.name"]),
    ("newline-in-container-name", set_in("container.name", "c1\nrm -rf /"), None, None, ["container.name"]),
    ("secret-env-name", set_in("container.env.MY_API_KEY", "x"), None, None, ["container.env.MY_API_KEY", "secret"]),
    ("rising-max-slope", set_in("loss_curve.max_slope", 0.5), None, None, ["loss_curve.max_slope"]),
    ("negative-target", set_in("convergence.target_value", -1), None, None, ["convergence.target_value"]),
    ("bool-target", set_in("convergence.target_value", True), None, None, ["convergence.target_value"]),
    ("smoke-precision", set_in("smoke.precision", "BF61"), None, None, ["smoke.precision", "unknown precision"]),
    ("nan-threshold", None, threshold_value("nan"), None, ['["training.throughput_per_gpu"].value']),
    ("bool-threshold", None, threshold_value(True), None, ['["training.throughput_per_gpu"].value']),
    ("inf-threshold-string", None, threshold_value("inf"), None, ['["training.throughput_per_gpu"].value']),
    ("NaN-literal", None, None, lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": NaN'),
     ["NaN is not a JSON number"]),
    ("Infinity-literal", None, None, lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": -Infinity'),
     ["-Infinity is not a JSON number"]),
    ("huge-integer", None, None, lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": ' + "9" * 4300),
     ["4300 digits"]),
    ("huge-float", None, None, lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": 1e999'),
     ["out of range"]),
    ("deep-json", None, None,
     lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": ' + "[" * 200_000 + "]" * 200_000),
     ["nested 200001 levels deep"]),
    ("lone-surrogate", None, None, lambda t: t.replace('"model_name": "llama3.1_8B"', '"model_name": "x\\ud800"'),
     ["train_params.model_name", "lone surrogate"]),
    ("placeholder-chain", lambda cfg: cfg["paths"].update(
        {f"p{i}": "{p%d}{p%d}" % (i + 1, i + 1) for i in range(28)} | {"p28": "x" * 64}), None, None,
     ["placeholders expand past 4096 characters"]),
    ("duplicate-key", None, None, lambda t: t.replace('"gpus_per_node": 8', '"gpus_per_node": 8, "gpus_per_node": 4'),
     ["appears twice"]),
]


# One case per layer of the loader, also run as `all --dry-run`.
DRY_RUN_CASES = {"NaN-literal", "image-is-an-option", "newline-in-sweep-key", "nan-threshold", "placeholder-chain",
                 "secret-env-name"}


@pytest.mark.parametrize("case, edit, thresholds, raw, expected", CASES, ids=[c[0] for c in CASES])
def test_validate_and_dry_run_refuse_alike_and_write_nothing(sandbox, case, edit, thresholds, raw, expected):
    config = sandbox.config(edit, thresholds=thresholds, raw=raw)
    checked = sandbox.validate(config)
    assert_refused(checked, *expected)
    with pytest.raises(ConfigError) as loaded:  # the loader both commands call first refuses it itself
        load_suite(config, load_cluster(LOCAL_CLUSTER))
    assert all(words in str(loaded.value) for words in expected), str(loaded.value)
    if case in DRY_RUN_CASES:
        dry = sandbox.dry_run(config)
        assert_refused(dry, *expected)
        assert "touch pwned" not in dry.out  # no node command was printed, let alone one with the payload
    assert sandbox.written() == []


def test_the_dry_run_cases_name_real_cases():
    assert DRY_RUN_CASES <= {c[0] for c in CASES}


def test_a_single_config_on_two_hosts_is_refused_by_validate_as_by_the_run(sandbox, tmp_path):
    cluster = tmp_path / "two.json"
    cluster.write_text('{"username": "u", "priv_key_file": "/nonexistent", "node_dict": ["10.0.0.1", "10.0.0.2"]}')
    config = sandbox.config(name="hostile_single.json")
    for res in (sandbox.validate(config, cluster), sandbox.dry_run(config, cluster)):
        assert_refused(res, "single-node config but the cluster file lists 2 hosts")
    assert sandbox.written() == []


def test_the_untouched_sandbox_config_is_accepted(sandbox):
    """The control case: every refusal above comes from the hostile edit, not from the sandbox."""
    config = sandbox.config()
    assert sandbox.validate(config).code == 0
    dry = sandbox.dry_run(config)
    assert dry.code == 0, dry.text[-3000:]
    assert list(sandbox.tmp.iterdir()) == []  # the dry run's scratch folder is gone
    assert list(sandbox.reports.iterdir()) == []


def test_a_dry_run_whose_stages_would_error_exits_like_the_run(sandbox):
    """No launcher fits this tokenizer: the smoke and training stages cannot be built."""
    config = sandbox.config(lambda cfg: cfg["train_params"].update(tokenizer_model="acme/unknown-model"))
    dry = sandbox.dry_run(config)
    assert "Traceback" not in dry.text
    assert dry.code == 1, dry.text[-3000:]  # the smoke stage FAILs at build time, in a run as in a dry run
    assert "matches no Megatron-LM model family" in dry.text
    assert sandbox.written() == []
