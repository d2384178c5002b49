"""The suite load pipeline, in the documented order, collecting every problem before raising.

read -> reject old formats -> drop `_` comments -> merge cluster container defaults ->
`{user-id}` / `{paths.*}` -> find the threshold file -> checkpoint exemption -> `<changeme>` scan ->
model validation -> env / container / checkpoint rules -> sweep combos -> family rules (model size) ->
threshold file -> threshold <-> sweep coverage.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cvs_tasks import backends
from cvs_tasks.config.cluster import Cluster, resolved_username
from cvs_tasks.config.errors import ConfigError, Problem, did_you_mean, is_under, join_path, read_object, validate_model
from cvs_tasks.config.models import SuiteConfig
from cvs_tasks.config.placeholders import (
    CHANGEME,
    ExpansionTooLong,
    changeme_hint,
    cvs_root_problems,
    exempt_checkpoint,
    find_changeme,
    local_user,
    run_id_problems,
    strip_comments,
    substitute_cvs_root,
    substitute_paths,
    substitute_user,
    unknown_path_placeholders,
)
from cvs_tasks.config.rules import (
    checkpoint_problems,
    container_problems,
    env_problems,
    family_problems,
    reject_old_formats,
)
from cvs_tasks.config.sweep import DEFAULT_COMBO, Combo, build_combos, cell_coverage
from cvs_tasks.config.thresholds import (
    ThresholdSpec,
    find_threshold_file,
    load_threshold_file,
    threshold_candidates,
)
from cvs_tasks.templates import checkout_root


@dataclass
class Suite:
    """A loaded, fully checked suite: the typed config plus what was derived from it."""

    config: SuiteConfig
    config_path: Path
    threshold_path: Path | None
    thresholds: dict[str, dict[str, ThresholdSpec]]
    combos: list[Combo]
    warnings: list[str] = field(default_factory=list)
    backend: str = field(default_factory=lambda: backends.fallback().name)  # chosen by the image
    files_hash: str = ""

    def __post_init__(self) -> None:
        backends.get(self.backend)  # a registered backend's name, or BadInput naming the known ones

    @property
    def combo_ids(self) -> list[str]:
        return [c.id for c in self.combos]

    def combo(self, combo_id: str) -> Combo:
        for combo in self.combos:
            if combo.id == combo_id:
                return combo
        raise ConfigError(self.config_path, [("sweep.runs", f"no combo {combo_id!r} in this run"
                                              f"{did_you_mean(combo_id, self.combo_ids)} "
                                              f"(runs: {', '.join(self.combo_ids)})")])


def load_suite(config_path: Path | str, cluster: Cluster | None = None) -> Suite:
    """Load and check a suite config (and its threshold file); raise one ConfigError listing every problem."""
    path = Path(config_path)
    raw, config_bytes = read_object(path, "config")
    reject_old_formats(raw, path)
    data = strip_comments(raw)
    if cluster is not None and cluster.container:
        data["container"] = merge_under(cluster.container, data.get("container"))
    root = checkout_root()
    no_checkout = cvs_root_problems(data) if root is None else []
    if root is not None:
        data = substitute_cvs_root(data, str(root))
    try:
        data = substitute_paths(substitute_user(data, resolved_username(cluster) or local_user()))
    except ExpansionTooLong as exc:
        raise ConfigError(path, [(exc.where, str(exc))]) from None

    problems: list[Problem] = list(no_checkout)
    warnings: list[str] = []
    threshold_json = data.get("threshold_json", "")
    threshold_path: Path | None = None
    if isinstance(threshold_json, str) and CHANGEME not in threshold_json:
        gpu = data.get("gpu_name") if isinstance(data.get("gpu_name"), str) else ""
        threshold_path, why = find_threshold_file(threshold_json, path, gpu)
        if why and (threshold_json.strip() or _enforcing(data)):
            problems.append(("threshold_json", why))
        elif why:
            warnings.append(f"threshold_json {why}; metrics are recorded without thresholds")

    data = exempt_checkpoint(data)
    leftovers = find_changeme(data)
    problems += [(where, _changeme_message(where, text, path)) for where, text in leftovers]
    blocked = {where for where, _ in leftovers}
    paths = data.get("paths") if isinstance(data.get("paths"), dict) else {}
    problems += unknown_path_placeholders(data, set(paths)) + run_id_problems(data)

    config, model_problems = validate_model(SuiteConfig, data)
    problems += [p for p in model_problems if not is_under(p[0], blocked)]
    env_issues, env_warnings = env_problems(data)
    problems += env_issues + container_problems(data) + checkpoint_problems(data)
    warnings += env_warnings

    combos, sweep_problems = build_combos(data.get("sweep"), data.get("train_params"))
    problems += family_problems(data, combos)
    sweep_paths = {where for where, _ in sweep_problems}
    problems = [p for p in problems if p[0] not in sweep_paths]  # one message per spot, the sweep's is clearer
    problems += [p for p in sweep_problems if not is_under(p[0], blocked)]

    thresholds: dict[str, dict[str, ThresholdSpec]] = {}
    threshold_problems: list[Problem] = []
    threshold_bytes = b""
    if threshold_path is not None:
        thresholds, threshold_bytes, threshold_problems, threshold_warnings = load_threshold_file(threshold_path)
        warnings += threshold_warnings
        if not threshold_problems:
            coverage = _coverage(combos, data.get("sweep"), thresholds)
            if _enforcing(data):
                threshold_problems += coverage
            else:
                warnings += [f"{threshold_path}: {where}: {message} (record-only run, not an error)"
                             for where, message in coverage]

    if problems or threshold_problems:
        raise ConfigError(path, problems, also=[(threshold_path, threshold_problems)])
    assert config is not None
    warnings += _advice(config)
    return Suite(
        config=config,
        config_path=path,
        threshold_path=threshold_path,
        thresholds=thresholds,
        combos=combos,
        warnings=warnings,
        backend=backends.backend_for_image(config.container.image).name,
        files_hash=hashlib.sha256(config_bytes + threshold_bytes).hexdigest(),
    )


def merge_under(defaults: dict[str, Any], overrides: Any) -> Any:
    """Deep merge: dicts key by key, anything else (scalars, lists) from `overrides` wins."""
    if not isinstance(overrides, dict):
        return copy.deepcopy(defaults) if overrides is None else overrides
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_under(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _enforcing(data: dict[str, Any]) -> bool:
    """enforce_thresholds as the model will read it (lax bool), before the model has run."""
    value = data.get("enforce_thresholds", True)
    return str(value).strip().lower() not in ("false", "0", "no", "off", "f", "n")


def _changeme_message(where: str, text: str, config_path: Path) -> str:
    if where == "threshold_json":
        names = threshold_candidates(config_path)
        listing = f": one of {', '.join(names)}" if names else ""
        return f"still '<changeme>' — set the threshold file for this GPU{listing}"
    return f"still '<changeme>' — {changeme_hint(where, text)}"


def _coverage(combos: list[Combo], sweep: Any, thresholds: dict[str, Any]) -> list[Problem]:
    combinations = sweep.get("combinations") if isinstance(sweep, dict) else None
    combinations = combinations if isinstance(combinations, dict) else None  # the model reports the type
    declared = list(combinations) if combinations else [DEFAULT_COMBO]
    missing, extra = cell_coverage(combos, declared, list(thresholds))
    problems: list[Problem] = []
    for combo in missing:
        problems.append((join_path("", combo.cell), "missing: the config runs this combo but the threshold file "
                         "has no cell for it; add one, drop the combo from sweep.runs, or set "
                         "enforce_thresholds to false for a record-only run"))
    uncovered = [c.cell for c in missing]
    for cell in extra:
        hint = did_you_mean(cell, uncovered) or did_you_mean(cell, declared)
        problems.append((join_path("", cell), "matches no combo in the config's sweep.combinations"
                         f"{hint}; fix the key or remove the cell"))
    return problems


def _advice(config: SuiteConfig) -> list[str]:
    """Things that load fine but probably do not do what the user wants."""
    notes: list[str] = []
    backend = backends.backend_for_image(config.container.image)
    if config.checkpoint.enforce and not backend.checkpoint_test:
        notes.append(f"checkpoint.enforce is true but the image is not {backends.labels_with('checkpoint_test')}; "
                     "the checkpoint stage will be skipped")
    return notes
