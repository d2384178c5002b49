"""Tokenizer download for Mixtral on Megatron-LM (docs/reference_suite.md#tokenizer-download), checked."""

from __future__ import annotations

import pytest
from jobs_factory import make_job, with_params

from cvs_tasks.jobs import (
    JobSetupError,
    local_tokenizer_path,
    needs_local_tokenizer,
    tokenizer_download_command,
)


def mixtral(**changes):
    return with_params(make_job(**changes), model_name="mixtral_8x7B",
                       tokenizer_model="mistralai/Mixtral-8x7B-v0.1")


@pytest.mark.parametrize(("backend", "tokenizer", "needed"), [
    ("megatron", "deepseek-ai/DeepSeek-V2-Lite", False),  # its script pins the repo id (hub tokenizer.json)
    ("megatron", "mistralai/MIXTRAL-8x7B-v0.1", True),
    ("megatron", "meta-llama/Llama-3.1-8B", False),
    ("megatron", "Qwen/Qwen3-8B", False),
    ("primus", "deepseek-ai/DeepSeek-V2-Lite", False),
])
def test_needs_local_tokenizer(backend, tokenizer, needed):
    job = with_params(make_job(backend=backend), tokenizer_model=tokenizer)
    assert needs_local_tokenizer(job) is needed


def test_local_path_is_under_the_data_cache_per_model():
    assert local_tokenizer_path(mixtral()) == "/home/alice/cache/mixtral_8x7B/tokenizer.model"


def test_download_reads_the_token_file_and_checks_the_result():
    assert tokenizer_download_command(mixtral()) == (
        "mkdir -p /home/alice/cache/mixtral_8x7B && "
        "{ test -r /home/alice/.hf_token || { echo 'cvs-tasks: HF token file /home/alice/.hf_token "
        "is not readable on this node (paths.hf_token_file)' >&2; false; }; } && "
        'export HF_TOKEN="$(cat /home/alice/.hf_token)" && '
        "if command -v huggingface-cli > /dev/null 2>&1; then huggingface-cli download "
        "mistralai/Mixtral-8x7B-v0.1 --include tokenizer.model --local-dir "
        "/home/alice/cache/mixtral_8x7B; else hf download mistralai/Mixtral-8x7B-v0.1 "
        "--include tokenizer.model --local-dir /home/alice/cache/mixtral_8x7B; fi && "
        "{ test -s /home/alice/cache/mixtral_8x7B/tokenizer.model || { echo 'cvs-tasks: "
        "tokenizer download did not produce /home/alice/cache/mixtral_8x7B/tokenizer.model "
        "(check the HF token and train_params.tokenizer_model)' >&2; false; }; }"
    )


def test_download_without_token_file_skips_the_export():
    command = tokenizer_download_command(mixtral(hf_token_path=None))
    assert "HF_TOKEN" not in command
    assert command.startswith("mkdir -p /home/alice/cache/mixtral_8x7B && if command -v ")


def test_model_name_is_required():
    job = with_params(make_job(), tokenizer_model="mistralai/Mixtral-8x7B-v0.1", model_name="")
    with pytest.raises(JobSetupError) as err:
        local_tokenizer_path(job)
    assert err.value.field == "train_params.model_name"
