"""The threshold file: cells (`MBS=..,GBS=..,PRECISION=..` or `default`) -> metric -> spec.

Also where the loader finds it: relative to the config's folder first, then the packaged
`thresholds/` folder (`cvs_tasks.templates`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cvs_tasks.config.errors import Problem, did_you_mean, join_path, read_object, validate_model
from cvs_tasks.config.models import Number
from cvs_tasks.config.placeholders import strip_comments
from cvs_tasks.config.sweep import DEFAULT_COMBO, parse_combo_key
from cvs_tasks.judge import kinds
from cvs_tasks.metrics import catalog
from cvs_tasks.templates import template_dir

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
"""The parent of the `cvs_tasks` package directory: a checkout, or site-packages for a wheel install
(`cvs_tasks.templates.checkout_root` tells them apart)."""
THRESHOLDS_DIR = template_dir("thresholds")

KNOWN_METRICS = catalog.names()
"""The metric names of ``metrics.catalog`` when this module loaded (the checks below ask the catalog itself)."""


MAX_BASELINE_RUNS = 1000
"""Most past runs a baseline reads (a larger count is a typo; SQLite takes no 30-digit LIMIT)."""


class ThresholdSpec(BaseModel):
    """One metric's gate. `optional` turns a missing value into SKIPPED instead of FAIL.

    What each kind needs and does is its row in ``judge.kinds``; this model only carries the fields.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: str = Field(description=kinds.describe())
    value: Number | None = Field(None, description="The bound, in the metric's unit.")
    unit: str | None = Field(None, description="The unit of value, stated: it must be the metric's "
                                               "(max_ms and min_tok_s state ms and tok/s/GPU).")
    optional: bool = Field(False, description="true: a metric the backend does not produce is SKIPPED, not FAIL.")
    tolerance_pct: Number | None = Field(None, description="within / baseline: allowed distance in percent.")
    reference: str | None = Field(None, description="min_ratio: the metric to divide by.")
    runs: int | None = Field(None, le=MAX_BASELINE_RUNS,
                             description="baseline: median of the last this many PASS runs (default 5).")
    min_runs: int | None = Field(None, le=MAX_BASELINE_RUNS,
                                 description="baseline: RECORD until the history holds this many (default 3).")

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, name: str) -> str:
        if kinds.resolve(name)[0] is None:
            known = kinds.names()
            raise ValueError(f"unknown threshold kind {name!r}{did_you_mean(name, known)}; use one of "
                             f"{', '.join(known)}")
        return name

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, name: str | None) -> str | None:
        if name is not None and name not in catalog.units():
            known = sorted(catalog.units())
            raise ValueError(f"unknown unit {name!r}{did_you_mean(name, known)}; units: {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _needs(self) -> "ThresholdSpec":
        wrong = kinds.problems(self)
        if wrong:
            raise ValueError("; ".join(wrong))
        return self

    def stated_unit(self) -> str | None:
        """The unit the spec states: its ``unit``, else the one its kind's spelling bakes in."""
        return self.unit or kinds.spelled_unit(self.kind)


Thresholds = dict[str, dict[str, ThresholdSpec]]


def load_threshold_file(path: Path) -> tuple[Thresholds, bytes, list[Problem], list[str]]:
    """(cells, raw bytes, problems, warnings). Unreadable files raise ConfigError naming the file."""
    raw, data = read_object(path, "threshold")
    cells: Thresholds = {}
    problems: list[Problem] = []
    warnings: list[str] = []
    for key, cell in strip_comments(raw).items():
        where = join_path("", key)
        if key != DEFAULT_COMBO and parse_combo_key(key) is None:
            problems.append((where, "invalid cell key; write MBS=<m>,GBS=<g>,PRECISION=<p> "
                             "(the sweep key) or 'default'"))
            continue
        if not isinstance(cell, dict):
            problems.append((where, 'must be an object of metric -> spec, e.g. '
                             '{"training.throughput_per_gpu": {"kind": "min", "value": 400}}'))
            continue
        specs: dict[str, ThresholdSpec] = {}
        for metric, spec_data in cell.items():
            metric_where = join_path(where, metric)
            if metric == "training" and isinstance(spec_data, dict):
                problems.append((metric_where, "a table named 'training': in TOML quote the metric name, "
                                 '"training.throughput_per_gpu" = {kind = "min", value = 400} '
                                 "(an unquoted dotted key makes nested tables)"))
                continue
            if not metric.startswith("training."):
                problems.append((metric_where, "metric names start with 'training.'"
                                 f"{did_you_mean('training.' + metric, catalog.names())}"))
                continue
            spec, spec_problems = validate_model(ThresholdSpec, spec_data, metric_where)
            problems += spec_problems
            if spec is None:
                continue
            known = catalog.get(metric)
            stated = spec.stated_unit()
            if known is not None and stated is not None and stated != known.unit:
                mismatch = f"{metric} is in {known.unit}, not {stated}"
                if spec.unit is not None:
                    problems.append((join_path(metric_where, "unit"), f"{mismatch}: state the metric's unit"))
                    continue
                warnings.append(f"{path}: {metric_where}: kind {spec.kind!r} states its bound in {stated}, but "
                                f"{mismatch}; the bound is compared as written")
            specs[metric] = spec
            if known is None:
                warnings.append(f"{path}: {metric_where}: not a metric the harness produces"
                                f"{did_you_mean(metric, catalog.names())}; it will only ever be missing")
        cells[key] = specs
    return cells, data, problems, warnings


def expected_threshold_name(config_path: Path, gpu_name: str) -> str | None:
    """`mi3xx_megatron_llama-3.1-8b_single.json` + MI300X -> `mi300x_megatron_llama-3.1-8b_single_threshold.json`."""
    stem = config_path.stem
    if "_" not in stem or not gpu_name:
        return None
    return f"{gpu_name.strip().lower()}_{stem.split('_', 1)[1]}_threshold.json"


def find_threshold_file(
    threshold_json: str, config_path: Path, gpu_name: str, search_dirs: list[Path] | None = None,
) -> tuple[Path | None, str | None]:
    """(the threshold file, None) or (None, what went wrong). Pure apart from existence checks.

    A non-empty `threshold_json` is a path (JSON or TOML): absolute, or relative to the config's folder, then to
    each of `search_dirs` (default: the packaged `thresholds/`). An empty one means the single
    `*threshold.json` next to the config, or the SKU-named file for this config.
    """
    config_dir = config_path.resolve().parent
    dirs = [config_dir] + (search_dirs if search_dirs is not None else [THRESHOLDS_DIR])
    if threshold_json.strip():
        given = Path(threshold_json.strip()).expanduser()
        tried = [given] if given.is_absolute() else [d / given for d in dirs]
        for candidate in tried:
            if candidate.is_file():
                return candidate, None
        return None, "threshold file not found; tried " + ", ".join(str(t) for t in tried)
    expected = expected_threshold_name(config_path, gpu_name)
    named = [expected, str(Path(expected).with_suffix(".toml"))] if expected else []
    beside = sorted(p for pattern in ("*threshold.json", "*threshold.toml") for p in config_dir.glob(pattern))
    if len(beside) == 1:
        return beside[0], None
    for name in named:
        if config_dir / name in beside:
            return config_dir / name, None
    if beside:
        names = ", ".join(p.name for p in beside)
        return None, f"is empty and several threshold files sit next to the config ({names}); name one here"
    for directory in dirs[1:]:
        for name in named:
            if (directory / name).is_file():
                return directory / name, None
    looked = f" or {expected} in {', '.join(str(d) for d in dirs[1:])}" if expected else ""
    return None, f"is empty and no *threshold.json (or .toml) file sits next to the config{looked}; set threshold_json"


def threshold_candidates(config_path: Path, search_dirs: list[Path] | None = None) -> list[str]:
    """Threshold file names that fit a config (for `<changeme>` hints): the SKU variants of its name."""
    stem = config_path.stem
    if "_" not in stem:
        return []
    rest = stem.split("_", 1)[1]
    dirs = [config_path.resolve().parent] + (search_dirs if search_dirs is not None else [THRESHOLDS_DIR])
    names = {p.name for d in dirs if d.is_dir() for ext in ("json", "toml")
             for p in d.glob(f"*_{rest}_threshold.{ext}")}
    return sorted(names)
