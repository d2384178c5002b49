"""The threshold file: cells (`MBS=..,GBS=..,PRECISION=..` or `default`) -> metric -> spec.

Also where the loader finds it: relative to the config's folder first, then the packaged
`thresholds/` folder (`cvs_tasks.templates`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cvs_tasks.config.errors import Problem, did_you_mean, join_path
from cvs_tasks.config.files import read_object
from cvs_tasks.config.models import Number
from cvs_tasks.config.placeholders import strip_comments
from cvs_tasks.config.sweep import DEFAULT_COMBO, parse_combo_key
from cvs_tasks.config.validation import validate_model
from cvs_tasks.templates import template_dir

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
"""The parent of the `cvs_tasks` package directory: a checkout, or site-packages for a wheel install
(`cvs_tasks.templates.checkout_root` tells them apart)."""
THRESHOLDS_DIR = template_dir("thresholds")

Kind = Literal["min", "max", "max_ms", "min_tok_s", "within", "min_ratio", "info", "baseline"]
METRIC_NOTES = {
    "training.throughput_per_gpu": "TFLOP/s per GPU: harmonic mean of the steady-state steps.",
    "training.tokens_per_gpu": "Tokens per second per GPU: harmonic mean of the steady-state steps.",
    "training.elapsed_time_per_iteration": "Step time in ms: mean of the steady-state steps.",
    "training.mem_usage": "GPU memory in use, ratio 0-1 (ROCm 'mem usages:', Primus hip usage_ratio). "
                          "Primus: recorded, not gated by an optional spec; write optional = false to gate it.",
    "training.scaling_efficiency_pct": "Multi-node scaling efficiency in % against scaling_baseline "
                                       "(distributed only).",
    "training.steps_to_target": "First step whose loss reached convergence.target_value.",
    "training.time_to_target_seconds": "Training seconds until that step.",
    "training.step_time_p50_ms": "Median step time in ms.",
    "training.step_time_p95_ms": "95th percentile step time in ms.",
    "training.lm_loss": "Language-model loss.",
    "training.grad_norm": "Gradient norm.",
    "training.tflops_recomputed": "TFLOP/s per GPU recomputed from tokens/s with the harness's FLOPs formula.",
}
"""Every metric a threshold cell may name, with what it measures (annotated TOML templates)."""
KNOWN_METRICS = tuple(METRIC_NOTES)


MAX_BASELINE_RUNS = 1000
"""Most past runs a baseline reads (a larger count is a typo; SQLite takes no 30-digit LIMIT)."""


class ThresholdSpec(BaseModel):
    """One metric's gate. `optional` turns a missing value into SKIPPED instead of FAIL."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: Kind = Field(description="min / min_tok_s: fail below value; max / max_ms: fail above value; within: "
                                   "value +/- tolerance_pct; min_ratio: actual / reference below value fails; "
                                   "info: recorded, never gated; baseline: against the median of past runs.")
    value: Number | None = Field(None, description="The bound, in the metric's unit.")
    optional: bool = Field(False, description="true: a metric the backend does not produce is SKIPPED, not FAIL.")
    tolerance_pct: Number | None = Field(None, description="within / baseline: allowed distance in percent.")
    reference: str | None = Field(None, description="min_ratio: the metric to divide by.")
    runs: int | None = Field(None, le=MAX_BASELINE_RUNS,
                             description="baseline: median of the last this many PASS runs (default 5).")
    min_runs: int | None = Field(None, le=MAX_BASELINE_RUNS,
                                 description="baseline: RECORD until the history holds this many (default 3).")

    @model_validator(mode="after")
    def _needs(self) -> "ThresholdSpec":
        wrong: list[str] = []
        if self.kind == "baseline":
            if self.tolerance_pct is None or self.tolerance_pct < 0:
                wrong.append("kind 'baseline' needs tolerance_pct >= 0 (how far from the median of past runs)")
            if (self.runs is not None and self.runs < 1) or (self.min_runs is not None and self.min_runs < 1):
                wrong.append("kind 'baseline' needs runs >= 1 and min_runs >= 1")
            elif self.runs is not None and self.min_runs is not None and self.min_runs > self.runs:
                wrong.append(f"kind 'baseline': min_runs ({self.min_runs}) cannot exceed runs ({self.runs})")
        elif self.runs is not None or self.min_runs is not None:
            wrong.append("runs and min_runs belong to kind 'baseline' only")
        if self.kind not in ("info", "baseline") and self.value is None:
            wrong.append(f"kind {self.kind!r} needs a numeric value")
        if self.kind == "within":
            if self.tolerance_pct is None or self.tolerance_pct < 0:
                wrong.append("kind 'within' needs tolerance_pct >= 0 (percent either side of value)")
            if self.value is not None and self.value < 0:
                wrong.append("kind 'within' needs value >= 0 (a negative value inverts the band)")
        if self.kind == "min_ratio" and not self.reference:
            wrong.append("kind 'min_ratio' needs reference (the metric to divide by)")
        if wrong:
            raise ValueError("; ".join(wrong))
        return self


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
                                 f"{did_you_mean('training.' + metric, KNOWN_METRICS)}"))
                continue
            spec, spec_problems = validate_model(ThresholdSpec, spec_data, metric_where)
            problems += spec_problems
            if spec is None:
                continue
            specs[metric] = spec
            if metric not in KNOWN_METRICS:
                warnings.append(f"{path}: {metric_where}: not a metric the harness produces"
                                f"{did_you_mean(metric, KNOWN_METRICS)}; it will only ever be missing")
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
