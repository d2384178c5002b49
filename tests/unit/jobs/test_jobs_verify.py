"""Effective-config read-back: a dump becomes an EffectiveConfig; differences from the job are named with a cause."""

from __future__ import annotations

import dataclasses

from jobs_factory import make_job, with_params

from cvs_tasks.verify import EffectiveConfig, asked_from_job, check_effective, effective_from_arguments
from cvs_tasks.verify.compare import effective_of, effective_record, mismatches_of

DUMP = {
    "world_size": "16", "micro_batch_size": "4", "global_batch_size": "128", "seq_length": "8192",
    "train_iters": "20", "tensor_model_parallel_size": "1", "pipeline_model_parallel_size": "1",
    "expert_model_parallel_size": "1", "bf16": "True", "fp8": "hybrid", "fp8_recipe": "delayed",
    "fp4": "None", "recompute_granularity": "None", "use_torch_fsdp2": "False", "mock_data": "True",
    "tokenizer_model": "meta-llama/Llama-3.1-8B", "exit_interval": "None",
}
DEEPSEEK = {"model_name": "deepseek_v2_lite", "tokenizer_model": "deepseek-ai/DeepSeek-V2-Lite", "model_size": "16",
            "sequence_length": "4096"}


def _job(**changes):
    return make_job(**{"nnodes": 2, "distributed": True, **changes})


def test_a_megatron_dump_reads_as_typed_values():
    effective = effective_from_arguments(DUMP, gpus_per_node=8)
    assert effective == EffectiveConfig(
        world_size=16, nnodes=2, micro_batch_size=4, global_batch_size=128, seq_length=8192, train_iters=20,
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1, expert_model_parallel_size=1,
        precision="FP8", fp8_recipe="delayed", recompute="none", fsdp=False, mock_data=True,
        tokenizer="meta-llama/Llama-3.1-8B")
    assert effective_from_arguments({}) is None


def test_precision_and_recompute_follow_megatrons_flags():
    def read(**args):
        return effective_from_arguments({**DUMP, **args})
    assert read(fp8="None").precision == "BF16"
    assert read(fp8_recipe="mxfp8").precision == "MXFP8"
    assert read(fp4="e2m1").precision == "MXFP4"
    assert read(fp8="None", bf16="False", fp16="True").precision == "FP16"
    assert read(recompute_granularity="selective").recompute == "selective"
    old = {k: v for k, v in DUMP.items() if k != "recompute_granularity"}
    assert effective_from_arguments({**old, "recompute_activations": "True"}).recompute == "selective"
    assert effective_from_arguments({"world_size": "8"}).precision is None  # unstated: not compared


def test_the_asked_run_matches_its_own_dump():
    check = check_effective(asked_from_job(_job(), 8), effective_from_arguments(DUMP, 8))
    assert check.ok and check.mismatches == []


def test_deepseek_pins_one_node_and_reads_seq_len_and_each_difference_is_named_with_its_cause():
    job = with_params(_job(label="MBS=4,GBS=128,PRECISION=BF16", precision="BF16", iterations=100), **DEEPSEEK)
    dump = {**DUMP, "world_size": "8", "seq_length": "2048", "fp8": "None", "recompute_activations": "True",
            "train_iters": "100", "exit_interval": "50", "tokenizer_model": "deepseek-ai/DeepSeek-V2-Lite"}
    del dump["recompute_granularity"]
    check = check_effective(asked_from_job(job, 8), effective_from_arguments(dump, 8))
    found = {m.param: m for m in check.mismatches}
    assert set(found) == {"world_size", "nnodes", "seq_length", "train_iters", "recompute"}
    assert found["seq_length"].text.startswith("seq_length 2048 != 4096")
    assert "train_deepseekv2.sh in this image reads SEQ_LEN, not SEQ_LENGTH" in found["seq_length"].cause
    assert "train_deepseekv2.sh in this image pins NNODES=1" in found["world_size"].cause
    assert (found["world_size"].asked, found["world_size"].actual) == (16, 8)
    assert found["train_iters"].actual == "50 (--exit-interval 50)"
    assert "AC (default sel" in found["recompute"].cause and found["recompute"].actual == "selective"
    assert check.reason.startswith("the trainer does not run what was asked: ")


