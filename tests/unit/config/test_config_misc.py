"""redact(), config_schema(), dotted paths, placeholder helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import minimal_config

from cvs_tasks.config import ConfigError, config_schema, effective_config, load_suite, redact
from cvs_tasks.config.errors import join_path, loc_to_path
from cvs_tasks.config.placeholders import exempt_checkpoint, local_user, strip_comments, substitute_paths


def test_redact_masks_secrets_but_keeps_paths_and_model_ids():
    data = {"registry": {"username": "u", "password": "p4ss", "password_file": "/run/pw"},
            "env": {"HF_TOKEN": "hf_x", "API_KEY": "k", "NCCL_DEBUG": "INFO"},
            "paths": {"hf_token_file": "/home/u/.hf_token"},
            "train_params": {"tokenizer_model": "meta-llama/Llama-3.1-8B"},
            "notes": ["token hf_abcdefghijklmnopqrstuvwxyz012345 leaked"],
            "empty": {"secret": ""}}
    clean = redact(data)
    assert clean["registry"] == {"username": "u", "password": "***", "password_file": "/run/pw"}
    assert clean["env"] == {"HF_TOKEN": "***", "API_KEY": "***", "NCCL_DEBUG": "INFO"}
    assert clean["paths"]["hf_token_file"] == "/home/u/.hf_token"
    assert clean["train_params"]["tokenizer_model"] == "meta-llama/Llama-3.1-8B"
    assert clean["notes"] == ["token *** leaked"]
    assert clean["empty"] == {"secret": ""}
    assert data["registry"]["password"] == "p4ss"  # the input is untouched


def test_effective_config_is_redacted_json(suite_files):
    config = minimal_config()
    config["train_params"]["wandb_api_key"] = "abc"
    effective = effective_config(load_suite(suite_files(config)))
    assert effective["train_params"]["wandb_api_key"] == "***"
    assert effective["watch"]["poll_interval_s"] == 2.0


def test_schema_describes_every_block_and_allows_comments():
    schema = config_schema()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert set(schema["required"]) == {"gpu_name", "paths", "container", "train_params"}
    for block in ("smoke", "checkpoint", "loss_curve", "convergence", "scaling_baseline", "sweep", "watch", "gpu"):
        assert block in schema["properties"]
    assert schema["additionalProperties"] is False and "^_" in schema["patternProperties"]


@pytest.mark.parametrize("loc, path", [
    (("sweep", "runs", 2), "sweep.runs[2]"),
    (("container", "env", "NCCL_SOCKET_IFNAME"), "container.env.NCCL_SOCKET_IFNAME"),
    (("sweep", "combinations", "MBS=4,GBS=8,PRECISION=FP8", "x"), 'sweep.combinations["MBS=4,GBS=8,PRECISION=FP8"].x'),
    (("MBS=4,GBS=8,PRECISION=FP8", "training.tokens_per_gpu"),
     '["MBS=4,GBS=8,PRECISION=FP8"]["training.tokens_per_gpu"]'),
])
def test_locations_become_dotted_paths(loc, path):
    assert loc_to_path(loc) == path


def test_join_path_prefix():
    assert join_path("a", "b") == "a.b" and join_path("", 0) == "[0]" and join_path("a", "x y") == 'a["x y"]'


def test_config_error_renders_groups_and_exposes_all_problems():
    error = ConfigError(Path("c.json"), [("a.b", "bad")], also=[(Path("t.json"), [("", "unreadable")])])
    assert str(error) == "config error in c.json:\n  a.b: bad\nconfig error in t.json:\n  unreadable"
    assert error.file == Path("c.json") and error.problems == [("a.b", "bad"), ("", "unreadable")]
    only_other = ConfigError(Path("c.json"), [], also=[(Path("t.json"), [("x", "y")])])
    assert only_other.file == Path("t.json")


def test_local_user_order():
    assert local_user({"LOGNAME": "l", "USERNAME": "n"}) == "l"
    assert local_user({"USERNAME": "n"}) == "n"
    assert local_user({}) == "root"


def test_path_substitution_stops_on_cycles_and_leaves_unknown_placeholders():
    config = {"paths": {"a": "{b}", "b": "{a}", "c": "/x/{unknown}"}, "other": "{paths.c}/{user}"}
    out = substitute_paths(config)
    assert out["other"] == "/x/{unknown}/{user}"


def test_strip_comments_is_top_level_only_and_exemption_respects_enforce():
    assert strip_comments({"_a": 1, "b": {"_c": 2}}) == {"b": {"_c": 2}}
    config = {"checkpoint": {"enforce": True, "checkpoint_dir": "<changeme>"}}
    assert exempt_checkpoint(config) == config
