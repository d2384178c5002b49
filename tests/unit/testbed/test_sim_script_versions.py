"""The llama stand-in comes in two script versions (docs/launch_contracts.md#llama-launcher): the 2026 one reads TE_FP4,
TE_FP8_RECIPE and DATA_CACHE_PATH; the Feb-2025 one (Megatron-LM-v25.3/) reads none of them and
trains MXFP8 as plain FP8, MXFP4 as BF16. The harness's launcher probe tells them apart by the
script's own text."""
from __future__ import annotations

import re
import subprocess

from simrun import WORKSPACE, megatron_cmd, run_sim, sim_env

from cvs_tasks.families import megatron_family
from cvs_tasks.jobs.contracts import parse_scripts, script_probe_command

OLD = ["bash", str(WORKSPACE / "Megatron-LM-v25.3" / "examples" / "llama" / "train_llama3.sh")]


def _arg(run, name):
    match = re.search(rf"^  {name} \.+ (.*)$", run.text, re.M)
    return match.group(1) if match else None


def _run(cmd, **env):
    return run_sim(cmd, sim_env(MBS="1", BS="8", TOTAL_ITERS="1", MODEL_SIZE="8", **env))


def test_the_feb_2025_stand_in_trains_mxfp8_as_plain_fp8_and_mxfp4_as_bf16():
    mxfp8 = dict(TE_FP8="1", TE_FP8_RECIPE="mxfp8", DATA_CACHE_PATH="/shared/cache")
    new, old = _run(megatron_cmd(), **mxfp8), _run(OLD, **mxfp8)
    assert new.code == 0 and old.code == 0, old.text[-2000:]
    assert (_arg(new, "fp8"), _arg(new, "fp8_recipe")) == ("hybrid", "mxfp8")
    assert (_arg(old, "fp8"), _arg(old, "fp8_recipe")) == ("hybrid", "delayed")
    assert _arg(new, "data_cache_path") == "/shared/cache" and _arg(old, "data_cache_path") == "None"
    fp4 = _run(OLD, TE_FP4="1", TE_FP4_RECIPE="mxfp4")
    assert _arg(fp4, "fp8") == "None" and _arg(fp4, "bf16") == "True"


def test_the_probe_reads_which_names_each_stand_in_reads():
    names = megatron_family("meta-llama/Llama-3.1-8B").probed_names()
    assert set(names) == {"TE_FP4", "TE_FP8_RECIPE", "DATA_CACHE_PATH"}
    paths = {str(WORKSPACE / root / "examples" / "llama" / "train_llama3.sh"): names
             for root in ("Megatron-LM", "Megatron-LM-v25.3")}
    out = subprocess.run(["bash", "-c", script_probe_command(paths)], capture_output=True, text=True,
                         timeout=30).stdout
    new, old = (parse_scripts(out)[path] for path in paths)
    assert new.present and new.reads == set(names) and not new.ignores
    assert old.present and not old.reads and old.ignores == set(names)
