"""The HF token never appears in anything the builders produce; only its file path does."""

from __future__ import annotations

from jobs_factory import CANARY_TOKEN, TOKEN_FILE, make_job, with_params

from cvs_tasks.jobs import (
    build_launch,
    nic_setup_command,
    render_dry_run,
    stop_job_command,
    tokenizer_download_command,
)


def _every_built_string(job, experiment=None) -> list[str]:
    plan = build_launch(job, experiment=experiment)
    out = [*plan.prepare, *plan.warnings, *render_dry_run(plan), nic_setup_command(job)]
    for node in plan.nodes:
        out += [node.script_text, node.launch_command, node.script_path, node.log_path,
                stop_job_command(node)]
    return out


def test_token_never_in_scripts_commands_or_dry_run(tmp_path):
    token_file = tmp_path / "hf_token"
    token_file.write_text(CANARY_TOKEN + "\n")
    token_file.chmod(0o600)
    jobs = [
        make_job(hf_token_path=str(token_file)),
        make_job(hf_token_path=str(token_file), runtime="host", nnodes=2, distributed=True),
        make_job(hf_token_path=str(token_file), backend="primus", image="rocm/primus:v26.5"),
    ]
    deepseek = with_params(make_job(hf_token_path=str(token_file)),
                           tokenizer_model="deepseek-ai/DeepSeek-V2-Lite")
    built = [s for job in jobs for s in _every_built_string(job)]
    built.append(tokenizer_download_command(deepseek))
    assert all(CANARY_TOKEN not in s for s in built)
    scripts = [s for s in built if s.startswith("#!/bin/bash\n")]
    assert len(scripts) == 4
    assert all(f'export HF_TOKEN="$(cat {token_file})"' in s for s in scripts)


def test_token_path_only_in_the_run_time_read():
    plan = build_launch(make_job())
    assert plan.nodes[0].script_text.count(TOKEN_FILE) == 1
    assert TOKEN_FILE not in plan.nodes[0].launch_command
