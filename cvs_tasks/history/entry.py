"""A run directory -> one RunEntry: the facts the history keeps about a finished run. Pure reads.

Identity rules, declared once:
* ``config_hash`` hashes the effective config (after placeholders, secrets redacted), so a cosmetic
  edit of the file (a comment, key order) or of the threshold file keeps the baseline history;
* ``cluster`` is the sorted host list: "this cluster" means the same nodes;
* ``provenance`` (per combo) hashes the image digest, the trainer's effective arguments as read
  back from its log, and the config hash: equal keys mean the same software, same configuration.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.stages import LAUNCH_CONTAINER, METRIC, TRAINING

FINGERPRINT_KEY = "fingerprints"  # launch_container record data: host -> facts


def short_hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def args_hash(args: Mapping[str, str] | None) -> str | None:
    """Hash of the trainer's arguments dump (None when the log printed none)."""
    return short_hash(dict(args)) if args else None


def config_hash(effective_config: Any) -> str:
    return short_hash(effective_config or {})


def cluster_key(hosts: list[str]) -> str:
    return ",".join(sorted(str(h) for h in hosts))


def provenance_key(image_digest: str | None, trainer_args_hash: str | None, cfg_hash: str) -> str:
    return short_hash(image_digest or "", trainer_args_hash or "", cfg_hash)


@dataclass
class MetricEntry:
    name: str
    value: float | None
    unit: str
    expected: str
    status: str


@dataclass
class ComboEntry:
    combo: str
    training: str | None
    verdict: str | None  # the combo's: FAIL when any of its tests failed (see ``combo_verdict``)
    args_hash: str | None
    provenance: str
    metrics: list[MetricEntry] = field(default_factory=list)
    reason: str = ""  # why, for a combo that did not pass: the failing test's reason


@dataclass
class NodeEntry:
    host: str
    rank: int | None
    status: str
    facts: dict[str, Any]


@dataclass
class RunEntry:
    run_id: str
    started: float
    finished: float | None
    cluster: str
    hosts: list[str]
    config_hash: str
    config_file: str | None
    suite: str | None
    backend: str | None
    gpu_name: str | None
    model_name: str | None
    image: str | None
    image_digest: str | None
    verdict: str
    verdict_reason: str
    provenance: str
    run_dir: str
    combos: list[ComboEntry] = field(default_factory=list)
    nodes: list[NodeEntry] = field(default_factory=list)


def entry_from_run(run: RunDir) -> RunEntry:
    """Everything the history keeps about ``run``, read from its directory alone."""
    from cvs_tasks.report.results import build_results

    manifest = run.manifest() or {}
    results = build_results(run)
    hosts = [str(h) for h in (manifest.get("hosts") or [])]
    cfg_hash = config_hash(manifest.get("effective_config"))
    fingerprints = _fingerprints(run)
    digest = majority_value(f.get("image_digest") for f in fingerprints.values()) or manifest.get("image_digest")
    combos = [_combo_entry(run, results, combo, digest, cfg_hash) for combo in results.get("combos", [])]
    return RunEntry(
        run_id=str(results.get("run_id") or run.run_id),
        started=float(manifest.get("created") or 0.0),
        finished=manifest.get("finished"),
        cluster=cluster_key(hosts),
        hosts=hosts,
        config_hash=cfg_hash,
        config_file=manifest.get("config_file"),
        suite=manifest.get("suite"),
        backend=manifest.get("backend"),
        gpu_name=manifest.get("gpu_name"),
        model_name=manifest.get("model_name"),
        image=manifest.get("image"),
        image_digest=digest,
        verdict=str(results.get("verdict") or "FAIL"),
        verdict_reason=str(results.get("verdict_reason") or ""),
        provenance=short_hash(digest or "", cfg_hash, sorted(c.args_hash or "" for c in combos)),
        run_dir=str(run.path),
        combos=combos,
        nodes=_node_entries(hosts, results, fingerprints),
    )


def _fingerprints(run: RunDir) -> dict[str, dict[str, Any]]:
    record = run.read_record(LAUNCH_CONTAINER.id)
    found = record.data.get(FINGERPRINT_KEY) if record else None
    return {str(h): dict(f) for h, f in found.items() if isinstance(f, dict)} if isinstance(found, dict) else {}


def majority_value(values) -> Any:
    counts = Counter(v for v in values if v not in (None, ""))
    return counts.most_common(1)[0][0] if counts else None


def _combo_entry(run: RunDir, results: dict, combo: str, digest: str | None, cfg_hash: str) -> ComboEntry:
    tests = {(t["stage"], t["combo"]): t for t in results.get("tests", [])}
    training = tests.get((TRAINING.id, combo), {})
    metric = tests.get((METRIC.id, combo), {})
    record = run.read_record(TRAINING.id, combo)
    a_hash = record.data.get("args_hash") if record else None
    metrics = [MetricEntry(m["name"], m["value"], m.get("unit") or "", m.get("expected") or "-", m["status"])
               for m in metric.get("metrics", [])]
    verdict, reason = combo_verdict([t for t in results.get("tests", []) if t.get("combo") == combo], metric)
    return ComboEntry(combo=combo, training=training.get("status"), verdict=verdict, args_hash=a_hash,
                      provenance=provenance_key(digest, a_hash, cfg_hash), metrics=metrics, reason=reason)


def combo_verdict(tests: list[dict], metric: dict) -> tuple[str | None, str]:
    """A combo's verdict and reason: FAIL with the first failed test's reason when any of its tests
    failed or errored (a combo that died of OOM is FAIL, not its metric row's SKIPPED); else its
    metric verdict (PASS, or why it has none)."""
    failed = next((t for t in tests if t.get("status") in ("FAIL", "ERROR")), None)
    if failed is not None:
        return "FAIL", f"{failed.get('name')}: {failed.get('reason') or failed.get('status')}"
    status = metric.get("status")
    return status, "" if status == "PASS" else str(metric.get("reason") or "")


def _node_entries(hosts: list[str], results: dict, fingerprints: dict[str, dict]) -> list[NodeEntry]:
    worst: dict[str, str] = {}
    for test in results.get("tests", []):
        for node in test.get("nodes", []):
            if node.get("status") in ("FAIL", "ERROR"):
                worst[str(node.get("host"))] = "FAIL"
    return [NodeEntry(host=h, rank=i, status=worst.get(h, "PASS"), facts=fingerprints.get(h, {}))
            for i, h in enumerate(hosts)]
