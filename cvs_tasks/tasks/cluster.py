"""`invoke cluster.*`: is every node ready (check), and record the nodes' SSH host keys (trust)."""

from __future__ import annotations

import sys

from invoke import Collection

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.tasks._common import configured, seconds_flag, task, user_errors
from cvs_tasks.terminal import echo

DEFAULT_VISIBLE_CHECK = "test -e /dev/kfd"


def _required(cluster: str | None) -> str:
    if not cluster:
        raise BadInput("--cluster is required (or cvs.cluster in invoke.yaml / INVOKE_CVS_CLUSTER): the cluster file "
                       "(JSON with username, priv_key_file, node_dict)")
    return cluster


@task(help={
    "cluster": "Cluster file (JSON: username, priv_key_file, node_dict)",
    "config": "Suite config; adds its runtime, image, paths.log_dir and gpu.visible_check to the checks",
    "known_hosts": "known_hosts file to verify host keys against (default: the cluster's, else ~/.ssh/known_hosts)",
    "connect_timeout": "Seconds allowed to connect to each node (default 10)",
})
def check(c, cluster=None, config=None, known_hosts=None, connect_timeout=None):
    """Check every node: SSH, Docker, image present, GPUs visible, free disk in the log dir."""
    from cvs_tasks.config import load_cluster, load_suite
    from cvs_tasks.remote import check_nodes, connect, format_check_table

    with user_errors():
        spec = load_cluster(_required(configured(c, "cluster", cluster)))
        container = dict(spec.container or {})
        log_dir, visible_check = "/", DEFAULT_VISIBLE_CHECK
        if config:
            suite = load_suite(config, spec)
            container = suite.config.container.model_dump()
            log_dir = suite.config.paths.log_dir
            visible_check = suite.config.gpu.visible_check
        runtime = (container.get("runtime") or {}).get("name")  # none: check_nodes takes the default
        bound = seconds_flag("connect-timeout", connect_timeout, 10.0)
        with connect(spec, known_hosts=known_hosts, connect_timeout=bound) as hosts:
            checks = check_nodes(hosts, runtime, container.get("image"), log_dir, visible_check)
        echo(*format_check_table(checks).split("\n"))
        bad = [f"{ch.host} ({', '.join(ch.failed())})" for ch in checks if not ch.ok]
        if bad:
            raise InfraError(f"cluster check failed on {len(bad)} of {len(checks)} node(s): "
                             + ", ".join(bad))


@task(help={
    "cluster": "Cluster file whose nodes' host keys to record",
    "known_hosts": "known_hosts file to write (default: the cluster's, else ~/.ssh/known_hosts)",
    "replace": "Replace a recorded key that changed, or of another type (only after checking why)",
    "yes": "Record without asking (scripts): only after checking the fingerprints another way",
    "timeout": "Seconds allowed to fetch each node's key (default 10)",
})
def trust(c, cluster=None, known_hosts=None, replace=False, yes=False, timeout=None):
    """Fetch each node's SSH host key, show its SHA256 fingerprint, and record new keys once confirmed."""
    from cvs_tasks.config import load_cluster
    from cvs_tasks.remote import known_hosts_path
    from cvs_tasks.remote.hostkeys import record_keys, scan_keys

    with user_errors():
        spec = load_cluster(_required(configured(c, "cluster", cluster)))
        path = known_hosts_path(spec, known_hosts)
        outcomes = scan_keys(spec, path, replace=replace, timeout=seconds_flag("timeout", timeout, 10.0))
        for o in outcomes:
            echo(_outcome_line(o))
        pending = [o for o in outcomes if o.pending]
        if pending and not yes:
            _confirm(len(pending), path)
        if pending:
            for o in record_keys(outcomes, path):
                if o.status in ("added", "replaced"):
                    echo(_outcome_line(o))
        bad = [o for o in outcomes if not o.ok]
        if bad:
            raise InfraError(f"{len(bad)} host key(s) not recorded in {path}:\n"
                             + "\n".join(f"  {o.detail}" for o in bad))


def _outcome_line(o) -> str:
    key = f"{o.key_type} {o.fingerprint}" if o.fingerprint else ""
    return f"{o.host:<20} {o.status:<9} {key}  {o.detail}".rstrip()


def _confirm(count: int, path) -> None:
    """Ask on a terminal; refuse (exit 2) without one: a key is trusted only by someone who looked."""
    question = f"record {count} key(s) in {path}? Compare the fingerprints above with the nodes' own first [y/N] "
    if not sys.stdin.isatty():
        raise BadInput(f"not recorded: {count} new key(s) need confirming and there is no terminal to ask on; "
                       "check the fingerprints above and rerun with --yes")
    try:
        answer = input(question)
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise BadInput("not recorded: not confirmed")


ns = Collection("cluster", check, trust)
