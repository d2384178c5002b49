"""Stages that prepare and release the nodes: container launch, tokenizer download, teardown."""

from __future__ import annotations

from pathlib import Path

from cvs_tasks import backends, runtimes
from cvs_tasks.inputs import InputRefused, read_secret
from cvs_tasks.jobs import tokenizer as tok
from cvs_tasks.lifecycle.jobspec import job_spec, token_path
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.run import NodeOutcome, StageRecord
from cvs_tasks.run.stages import TEARDOWN


def node_outcomes(session: Session, results, ok_reason: str = "") -> list[NodeOutcome]:
    out = []
    for r in results:
        reason = ok_reason if r.ok else (r.error or session.redactor(r.stderr or r.stdout).strip()[-300:]
                                         or f"exit {r.exit_code}")  # masked before the cut: no half token
        out.append(NodeOutcome(host=r.host, rank=r.rank, status="PASS" if r.ok else "ERROR",
                               reason=session.redactor(reason)))
    return out


def failed_nodes_reason(what: str, nodes: list[NodeOutcome]) -> str:
    bad = [n for n in nodes if n.status != "PASS"]
    return f"{what} failed on {len(bad)}/{len(nodes)} node(s): " + "; ".join(f"{n.host}: {n.reason}" for n in bad)


def attempts_of(*sources) -> list[dict]:
    """Retried infrastructure steps (SSH connect, pull, docker rm) as plain data for the record."""
    return [a.to_dict() if hasattr(a, "to_dict") else a
            for src in sources for a in (getattr(src, "attempts", None) or [])]


def launch_container(session: Session, combo: str | None = None) -> StageRecord:
    runtime = session.runtime()
    results = runtime.launch()
    nodes = node_outcomes(session, results, ok_reason="running")
    record = StageRecord.result("PASS", nodes=nodes)
    record.attempts = attempts_of(runtime, session.hosts())
    if any(n.status != "PASS" for n in nodes):
        record.status = "ERROR"
        record.reason = failed_nodes_reason("container launch", nodes)
        return record
    record.reason, record.data["hf_token"] = _prepare_node_dir(session)
    record.data.update(fingerprint_nodes(session))
    return record


def fingerprint_nodes(session: Session) -> dict:
    """Each node's versions (GPU, ROCm, driver, firmware, kernel, NIC, image digest) and any drift."""
    from cvs_tasks.remote.fingerprint import collect_fingerprints, drift

    container = session.config.container
    facts = collect_fingerprints(session.hosts(), container.runtime.name, container.image)
    found = [f"{d.host}: {d.text}" for d in drift(facts)]
    for line in found:
        session.say(f"warning: version drift: {line}", "warning")
    return {"fingerprints": facts, "drift": found}


def _prepare_node_dir(session: Session) -> tuple[str, bool]:
    """Create the per-run node folder (0700, marked) and place the HF token there as a 0600 file.

    Returns the stage reason and whether the token file was placed (jobs export HF_TOKEN from it)."""
    from cvs_tasks.lifecycle.node_folders import prepare_run_folder

    hosts = session.hosts()
    prepare_run_folder(session)  # with its .cvs-run marker, and the log-folder lock
    token_file = Path(session.config.paths.hf_token_file).expanduser()
    try:
        lines = read_secret(token_file)  # comment lines are not part of the token
        token = lines[0]
    except (InputRefused, IndexError):
        session.say(f"warning: HF token file {token_file} not readable; jobs run without HF_TOKEN", "warning")
        return f"running; no HF token ({token_file} not readable)", False
    put = hosts.put(token.encode("utf-8"), token_path(session), 0o600, timeout=30)
    bad = [r for r in put if not r.ok]
    if bad:
        from cvs_tasks.errors import InfraError

        raise InfraError(f"cannot place the HF token file on node {bad[0].host}: "
                         f"{bad[0].error or bad[0].stderr.strip()}")
    return "running", True


def download_tokenizer(session: Session, combo: str | None = None) -> StageRecord:
    backend = backends.get(session.plan.backend)
    if not backend.local_tokenizer:
        return StageRecord.result("SKIPPED", f"{backend.label} {backend.tokenizer_note}")
    first = session.plan.combos[0]
    job = job_spec(session, label="tokenizer_check", combo=first, mbs="1", gbs="1", precision="BF16", iterations=1)
    if not tok.needs_local_tokenizer(job):
        return StageRecord.result(
            "SKIPPED", f"not needed: {job.train_params.get('tokenizer_model')} is used by its HF repo id")
    results = session.runtime().exec(tok.tokenizer_download_command(job), timeout=1800)
    nodes = node_outcomes(session, results, ok_reason=tok.local_tokenizer_path(job))
    record = StageRecord.result("PASS", nodes=nodes)
    record.data["tokenizer_path"] = tok.local_tokenizer_path(job)
    if any(n.status != "PASS" for n in nodes):
        record.status = "ERROR"
        record.reason = failed_nodes_reason("tokenizer download", nodes)
    else:
        record.reason = f"tokenizer.model at {tok.local_tokenizer_path(job)}"
    return record


def teardown(session: Session, combo: str | None = None) -> StageRecord:
    """Remove the containers (per the lifetime) and the per-run node folder holding the token,
    then let the run's nodes go (release an allocation the harness requested)."""
    hosts = session.reachable_hosts()
    if hosts is None:
        notes = [note for note in [session.release_nodes()] if note]
        return StageRecord.result("PASS", f"nothing to remove: this run never held a {session.scheduler.label} "
                                          "allocation",
                                  data={"notes": notes})
    record = _remove_from_nodes(session, hosts)
    released = session.release_nodes()
    if released:
        record.data.setdefault("notes", []).append(released)
    return record


def _remove_from_nodes(session: Session, hosts) -> StageRecord:
    stopped = []
    # jobs a killed harness left running
    if runtimes.get(session.runtime().spec.runtime).host_pids:
        from cvs_tasks.lifecycle.leftovers import stop_run_host_jobs

        stopped = stop_run_host_jobs(hosts, session.config.paths.scripts_dir, session.run.run_id)
    from cvs_tasks.lifecycle.node_folders import release_command

    cleanup = hosts.run(release_command(session), timeout=60)  # the lock, then the marked run folder
    results = session.runtime().remove()
    nodes = node_outcomes(session, results, ok_reason="removed")
    record = StageRecord.result("PASS", "torn down", nodes=nodes)
    if stopped:
        record.data["notes"] = stopped
    record.attempts = attempts_of(session.runtime())
    if any(n.status != "PASS" for n in nodes):
        record.status = "ERROR"
        record.reason = failed_nodes_reason(TEARDOWN.id, nodes)
    elif any(not r.ok for r in cleanup):
        bad = next(r for r in cleanup if not r.ok)
        record.status = "ERROR"
        record.reason = f"could not remove {session.node_run_dir} on node {bad.host}: {bad.error or bad.stderr.strip()}"
    return record
