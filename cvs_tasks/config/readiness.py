"""Checks that a loaded suite can start on its cluster: what a multi-node run needs, and an HF
token for a gated tokenizer. Without them every job starts and fails late (a rendezvous that
never forms, RCCL on the wrong interface, a 401 from the Hub).

They run when a run (or a dry run) opens and in ``config.validate``, after the plan is made (the
host list and single/distributed are known then), and report every problem at once as a
``ConfigError`` (exit 2) naming the file and the dotted path. The problem functions are pure;
``check_ready`` reads the token file. What only the image and the nodes can tell (what the family
launcher reads, the RDMA links) is asked by ``plan.check_launcher``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from pathlib import Path

from cvs_tasks.config.errors import ConfigError, Problem, join_path
from cvs_tasks.families import gated_prefixes
from cvs_tasks.inputs import InputRefused, read_secret

MULTI_NODE_ENV = {
    "NCCL_SOCKET_IFNAME": "the interface RCCL bootstraps over (e.g. enp193s0f1np1); without it RCCL may pick "
                          "a docker or management interface the other nodes cannot reach",
    "GLOO_SOCKET_IFNAME": "the interface torch.distributed's Gloo uses (usually the same as NCCL_SOCKET_IFNAME)",
}
HCA_HINT = ("the RDMA devices RCCL may use (e.g. bnxt_re0,...,bnxt_re7; `ibv_devices` lists them); "
            "on a fabric without RDMA set NCCL_IB_DISABLE to 1 instead")
LOOPBACK = ("localhost", "localhost.localdomain")


def distributed_problems(env: Mapping[str, str], hosts: Sequence[tuple[str, str]] | None,
                         cluster_file: str = "the cluster file", scheduled: bool = False) -> list[Problem]:
    """container.env of a multi-node run. ``hosts``: (name, address) in rank order, None when no
    cluster is known; ``scheduled``: Slurm sets MASTER_ADDR itself."""
    problems: list[Problem] = []
    for name, why in MULTI_NODE_ENV.items():
        if not str(env.get(name, "")).strip():
            problems.append((join_path("container.env", name), f"required for a multi-node run: {why}"))
    if not str(env.get("NCCL_IB_HCA", "")).strip() and str(env.get("NCCL_IB_DISABLE", "")).strip() != "1":
        problems.append(("container.env.NCCL_IB_HCA", f"required for a multi-node run: {HCA_HINT}"))
    if not scheduled:
        problem = master_addr_problem(str(env.get("MASTER_ADDR", "")).strip(), hosts, cluster_file)
        if problem:
            problems.append(("container.env.MASTER_ADDR", problem))
    return problems


def master_addr_problem(addr: str, hosts: Sequence[tuple[str, str]] | None, cluster_file: str) -> str | None:
    """MASTER_ADDR must be the first host: rank 0 serves the rendezvous there."""
    first = f" ({hosts[0][1]}, the first host in {cluster_file})" if hosts else ""
    if not addr:
        return f"required for a multi-node run: set it to the first host's address{first}"
    if not hosts:
        return None
    for rank, (name, address) in enumerate(hosts):
        if addr in (name, address):
            if rank == 0:
                return None
            return (f"{addr} is host {rank} in {cluster_file}, but rank 0 (which serves the rendezvous) runs on "
                    f"the first host {hosts[0][1]}: set MASTER_ADDR to {hosts[0][1]} or list {addr} first")
    decidable = _is_ip(addr) and all(_is_ip(address) for _, address in hosts)
    if decidable or _is_loopback(addr):
        return (f"{addr} is not one of the hosts in {cluster_file} "
                f"({', '.join(a for _, a in hosts[:4])}{', ...' if len(hosts) > 4 else ''}); the other nodes would "
                f"wait for a rendezvous that never forms: set it to {hosts[0][1]}")
    return None  # host names: cannot tell without DNS, which a config check does not do


def gated_tokenizer_problems(tokenizers: Mapping[str, str], token_file: str, token_lines: int | None) -> list[Problem]:
    """``tokenizers``: dotted path -> tokenizer repo id; ``token_lines``: secret lines in the token
    file (None: the file does not exist)."""
    gated = {where: repo for where, repo in tokenizers.items() if is_gated(repo)}
    if not gated:
        return []
    where, repo = next(iter(gated.items()))
    need = (f"{repo} ({where}) is a gated Hugging Face repo: the job downloads it with the token from "
            "paths.hf_token_file")
    if not token_file.strip():
        return [("paths.hf_token_file", f"empty, but {need}; point it at a file holding a token that was granted "
                 "access, or set the tokenizer to a local path")]
    if token_lines is None:
        return [("paths.hf_token_file", f"{token_file} does not exist on this machine, but {need}; write your HF "
                 "token (one line) to it, or set the tokenizer to a local path")]
    if token_lines == 0:
        return [("paths.hf_token_file", f"{token_file} holds no token (only blank or # lines), but {need}; add "
                 "the token on a line of its own")]
    return []


def is_gated(repo: str) -> bool:
    """A Hugging Face repo id under a prefix a family row declares gated (a local path never is)."""
    text = repo.strip().lower()
    return not text.startswith(("/", ".", "~")) and text.startswith(gated_prefixes())


def token_line_count(token_file: str) -> int | None:
    """Secret lines in the token file; None when it does not exist (an unreadable one is
    ``read_secrets``' to refuse, with its own message)."""
    path = Path(token_file).expanduser()
    if not token_file.strip() or not path.exists():
        return None
    try:
        return len(read_secret(path))
    except InputRefused:
        return 1


def check_ready(suite, hosts: Sequence[tuple[str, str]] | None, distributed: bool,
                cluster_file: str = "the cluster file", scheduled: bool = False) -> None:
    """Raise one ConfigError (exit 2) with every problem of ``distributed_problems`` and
    ``gated_tokenizer_problems`` for a loaded suite."""
    config = suite.config
    problems: list[Problem] = []
    if distributed:
        problems += distributed_problems(config.container.env, hosts, cluster_file, scheduled)
    tokenizers: dict[str, str] = {}
    for combo in suite.combos:
        repo = str(combo.train_params.get("tokenizer_model", ""))
        overlay = (config.sweep.combinations.get(combo.cell) or {}) if combo.cell in config.sweep.combinations else {}
        where = (join_path(join_path("sweep.combinations", combo.cell), "tokenizer_model")
                 if "tokenizer_model" in overlay else "train_params.tokenizer_model")
        tokenizers.setdefault(where, repo)
    token_file = config.paths.hf_token_file
    problems += gated_tokenizer_problems(tokenizers, token_file, token_line_count(token_file))
    if problems:
        raise ConfigError(suite.config_path, problems)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_loopback(text: str) -> bool:
    return text.lower() in LOOPBACK or (_is_ip(text) and ipaddress.ip_address(text).is_loopback)
