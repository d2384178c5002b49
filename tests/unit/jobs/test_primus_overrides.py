"""Primus overrides reach Megatron typed, under every supported Primus version's own parser and merge.

The parsers are a transcription of behaviour (`primus_parsers.py`) that follows the table in
docs/primus_overrides.md; the harness's exact override list for every template combo goes through
each and must come out as None / False / True / int, never as text Megatron misreads.
"""

from __future__ import annotations

import ast
import json
import shlex
import sys
from pathlib import Path

import pytest
from jobs_factory import make_job
from primus_parsers import SPELLINGS, SUPPORTED, VERSIONS, coerce, doc_table, merge, parse

from cvs_tasks.jobs.primus import train_arguments, typed
from cvs_tasks.jobs.spec import JobSpec

REPO = Path(__file__).resolve().parents[3]
YAML = "examples/megatron/configs/MI300X/llama3.3_70B-BF16-pretrain.yaml"
# What the 70B experiment YAML (over the pre_trainer preset) gives before the overrides are merged.
YAML_70B = {"micro_batch_size": 3, "global_batch_size": 24, "seq_length": 8192, "train_iters": 50,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "use_torch_fsdp2": True,
            "use_distributed_optimizer": False, "recompute_granularity": "full", "recompute_num_layers": 80,
            "save": None, "load": None, "save_interval": 20000}
INTS = ("micro_batch_size", "global_batch_size", "train_iters", "tensor_model_parallel_size",
        "pipeline_model_parallel_size", "seq_length")


def _same(a, b) -> bool:
    """Equal and of the same type (True == 1 in Python, but not to Megatron's argument types)."""
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("version", VERSIONS)
def test_the_transcription_follows_the_doc_table_cell_by_cell(version):
    row = doc_table()[version]
    for spelling in SPELLINGS:
        want = ast.literal_eval(row[spelling])
        assert _same(coerce(version, spelling), want), (version, spelling, row[spelling])
    flag, cell = parse(version, ["--save", "--save_interval", "7"]).get("save"), row["bare `--flag`"]
    assert flag == ("--save_interval" if cell == "eats the next token" else ast.literal_eval(cell))
    assert parse(version, ["train_iters=7"]) == ({"train_iters": 7} if row["key=value"] == "read" else {})


def _template_cells() -> list[tuple[str, dict[str, str], str]]:
    """(template, train_params with the combo's overlay, sweep key) for every combo of every template."""
    cells = []
    for path in sorted([*REPO.glob("configs/*.json"), *REPO.glob("configs/testbed/*.json")]):
        cfg = json.loads(path.read_text())
        for key, overlay in cfg.get("sweep", {}).get("combinations", {}).items():
            cells.append((path.name, {**cfg["train_params"], **(overlay or {})}, key))
    return cells


def _job(params: dict[str, str], key: str, **changes) -> JobSpec:
    mbs, gbs, precision = (part.split("=", 1)[1] for part in key.split(","))
    return make_job(backend="primus", label=key, mbs=mbs, gbs=gbs, precision=precision,
                    train_params={k: str(v) for k, v in params.items()}, **changes)


def _overrides(job: JobSpec) -> list[str]:
    """The tokens primus-cli parses as overrides: everything after `--config <yaml>`."""
    words = shlex.split(train_arguments(job, YAML))
    return words[words.index("--config") + 2:]


def test_the_templates_use_recompute_and_fsdp_combinations_this_file_covers():
    used = {(p.get("recompute", "0"), p.get("fsdp", "0")) for _, p, _ in _template_cells()}
    assert used and used <= {("0", "0"), ("1", "0"), ("0", "1"), ("1", "1")}
    assert ("0", "0") in used and ("1", "0") in used  # recompute off and on, FSDP off: what ships


@pytest.mark.parametrize("version", SUPPORTED)
@pytest.mark.parametrize("recompute, fsdp", [("0", "0"), ("1", "0"), ("0", "1"), ("1", "1")])
def test_every_template_combo_reaches_megatron_typed(version, recompute, fsdp):
    for template, params, key in _template_cells():
        job = _job({**params, "recompute": recompute, "fsdp": fsdp}, key)
        values = merge(version, YAML_70B, _overrides(job))
        where = (version, template, key)
        if recompute == "1":
            assert _same(values["recompute_granularity"], "full"), where
            assert _same(values["recompute_num_layers"], 1), where
        else:
            assert values["recompute_granularity"] is None, where
        assert _same(values["use_torch_fsdp2"], fsdp == "1"), where
        for name in INTS:
            assert type(values[name]) is int, (where, name, values[name])
        assert values["micro_batch_size"] == int(job.mbs) and values["global_batch_size"] == int(job.gbs)
        assert values["seq_length"] == int(params["sequence_length"])


@pytest.mark.parametrize("version", SUPPORTED)
def test_smoke_and_both_checkpoint_phases_reach_megatron_typed(version):
    base = _job(dict(make_job().train_params), "MBS=1,GBS=08,PRECISION=BF16", iterations=10)
    save = _job(dict(make_job().train_params), "MBS=4,GBS=128,PRECISION=BF16", save_dir="/ckpt", save_interval=10)
    load = _job(dict(make_job().train_params), "MBS=4,GBS=128,PRECISION=BF16", load_dir="/ckpt/checkpoints",
                distributed=True, nnodes=2)
    smoke = merge(version, YAML_70B, _overrides(base))
    assert _same(smoke["global_batch_size"], 8) and smoke["recompute_granularity"] is None
    saved = merge(version, YAML_70B, _overrides(save))
    assert saved["save"] is True and _same(saved["save_interval"], 10) and saved["use_torch_fsdp2"] is False
    loaded = merge(version, YAML_70B, _overrides(load))
    assert _same(loaded["load"], "/ckpt/checkpoints") and loaded["auto_detect_ckpt_format"] is True
    assert loaded["recompute_granularity"] is None and loaded["use_torch_fsdp2"] is False


def test_the_old_spellings_are_what_broke_and_typed_is_what_every_version_reads():
    for version in SUPPORTED:
        assert coerce(version, "null") == "null"  # recompute_granularity='null': TransformerConfig raises
        assert coerce(version, typed(None)) is None
        assert coerce(version, typed(False)) is False and coerce(version, typed(True)) is True
        assert _same(coerce(version, typed(int("0008"))), 8)
    assert [v for v in SUPPORTED if coerce(v, "false") == "false"] == ["v0.4.0", "v0.5.0"]  # truthy 'false'
    assert coerce("v0.6.0 core", typed(None)) == "None"  # the opt-in core runtime of v0.6.0: documented


def test_the_testbed_stand_in_parses_as_this_transcription_for_every_version():
    sys.path.insert(0, str(REPO / "testbed" / "trainer" / "workspace"))
    from simtrainer import primus_overrides as stand_in

    assert set(stand_in.VERSIONS) == set(SUPPORTED)
    tokens = ["--micro_batch_size", "4", "--use_torch_fsdp2", "false", "--save", "--save_interval", "08",
              "--load=/x", "train_iters=9", "--recompute_granularity", "None", "--x", "TRUE", "--y", "none"]
    for version in SUPPORTED:
        for spelling in SPELLINGS:
            assert _same(stand_in.coerce(version, spelling), coerce(version, spelling)), (version, spelling)
        got, want = stand_in.parse(version, tokens), parse(version, tokens)
        assert got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want), version
