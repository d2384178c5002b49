"""The launcher probe through the real CLI on this machine (host runtime, localhost: no SSH, no
Docker): `config.validate --cluster` asks the family script in megatron_root what it reads.

MXFP8 on the Feb-2025 train_llama3.sh stand-in is refused (exit 2, the combo and the cause named,
nothing written); a probe answer that tells nothing (a device instead of a script, a binary file, a
path built to break the quoting, no ibv_devinfo) never crashes the load and never refuses."""

from __future__ import annotations

import os

from tests.hostile.hostile_helpers import KEYS, REPO, assert_refused

MXFP8 = "MBS=2,GBS=16,PRECISION=MXFP8"
WORKSPACE = REPO / "testbed" / "trainer" / "workspace"
LLAMA = "examples/llama/train_llama3.sh"


def mxfp8_on(root: str):
    def edit(cfg):
        cfg["train_params"]["megatron_root"] = root
        cfg["sweep"] = {"combinations": {MXFP8: {"training_iterations": "20"}}, "runs": [MXFP8]}
    return edit


def mxfp8_cell(thr):
    thr[MXFP8] = thr.pop(KEYS[0])
    thr.pop(KEYS[1], None)


def _accepted(res, *warned: str) -> None:
    assert res.code == 0, res.text[-3000:]
    assert "Traceback" not in res.text and "OK: the config is valid" in res.out
    for words in warned:
        assert words in res.out, (words, res.out[-3000:])


def test_mxfp8_on_the_feb_2025_script_is_refused_naming_the_cause_and_writes_nothing(sandbox):
    res = sandbox.validate(sandbox.config(mxfp8_on(str(WORKSPACE / "Megatron-LM-v25.3")), thresholds=mxfp8_cell))
    assert_refused(res, f'sweep.combinations["{MXFP8}"]', f"{LLAMA} in this image does not read TE_FP8_RECIPE",
                   "would train plain (delayed-scaling) FP8", "drop MXFP8 from the sweep")
    assert sandbox.written() == []


def test_mxfp8_on_the_2026_script_is_accepted(sandbox):
    _accepted(sandbox.validate(sandbox.config(mxfp8_on(str(WORKSPACE / "Megatron-LM")), thresholds=mxfp8_cell)))


def test_a_device_or_a_binary_in_place_of_the_script_never_hangs_or_crashes_the_load(sandbox, tmp_path):
    device, binary = tmp_path / "device", tmp_path / "binary"
    for root, target in ((device, None), (binary, b"\x00\xff\xfe" * 500_000 + b"\nTE_FP8_RECIPE=1\n")):
        script = root / LLAMA
        script.parent.mkdir(parents=True)
        if target is None:
            script.symlink_to("/dev/zero")
        else:
            script.write_bytes(target)
    _accepted(sandbox.validate(sandbox.config(mxfp8_on(str(device)), thresholds=mxfp8_cell)),
              "is not in the image (train_params.megatron_root?)")
    # past the bytes a script is read for: the name is not found there, so the probe says "ignores"
    assert_refused(sandbox.validate(sandbox.config(mxfp8_on(str(binary)), thresholds=mxfp8_cell)),
                   "does not read TE_FP8_RECIPE")


def test_a_megatron_root_built_to_break_the_quoting_runs_nothing(sandbox, tmp_path):
    canary = tmp_path / "pwned"
    root = f"/nonexistent'; touch {canary}; echo '$(touch {canary})"
    res = sandbox.validate(sandbox.config(mxfp8_on(root), thresholds=mxfp8_cell))
    _accepted(res, "train_llama3.sh is not in the image (train_params.megatron_root?)")
    assert not canary.exists()


def test_deepseek_where_the_links_cannot_be_counted_is_a_warning_not_a_refusal(sandbox, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ibv_devinfo"  # prints garbage: the count is unknown
    fake.write_text("#!/bin/sh\nprintf '\\377\\376 not a device list\\n'\n")
    fake.chmod(0o755)

    def deepseek(cfg):
        cfg["train_params"].update(model_name="deepseek_v2_lite", tokenizer_model="deepseek-ai/DeepSeek-V2-Lite",
                                   megatron_root=str(WORKSPACE / "Megatron-LM"))

    config = sandbox.config(deepseek)
    res = sandbox.cli("config.validate", "--config", str(config), "--cluster", str(REPO / "cluster" / "localhost.json"),
                      env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    _accepted(res, "cannot count the active RDMA links on node localhost")


def test_a_node_that_does_not_answer_the_probe_is_a_warning_not_a_crash(sandbox, tmp_path):
    cluster = tmp_path / "unreachable.json"  # nothing listens on 127.0.0.254:22
    cluster.write_text('{"username": "ops", "priv_key_file": "%s", "node_dict": {"127.0.0.254": {}}}'
                       % (tmp_path / "no-key"))
    res = sandbox.validate(sandbox.config(mxfp8_on(str(WORKSPACE / "Megatron-LM-v25.3")), thresholds=mxfp8_cell),
                           cluster)
    _accepted(res, f'warning: sweep.combinations["{MXFP8}"]: not checked whether', "(node 127.0.0.254: ")
    assert "node 127.0.0.254: node 127.0.0.254" not in res.out
    assert sandbox.written() == []