def test_an_old_llama_script_that_ignores_the_fp8_recipe_is_named():
    job = _job(precision="MXFP8", label="MBS=4,GBS=128,PRECISION=MXFP8")
    check = check_effective(asked_from_job(job, 8), effective_from_arguments(DUMP, 8))
    [mismatch] = check.mismatches
    assert mismatch.text.startswith("precision FP8 (delayed recipe) != MXFP8")
    assert "does not read TE_FP4 / TE_FP8_RECIPE" in mismatch.cause


def test_primus_yaml_values_that_win_are_named_and_the_tokenizer_is_not_asked():
    job = dataclasses.replace(_job(), backend="primus")
    dump = {**DUMP, "use_torch_fsdp2": "True", "tokenizer_model": "some/other"}
    check = check_effective(asked_from_job(job, 8), effective_from_arguments(dump, 8))
    [mismatch] = check.mismatches
    assert mismatch.param == "fsdp" and "Primus takes use_torch_fsdp2 from the experiment YAML" in mismatch.cause


def test_a_downloaded_tokenizer_path_or_the_repo_id_both_count_as_asked():
    job = _job(tokenizer_path="/cache/tok/Llama-3.1-8B")
    asked = asked_from_job(job, 8)
    for value in ("/cache/tok/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"):
        assert check_effective(asked, effective_from_arguments({**DUMP, "tokenizer_model": value}, 8)).ok
    bad = check_effective(asked, effective_from_arguments({**DUMP, "tokenizer_model": "gpt2"}, 8))
    assert [m.param for m in bad.mismatches] == ["tokenizer"]


def test_an_unknown_launcher_gets_a_generic_cause_naming_the_script():
    job = with_params(_job(), training_script="examples/custom/run.sh")
    check = check_effective(asked_from_job(job, 8), effective_from_arguments({**DUMP, "seq_length": "4096"}, 8))
    assert check.mismatches[0].cause == ("run.sh did not pass the sequence length through to the trainer as the "
                                         "wrapper set it")


def test_the_record_round_trips_and_survives_a_damaged_file():
    check = check_effective(asked_from_job(_job(), 8), effective_from_arguments({**DUMP, "seq_length": "4096"}, 8))
    data = effective_record(check, ["w"])
    assert effective_of(data) == check.effective
    assert mismatches_of(data)[0]["param"] == "seq_length" and data["config_warnings"] == ["w"]
    assert (effective_of({"effective_config": {"world_size": True, "seq_length": "x", "nnodes": 2}})
            == EffectiveConfig(nnodes=2))
    assert effective_record(None) == {"effective_config": None, "config_mismatches": []}
    assert mismatches_of({"config_mismatches": [1, {"param": "x"}]}) == [{"param": "x"}]


def test_the_report_rows_say_what_ran_and_what_differed():
    from cvs_tasks.report.html import training_facts
    from cvs_tasks.verify.compare import effective_facts

    check = check_effective(asked_from_job(_job(), 8), effective_from_arguments({**DUMP, "seq_length": "2048"}, 8))
    details = {"last_step": 20, "planned": 20, "completed": True, **effective_record(check)}
    facts = dict(training_facts(details, {"suite": "single"}))
    assert facts["Trainer ran"].startswith("16 GPUs (2 nodes), MBS 4, GBS 128, seq 2048, iters 20, TP 1, PP 1, "
                                           "EP 1, FP8 (delayed), recompute none, FSDP off, mock data")
    assert facts["Config check"].startswith("seq_length 2048 != 8192 (")
    assert effective_facts(effective_record(None)) == [
        ("Trainer ran", "not stated: no arguments dump in the log (not checked)")]
    assert effective_facts({}) == []
    ok = dict(effective_facts(effective_record(check_effective(asked_from_job(_job(), 8),
                                                               effective_from_arguments(DUMP, 8)))))
    assert ok["Config check"] == "as asked"


def test_any_dump_text_reads_without_raising_and_never_invents_a_value():
    import random

    rng = random.Random(13)
    values = ["", "None", "nan", "inf", "1e400", "-3", "2.5", "True", "false", "٤", "9" * 40, "x y", "\x00"]
    for _ in range(300):
        args = {key: rng.choice(values) for key in DUMP if rng.random() < 0.7}
        effective = effective_from_arguments(args, gpus_per_node=rng.choice([None, 0, 8]))
        if effective is None:
            assert not args
            continue
        for name, value in effective.known().items():
            if name == "strings":  # the typed arguments that read as text, as printed
                assert all(args[k] == v and isinstance(v, str) for k, v in value.items()), value
            else:
                assert isinstance(value, (int, str, bool)), name
        check_effective(asked_from_job(_job(), 8), effective)  # comparing never raises either
