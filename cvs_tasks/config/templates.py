"""The packaged templates (`configs/`, `thresholds/`, `cluster/` in `cvs_tasks.templates`): list and
copy them, as JSON or as annotated TOML.

Templates are kept as JSON only; each is also offered as annotated TOML, generated when copied,
so the two formats can never drift apart: the same data, every field explained by a comment. The
comments come from where the fields are declared (the pydantic models' descriptions, the metric
catalog ``metrics.catalog``) plus two tables here for the free-form blocks (``train_params``,
``container.env``). There is no second hand-kept copy of any template: ``config.copy --format
toml`` writes ``annotated_toml``, and a test checks that every packaged template round-trips to
the same data. TOML has no null: a JSON ``null`` becomes a comment saying the key is unset (the
models' default).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel

from cvs_tasks.config.cluster import _ClusterFile, _Node
from cvs_tasks.config.errors import _unwrap, did_you_mean
from cvs_tasks.config.models import SuiteConfig
from cvs_tasks.config.thresholds import ThresholdSpec
from cvs_tasks.errors import BadInput
from cvs_tasks.metrics import catalog
from cvs_tasks.templates import template_dir

TEMPLATE_DIRS: dict[str, Path] = {
    "config": template_dir("configs"),
    "threshold": template_dir("thresholds"),
    "cluster": template_dir("cluster"),
}

FORMATS = ("json", "toml")
"""Every template is offered in each of these (TOML generated from the JSON, with comments)."""

SHARED_PREFIXES = {"mi3xx": ("mi300x", "mi325x")}
"""Config name prefixes shared by several GPU SKUs, each with its own threshold files."""


@dataclass(frozen=True)
class Template:
    name: str
    kind: Literal["config", "threshold", "cluster"]
    path: Path
    thresholds: tuple[str, ...] = field(default=())
    """For a config: the threshold files made for it (one per GPU SKU)."""


def list_templates(pattern: str = "", dirs: dict[str, Path] | None = None) -> list[Template]:
    """Every packaged template whose name contains `pattern` (case-insensitive), configs first."""
    dirs = TEMPLATE_DIRS if dirs is None else dirs
    thresholds_dir = dirs.get("threshold")
    found: list[Template] = []
    for kind in ("config", "threshold", "cluster"):
        directory = dirs.get(kind)
        if directory is None or not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.json")):
            matched = thresholds_for(path.name, thresholds_dir) if kind == "config" else ()
            found.append(Template(path.name, kind, path, tuple(matched)))  # type: ignore[arg-type]
    needle = pattern.lower()
    return [t for t in found if needle in t.name.lower()]


def thresholds_for(config_name: str, thresholds_dir: Path | None) -> list[str]:
    """`mi3xx_megatron_llama-3.1-8b_single.json` -> the mi300x_ and mi325x_ threshold files for it."""
    stem = Path(config_name).stem
    if "_" not in stem or thresholds_dir is None or not thresholds_dir.is_dir():
        return []
    prefix, rest = stem.split("_", 1)
    skus = SHARED_PREFIXES.get(prefix.lower(), (prefix.lower(),))
    names = sorted(p.name for p in thresholds_dir.glob(f"*_{rest}_threshold.json"))
    return [n for n in names if n.lower().split("_", 1)[0] in skus]


def find_template(name: str, dirs: dict[str, Path] | None = None) -> Template:
    """A template by file name; `configs/<name>.json`, `training/megatron/x.json` or `x.toml` also work."""
    templates = list_templates("", dirs)
    wanted = Path(name).name
    if wanted.lower().endswith(".toml"):
        wanted = wanted[:-5] + ".json"
    for template in templates:
        if template.name == wanted:
            return template
    hint = did_you_mean(wanted, [t.name for t in templates])
    raise BadInput(f"no packaged template named {name!r}{hint}; see `invoke config.list`")


def copy_template(
    name: str,
    output: Path | str,
    *,
    with_thresholds: bool = False,
    overwrite: bool = False,
    dirs: dict[str, Path] | None = None,
    fmt: str | None = None,
) -> list[Path]:
    """Copy a template to `output` (a file path, or an existing folder); with `with_thresholds`, its
    threshold files go next to it. `fmt` "toml" writes annotated TOML (default: the output's
    suffix, else JSON). Returns the paths written. Never overwrites unless asked."""
    template = find_template(name, dirs)
    into_folder = str(output).endswith(("/", "\\"))
    output = Path(output).expanduser()
    folder = into_folder or output.is_dir()
    fmt = fmt or ("toml" if not folder and output.suffix.lower() == ".toml" else "json")
    if fmt not in FORMATS:
        raise BadInput(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    target = output / _named(template.name, fmt) if folder else output
    plan = [(template, target)]
    if with_thresholds:
        for t in template.thresholds:
            plan.append((find_template(t, dirs), target.parent / _named(t, fmt)))
    existing = [dst for _, dst in plan if dst.exists()]
    if existing and not overwrite:
        raise BadInput("not overwriting existing file(s): " + ", ".join(str(p) for p in existing)
                       + " (pass --force to replace them)")
    target.parent.mkdir(parents=True, exist_ok=True)
    for src, dst in plan:
        if fmt == "toml":
            dst.write_text(template_toml(src), encoding="utf-8")
        else:
            shutil.copyfile(src.path, dst)
    return [dst for _, dst in plan]


def template_toml(template: Template) -> str:
    """The annotated TOML form of a packaged template."""
    raw = json.loads(template.path.read_text(encoding="utf-8"))
    return annotated_toml(raw, template.kind, f"{template.path.parent.name}/{template.name}")


def _named(name: str, fmt: str) -> str:
    return str(Path(name).with_suffix("." + fmt))


# --- annotated TOML ------------------------------------------------------------------------------
Kind = Literal["config", "threshold", "cluster"]
WIDTH = 98

TRAIN_PARAM_NOTES = {
    "model_name": "Model family and size the launcher builds, e.g. llama3.1_8B (required).",
    "tokenizer_model": "Hugging Face repo id (or local path) of the tokenizer; gated repos need paths.hf_token_file.",
    "model_size": "Parameter count in billions, as the launcher expects it.",
    "sequence_length": "Tokens per sample.",
    "recompute": "1: activation recomputation (less memory, more compute).",
    "fsdp": "1: fully sharded data parallel.",
    "tensor_parallelism": "Tensor-parallel size (TP).",
    "pipeline_parallelism": "Pipeline-parallel size (PP).",
    "micro_batch_size": "Samples per GPU per micro-step (MBS); a sweep key sets it per combo.",
    "global_batch_size": "Samples per optimizer step over all GPUs (GBS); a sweep key sets it per combo.",
    "precision": "FP8, BF16, FP16, MXFP8 or MXFP4; a sweep key sets it per combo.",
    "training_iterations": "Optimizer steps each combo trains.",
    "megatron_root": "Megatron-LM checkout inside the image.",
}
ENV_NOTES = {
    "MASTER_ADDR": "Rendezvous address: the first host of the cluster file (a distributed run checks it).",
    "MASTER_PORT": "Rendezvous TCP port on MASTER_ADDR.",
    "NCCL_IB_HCA": "RDMA devices RCCL may use, e.g. bnxt_re0,...; required for a multi-node run.",
    "NCCL_SOCKET_IFNAME": "Network interface for RCCL's bootstrap traffic; required for a multi-node run.",
    "GLOO_SOCKET_IFNAME": "Network interface for torch.distributed's Gloo traffic; required for a multi-node run.",
    "NCCL_IB_GID_INDEX": "RoCE GID index (3 is RoCE v2 on most fabrics).",
    "NCCL_DEBUG": "RCCL log level: ERROR, WARN, INFO.",
}
SECTION_NOTES = {
    ("config", "sweep.combinations.*"): "One sweep cell; the keys below overlay train_params for this combo.",
    ("threshold", "*"): "The gates of the combo with this sweep key ('default' when the config has no sweep).",
    ("cluster", "node_dict.*"): "One key per node, in rank order (the first is the head).",
}


def annotated_toml(raw: dict[str, Any], kind: Kind, source: str = "") -> str:
    """The TOML text of ``raw`` (a parsed JSON template) with a comment on each field."""
    doc = tomlkit.document()
    origin = f" from {source}" if source else ""
    _comment(doc, f"cvs-tasks {kind} file, written{origin} by `invoke config.copy --format toml`. "
                  "Comments (#) explain each field; the file is read with the same checks as JSON.")
    for key, value in raw.items():
        if key.startswith("_") and isinstance(value, str):
            doc.add(tomlkit.nl())
            _comment(doc, value)
    if kind == "threshold":
        doc.add(tomlkit.nl())
        _comment(doc, "Each metric's spec:")
        for name, field in ThresholdSpec.model_fields.items():
            _comment(doc, f"  {name}: {field.description}")
    doc.add(tomlkit.nl())
    _fill(doc, {k: v for k, v in raw.items() if not k.startswith("_")}, kind, (), set())
    return tomlkit.dumps(doc)


def _fill(container: Any, data: dict[str, Any], kind: Kind, path: tuple[str, ...], seen: set[str]) -> None:
    """Plain keys first, then sub-tables (TOML needs that order), each after its comment."""
    simple = [(k, v) for k, v in data.items() if not _is_table(kind, path + (k,), v)]
    tables = [(k, v) for k, v in data.items() if _is_table(kind, path + (k,), v)]
    for key, value in simple:
        note = _note(kind, path + (key,), seen)
        if value is None:
            _comment(container, f"{key}: unset. {note or ''}".strip())
            continue
        if note:
            _comment(container, note)
        container.add(key, _value(value))
    for key, value in tables:
        table = tomlkit.table()
        note = _note(kind, path + (key,), seen)
        if note:  # first line under the [header]
            _comment(table, note)
        _fill(table, value, kind, path + (key,), seen)
        container.add(key, table)


def _is_table(kind: Kind, path: tuple[str, ...], value: Any) -> bool:
    """A dict becomes a [table] unless it is a threshold spec, a node entry or empty (inline)."""
    if not isinstance(value, dict) or not value:
        return False
    if kind == "threshold" and len(path) == 2:
        return False
    return not (kind == "cluster" and len(path) == 2 and path[0] == "node_dict")


def _value(value: Any) -> Any:
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update({k: _value(v) for k, v in value.items() if v is not None})
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_value(v) for v in value)
        if len(value) > 2 or sum(len(str(v)) for v in value) > 60:
            array.multiline(True)
        return array
    return value


def _note(kind: Kind, path: tuple[str, ...], seen: set[str]) -> str | None:
    """The comment for the key at ``path``; a threshold metric's note is given once per file."""
    if kind == "threshold":
        if len(path) == 1:
            return SECTION_NOTES[(kind, "*")]
        if len(path) == 2 and path[1] not in seen:
            seen.add(path[1])
            known = catalog.get(path[1])
            return known.note if known else "Not a metric the harness produces; it will only ever be missing."
        return None
    if kind == "config":
        if path[:1] == ("train_params",) and len(path) == 2:
            return TRAIN_PARAM_NOTES.get(path[1])
        if path[:2] == ("container", "env") and len(path) == 3:
            return ENV_NOTES.get(path[2])
        if path[:2] == ("sweep", "combinations") and len(path) == 3:
            return SECTION_NOTES[(kind, "sweep.combinations.*")]
        if path[:2] == ("sweep", "combinations") and len(path) == 4:
            return TRAIN_PARAM_NOTES.get(path[3])
        return _model_note(SuiteConfig, path)
    if path[:1] == ("node_dict",) and len(path) == 2:
        if "node_dict.*" in seen:
            return None
        seen.add("node_dict.*")
        settings = " ".join(f"{n}: {f.description}" for n, f in _Node.model_fields.items() if f.description)
        return f"{SECTION_NOTES[(kind, 'node_dict.*')]} Its settings: {settings}"
    return _model_note(_ClusterFile, path)


def _model_note(model: type[BaseModel], path: tuple[str, ...]) -> str | None:
    """The description of the model field reached by following ``path``."""
    current: Any = model
    description = None
    for key in path:
        current = _unwrap(current)
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(key)
        if field is None:
            return None
        description, current = field.description, field.annotation
    return description


def _comment(container: Any, text: str) -> None:
    for line in textwrap.wrap(text, WIDTH - 2, break_long_words=False, break_on_hyphens=False) or [""]:
        container.add(tomlkit.comment(line))
