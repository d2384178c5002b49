"""Compare what a job asked for with what the trainer says it runs; name each difference and its
likely cause; store the result in the stage record and read it back for the report.

`Asked` holds the planned values (None: not asked, so not compared); `check_effective` returns a
`ConfigCheck`: the effective configuration plus one `Mismatch` per parameter that differs. A
mismatch fails the combo: metrics of a run that is not the asked run would be misattributed.

The likely cause comes from running the real launchers (docs/launch_contracts.md): which variable
a script reads under another name, which it pins, which only newer images read. A Megatron-LM
family script's causes are in its family row (``cvs_tasks.families``); Primus's are below
(``LAUNCHER_CAUSES``). Anything else gets a generic cause that names the launcher and the variable
it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cvs_tasks import backends
from cvs_tasks.families import family_cause, normalise_precision
from cvs_tasks.jobs.spec import JobSpec
from cvs_tasks.verify.effective import BOOL_ARGS, INT_ARGS, EffectiveConfig


@dataclass(frozen=True)
class Asked:
    """The values a job planned; `launcher` / `script` pick the likely causes."""

    launcher: str
    script: str
    world_size: int | None = None
    nnodes: int | None = None
    micro_batch_size: int | None = None
    global_batch_size: int | None = None
    seq_length: int | None = None
    train_iters: int | None = None
    tensor_model_parallel_size: int | None = None
    pipeline_model_parallel_size: int | None = None
    precision: str | None = None
    recompute: bool | None = None
    fsdp: bool | None = None
    mock_data: bool | None = None
    tokenizers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mismatch:
    param: str
    asked: Any
    actual: Any
    cause: str

    @property
    def text(self) -> str:
        """`seq_length 2048 != 4096 (asked): <cause>`: the trainer's value first, as it ran."""
        return f"{self.param} {_show(self.actual)} != {_show(self.asked)} (asked): {self.cause}"

    def to_dict(self) -> dict[str, Any]:
        return {"param": self.param, "asked": self.asked, "actual": self.actual, "cause": self.cause}


@dataclass(frozen=True)
class ConfigCheck:
    effective: EffectiveConfig | None
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def reason(self) -> str:
        return "the trainer does not run what was asked: " + "; ".join(m.text for m in self.mismatches)

    def to_dict(self) -> dict[str, Any]:
        return {"effective": self.effective.to_dict() if self.effective else None,
                "mismatches": [m.to_dict() for m in self.mismatches]}


def asked_from_job(job: JobSpec, gpus_per_node: int) -> Asked:
    """What `job` asks the trainer for (the wrapper's values), and which launcher it goes through
    (the backend says: ``Backend.asked``)."""
    return Asked(
        **backends.get(job.backend).asked(job),
        world_size=job.nnodes * gpus_per_node,
        nnodes=job.nnodes,
        micro_batch_size=_int(job.mbs),
        global_batch_size=_int(job.gbs),
        seq_length=_int(job.param("sequence_length")),
        train_iters=job.iterations,
        tensor_model_parallel_size=_int(job.param("tensor_parallelism")),
        pipeline_model_parallel_size=_int(job.param("pipeline_parallelism")),
        precision=normalise_precision(job.precision),
        recompute=job.param("recompute") == "1",
        fsdp=job.param("fsdp") == "1",
    )


_SIZES = ("world_size", "nnodes", "micro_batch_size", "global_batch_size", "seq_length",
          "tensor_model_parallel_size", "pipeline_model_parallel_size")


def check_effective(asked: Asked, effective: EffectiveConfig | None) -> ConfigCheck:
    """Every parameter the trainer states that differs from the asked one (None: nothing to check)."""
    if effective is None:
        return ConfigCheck(None)
    found: list[tuple[str, Any, Any]] = []
    for name in _SIZES:
        want, got = getattr(asked, name), getattr(effective, name)
        if want is not None and got is not None and want != got:
            found.append((name, want, got))
    iterations = _iterations(effective)
    if asked.train_iters is not None and iterations is not None and iterations < asked.train_iters:
        shown = (f"{iterations} (--exit-interval {effective.exit_interval})"
                 if iterations != effective.train_iters else iterations)
        found.append(("train_iters", asked.train_iters, shown))
    elif asked.train_iters is not None and effective.train_iters not in (None, asked.train_iters):
        found.append(("train_iters", asked.train_iters, effective.train_iters))
    if asked.precision and effective.precision and asked.precision != effective.precision:
        recipe = f" ({effective.fp8_recipe} recipe)" if effective.fp8_recipe else ""
        found.append(("precision", asked.precision, effective.precision + recipe))
    for name in ("recompute", "fsdp"):
        want, got = getattr(asked, name), getattr(effective, name)
        running = got not in (None, "none", False) if got is not None else None
        if want is not None and running is not None and want != running and not _explained(effective, name):
            found.append((name, _on_off(want, name), got if isinstance(got, str) else _on_off(got, name)))
    if (asked.mock_data is not None and effective.mock_data is not None and asked.mock_data != effective.mock_data
            and not _explained(effective, "mock_data")):
        found.append(("mock_data", asked.mock_data, effective.mock_data))
    if asked.tokenizers and effective.tokenizer and effective.tokenizer not in asked.tokenizers:
        found.append(("tokenizer", asked.tokenizers[0], effective.tokenizer))
    mismatches = [Mismatch(name, want, got, likely_cause(asked.launcher, asked.script, name))
                  for name, want, got in found]
    return ConfigCheck(effective, _string_mismatches(asked, effective) + mismatches)


