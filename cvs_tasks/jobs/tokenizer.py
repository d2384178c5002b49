"""Tokenizer download for the Megatron-LM families whose launchers need a local tokenizer file.

The family row says which file (``tokenizer_file``; Mixtral's ``tokenizer.model``); the other
launchers take the HF repo id (train_deepseekv2.sh pins deepseek-ai/DeepSeek-V2-Lite and loads
tokenizer.json through the hub). Primus always takes repo ids from its YAML, so it never downloads.
Unlike the reference, the token is read from the node's file inside the command, and the result is
checked (``test -s``).
"""

from __future__ import annotations

from cvs_tasks import backends
from cvs_tasks.families import megatron_family
from cvs_tasks.jobs.shell import hf_token_export, q, say
from cvs_tasks.jobs.spec import JobSpec

DEFAULT_FILE = "tokenizer.model"
"""What a download asked for a launcher that takes the repo id fetches (the SentencePiece file)."""


def tokenizer_file(job: JobSpec) -> str:
    """The file the job's family launcher needs on the node ("" when it takes the repo id)."""
    family = megatron_family(job.param("tokenizer_model"))
    return family.tokenizer_file if family else ""


def needs_local_tokenizer(job: JobSpec) -> bool:
    return backends.get(job.backend).local_tokenizer and bool(tokenizer_file(job))


def tokenizer_cache_dir(job: JobSpec) -> str:
    return f"{job.data_cache_dir.rstrip('/')}/{job.require_param('model_name')}"


def local_tokenizer_path(job: JobSpec) -> str:
    """Where the download puts the file, and what the wrapper passes as TOKENIZER_MODEL."""
    return f"{tokenizer_cache_dir(job)}/{_download_file(job)}"


def tokenizer_download_command(job: JobSpec) -> str:
    """One command (run in the container on every node) that fails unless the file arrived.

    Uses ``huggingface-cli`` when the image has it, else the newer ``hf`` (same arguments).
    """
    repo = q(job.param("tokenizer_model"))
    target_dir = q(tokenizer_cache_dir(job))
    path = local_tokenizer_path(job)
    download_args = f"download {repo} --include {q(_download_file(job))} --local-dir {target_dir}"
    steps = [f"mkdir -p {target_dir}"]
    if job.hf_token_path:
        token = q(job.hf_token_path)
        steps.append(
            f"{{ test -r {token} || {{ echo "
            + say(f"HF token file {job.hf_token_path} is not readable on this node "
                  f"(paths.hf_token_file)")
            + " >&2; false; }; }"
        )
        steps.append(hf_token_export(job.hf_token_path))
    steps.append(
        f"if command -v huggingface-cli > /dev/null 2>&1; then huggingface-cli {download_args}; "
        f"else hf {download_args}; fi"
    )
    check = (
        f"{{ test -s {q(path)} || {{ echo "
        + say(f"tokenizer download did not produce {path} (check the HF token and "
              f"train_params.tokenizer_model)")
        + " >&2; false; }; }"
    )
    return " && ".join([*steps, check])


def _download_file(job: JobSpec) -> str:
    return tokenizer_file(job) or DEFAULT_FILE
