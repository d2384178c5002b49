"""The read-back compares types, not spellings: a value that reached Megatron as a string where it
reads a bool / None / int fails the combo with the cause named, whatever the string looks like."""

from __future__ import annotations

import dataclasses

from jobs_factory import make_job, with_params
from test_jobs_watch import Node, iteration, watch_checked

from cvs_tasks.metrics import LogParser
from cvs_tasks.verify import asked_from_job, check_effective, effective_from_arguments
from cvs_tasks.verify.compare import effective_of, effective_record

ARGS = {"world_size": "8", "micro_batch_size": "4", "global_batch_size": "128", "seq_length": "8192",
        "train_iters": "20", "tensor_model_parallel_size": "1", "pipeline_model_parallel_size": "1",
        "bf16": "True", "fp8": "hybrid", "fp8_recipe": "delayed", "recompute_granularity": "None",
        "use_torch_fsdp2": "False", "use_distributed_optimizer": "True"}


def primus_dump(**changes: str) -> str:
    """Megatron's dump as Primus logs it: loguru prefix, `str()` of each value, dots to 48 columns."""
    head = "[20261203 10:00:00][rank-0/8][DEBUG]    [---------------utils.py:425] : "
    args = {**ARGS, **changes}
    lines = [head + "------------------------ arguments ------------------------"]
    lines += [f"{head}  {k} {'.' * (47 - len(k))} {v}" for k, v in sorted(args.items())]
    return "\n".join(lines + [head + "-------------------- end of arguments ---------------------"]) + "\n"


def _primus_job(**params: str):
    return with_params(dataclasses.replace(make_job(), backend="primus"), **params)


def _check(job, text: str):
    parser = LogParser(dialect="auto")
    parser.feed(text)
    parser.finish()
    return check_effective(asked_from_job(job, 8), effective_from_arguments(parser.arguments, 8))


def test_fsdp2_false_that_reached_the_trainer_as_a_string_fails_naming_the_cause():
    check = _check(_primus_job(), primus_dump(use_torch_fsdp2="false"))
    assert not check.ok
    [mismatch] = check.mismatches  # the string explains FSDP being on: no second, YAML-blaming mismatch
    assert (mismatch.param, mismatch.asked, mismatch.actual) == ("use_torch_fsdp2", False, "'false'")
    assert mismatch.text.startswith("use_torch_fsdp2 'false' != False (asked): 'false' is the string 'false', "
                                    "which is true in Python: FSDP2 is on (Primus sets an override")
    assert "docs/primus_overrides.md" in mismatch.cause
    assert check.effective.fsdp is True and check.effective.strings == {"use_torch_fsdp2": "false"}


def test_the_typed_values_the_harness_sends_read_back_as_asked():
    assert _check(_primus_job(), primus_dump()).ok
    on = _check(_primus_job(recompute="1", fsdp="1"), primus_dump(recompute_granularity="full", use_torch_fsdp2="True"))
    assert on.ok and on.effective.strings == {}


def test_recompute_null_as_a_string_is_named_as_megatrons_refusal_not_read_as_off():
    check = _check(_primus_job(), primus_dump(recompute_granularity="null"))
    [mismatch] = check.mismatches
    assert (mismatch.param, mismatch.asked, mismatch.actual) == ("recompute_granularity", None, "'null'")
    assert "'null' is the string 'null', not None: Megatron's TransformerConfig raises" in mismatch.cause
    assert check.effective.recompute == "null"


def test_a_yaml_that_turns_fsdp2_on_is_still_the_yamls_cause_and_a_number_is_not_a_string():
    check = _check(_primus_job(), primus_dump(use_torch_fsdp2="True"))
    assert [m.param for m in check.mismatches] == ["fsdp"]
    assert "Primus takes use_torch_fsdp2 from the experiment YAML" in check.mismatches[0].cause
    assert _check(_primus_job(), primus_dump(use_torch_fsdp2="0")).ok  # an int 0 is off, as Megatron reads it


def test_a_size_that_is_text_fails_and_a_megatron_launcher_is_named_as_the_source():
    check = _check(make_job(), primus_dump(micro_batch_size="four", mock_data="true"))
    found = {m.param: m for m in check.mismatches}
    assert set(found) == {"micro_batch_size", "mock_data"}
    assert found["micro_batch_size"].cause == ("'four' is the string 'four', not a number Megatron can use "
                                               "(train_llama3.sh passed it to the trainer as text)")
    assert found["mock_data"].asked is True and "mock data is on" in found["mock_data"].cause


def test_the_strings_survive_the_stage_record():
    check = _check(_primus_job(), primus_dump(use_torch_fsdp2="false"))
    assert effective_of(effective_record(check)).strings == {"use_torch_fsdp2": "false"}
    assert effective_of({"effective_config": {"strings": {"a": 1, "b": "x"}}}).strings == {"b": "x"}


def test_the_watcher_fails_the_job_as_soon_as_the_dump_with_the_string_is_read():
    asked = asked_from_job(_primus_job(), 8)
    node = Node(script=[primus_dump(use_torch_fsdp2="false"), iteration(1, 4)], complete=False)
    outcome, _, _ = watch_checked([node], lambda args: check_effective(asked, effective_from_arguments(args, 8)))
    assert outcome.status == "mismatch" and not outcome.ok
    assert outcome.reason.startswith("node n0: the trainer does not run what was asked: use_torch_fsdp2 'false' "
                                     "!= False (asked): 'false' is the string 'false', which is true in Python: "
                                     "FSDP2 is on")