# The typed arguments behind each compared parameter: a string among them is that difference's cause.
_ARGUMENTS = {"fsdp": ("use_torch_fsdp2", "use_custom_fsdp", "use_megatron_fsdp"),
              "recompute": ("recompute_granularity",), "mock_data": ("mock_data",)}


def _explained(effective: EffectiveConfig, param: str) -> bool:
    return any(name in effective.strings for name in _ARGUMENTS[param])


def _asked_value(asked: Asked, name: str) -> tuple[bool, Any]:
    """(asked?, the Python value the harness wants Megatron to hold for argument `name`)."""
    if name == "recompute_granularity":
        return asked.recompute is not None, "full" if asked.recompute else None
    if name in BOOL_ARGS:
        value = asked.mock_data if name == "mock_data" else asked.fsdp
        return value is not None, value
    if name in INT_ARGS:
        value = getattr(asked, name)
        return value is not None, value
    return False, None


def _string_mismatches(asked: Asked, effective: EffectiveConfig) -> list[Mismatch]:
    """Each asked argument that reached the trainer as a string: compared by type, not by spelling
    (`use_torch_fsdp2 'false'` is on, whatever it reads like)."""
    found = []
    for name, text in effective.strings.items():
        was_asked, want = _asked_value(asked, name)
        if was_asked:
            found.append(Mismatch(name, want, repr(text), string_cause(asked.launcher, asked.script, name, text)))
    return found


def _iterations(effective: EffectiveConfig) -> int | None:
    """Iterations the trainer will run: train_iters, cut short by an exit interval below it."""
    if effective.train_iters is None:
        return None
    if effective.exit_interval and effective.exit_interval < effective.train_iters:
        return effective.exit_interval
    return effective.train_iters


def _on_off(value: bool, name: str) -> str:
    if name == "recompute":
        return "full" if value else "none"
    return "on" if value else "off"


def _show(value: Any) -> str:
    return str(value)


