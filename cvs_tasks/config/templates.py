"""The packaged templates (`configs/`, `thresholds/`, `cluster/` in `cvs_tasks.templates`): list and copy.

Templates are kept as JSON only; each is also offered as annotated TOML (`annotate`), generated
when copied, so the two formats can never drift apart.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cvs_tasks.config.annotate import annotated_toml
from cvs_tasks.config.errors import did_you_mean
from cvs_tasks.errors import BadInput
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