def _int(text: str | None) -> int | None:
    text = str(text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


# --- the likely cause of a difference, per launcher ---------------------------------------------
# Launchers that are not a model family: launcher -> parameter -> cause.
LAUNCHER_CAUSES: dict[str, dict[str, str]] = {
    "primus": {
        "seq_length": "Primus takes seq_length from the experiment YAML when it is not passed as an override",
        "recompute": "Primus takes recompute_* from the experiment YAML when it is not passed as an override",
        "fsdp": "Primus takes use_torch_fsdp2 from the experiment YAML (the 70B YAML turns FSDP2 on)",
        "mock_data": "the experiment YAML sets mock_data",
        "world_size": "primus-cli did not get NNODES / NODE_RANK / MASTER_ADDR as the wrapper set them",
    },
}

VARIABLE = {
    "world_size": "NNODES", "nnodes": "NNODES", "seq_length": "the sequence length",
    "micro_batch_size": "the micro batch", "global_batch_size": "the global batch",
    "train_iters": "the iteration count", "tensor_model_parallel_size": "TP",
    "pipeline_model_parallel_size": "PP", "precision": "the precision", "recompute": "RECOMPUTE",
    "fsdp": "FSDP", "mock_data": "MOCK_DATA", "tokenizer": "TOKENIZER_MODEL",
}


def likely_cause(launcher: str, script: str, param: str) -> str:
    """Why `param` may differ, for launcher `launcher` (a family name or `primus`) run through `script`."""
    known = family_cause(launcher, param) or LAUNCHER_CAUSES.get(launcher, {}).get(param)
    if known:
        return known.format(script=script)
    return f"{script} did not pass {VARIABLE.get(param, param)} through to the trainer as the wrapper set it"


# What a string under a bool argument turns on when Megatron reads it by truthiness.
STRING_ON = {"use_torch_fsdp2": "FSDP2 is on", "use_custom_fsdp": "custom FSDP is on",
             "use_megatron_fsdp": "Megatron FSDP is on", "mock_data": "mock data is on"}
STRING_SOURCE = {
    "primus": "Primus sets an override or YAML value as its parser left it: a spelling this version keeps "
              "as text (docs/primus_overrides.md); pass True, False, None or a plain number",
}


def string_cause(launcher: str, script: str, name: str, text: str) -> str:
    """Why a typed argument that reached the trainer as text `text` is not what it looks like."""
    if name == "recompute_granularity":
        effect = (f"{text!r} is the string {text!r}, not None: Megatron's TransformerConfig raises "
                  f"'When using recompute_granuarlity: {text} must be \"full\"or \"selective\".' at start")
    elif name in STRING_ON:
        effect = (f"{text!r} is the string {text!r}, which is true in Python: {STRING_ON[name]}" if text else
                  "'' is the empty string, which is false in Python")
    else:
        effect = f"{text!r} is the string {text!r}, not a number Megatron can use"
    source = STRING_SOURCE.get(launcher, f"{script} passed it to the trainer as text")
    return f"{effect} ({source})"


# --- the check as a stage record stores it, and back (the report reads this) ---------------------
KEY = "effective_config"
MISMATCHES = "config_mismatches"
WARNINGS = "config_warnings"


def effective_record(check: ConfigCheck | None, warnings: list[str] | None = None) -> dict[str, Any]:
    """`record.data` entries: the effective config (None: no dump), every mismatch, any warning."""
    data: dict[str, Any] = {KEY: check.effective.to_dict() if check and check.effective else None,
                            MISMATCHES: [m.to_dict() for m in check.mismatches] if check else []}
    if warnings:
        data[WARNINGS] = list(warnings)
    return data


def effective_of(data: Mapping[str, Any]) -> EffectiveConfig | None:
    """The EffectiveConfig a record holds, or None (no dump, an older record, a damaged file)."""
    stored = data.get(KEY)
    return EffectiveConfig.from_dict(stored) if isinstance(stored, dict) else None


def mismatches_of(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    stored = data.get(MISMATCHES)
    return ([m for m in stored if isinstance(m, dict) and isinstance(m.get("param"), str)]
            if isinstance(stored, list) else [])


def effective_facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Report rows: what the trainer ran (one line) and whether it matched the plan."""
    if KEY not in data:
        return []  # a record from before the check existed, or a stage that never ran a job
    effective = effective_of(data)
    if effective is None:
        return [("Trainer ran", "not stated: no arguments dump in the log (not checked)")]
    mismatches = mismatches_of(data)
    check = ("as asked" if not mismatches else
             "; ".join(f"{m['param']} {m.get('actual')} != {m.get('asked')} ({m.get('cause', '')})"
                       for m in mismatches))
    return [("Trainer ran", describe(effective)), ("Config check", check)]


def describe(e: EffectiveConfig) -> str:
    """`16 GPUs (2 nodes), MBS 4, GBS 128, seq 8192, 20 iters, TP 1, PP 1, FP8 (delayed), ...`."""
    parts = []
    if e.world_size is not None:
        parts.append(f"{e.world_size} GPUs" + (f" ({e.nnodes} node{'s' if e.nnodes != 1 else ''})" if e.nnodes else ""))
    for label, value in (("MBS", e.micro_batch_size), ("GBS", e.global_batch_size), ("seq", e.seq_length),
                         ("iters", e.train_iters), ("exit interval", e.exit_interval),
                         ("TP", e.tensor_model_parallel_size), ("PP", e.pipeline_model_parallel_size),
                         ("CP", e.context_parallel_size), ("EP", e.expert_model_parallel_size)):
        if value is not None:
            parts.append(f"{label} {value}")
    if e.precision:
        parts.append(e.precision + (f" ({e.fp8_recipe})" if e.fp8_recipe else ""))
    if e.recompute is not None:
        parts.append(f"recompute {e.recompute}")
    if e.fsdp is not None:
        parts.append(f"FSDP {'on' if e.fsdp else 'off'}")
    if e.mock_data is not None:
        parts.append("mock data" if e.mock_data else "real data")
    if e.tokenizer:
        parts.append(f"tokenizer {e.tokenizer}")
    return ", ".join(parts)
