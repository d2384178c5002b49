"""Primus entry point: `primus-cli direct [--log_file P] -- train pretrain --config <yaml> [overrides]`.

cwd is the Primus root and the YAML path is relative to it. Worker lines are tee'd into
`--log_file`; the runner's own lines go to the console only. Checkpoints live in
`<workspace>/<work_group>/<user_name>/<exp_name>/checkpoints` as the YAML resolves them
(empty parts skipped): a value the YAML pins wins over the PRIMUS_* variables. Overrides are parsed
as the Primus version in SIM_PRIMUS_VERSION parses them (primus_overrides), and what Megatron
refuses at start (a string recompute_granularity, FSDP2 with the distributed optimizer) fails here too.
"""
from __future__ import annotations

import os
import re
import socket
import sys
from datetime import datetime
from pathlib import Path

from . import primus_overrides as po
from . import primus_text as pt
from .engine import Engine, install_signal_handlers
from .models import model_by_name
from .output import Output
from .spec import JobSpec, apply_common_env
from .voices import PrimusVoice

EXIT_BAD_CONFIG = 2
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}")


def read_flat_yaml(text: str, env: dict) -> dict[str, str]:
    """Leaf `key: value` pairs of a Primus experiment YAML (last one wins), `${VAR:default}` resolved."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith(("#", "-")) or ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip().strip('"').strip("'")
        if value:
            values[key.strip()] = _PLACEHOLDER.sub(lambda m: _placeholder(m, env), value)
    return values


def _placeholder(match: re.Match, env: dict) -> str:
    """Primus's rule: `${VAR:default}` is VAR when set (even empty), else default; `${VAR}` must be set."""
    name, default = match.group(1), match.group(2)
    if name in env:
        return env[name]
    if default is None:
        raise SystemExit(f"ValueError: Environment variable '{name}' is required but not set.")
    return default


def split_command(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(`direct` options, python CLI tokens after `--`)."""
    if not argv or argv[0] != "direct":
        raise SystemExit("primus-cli (simulated): only `direct` mode is available: "
                         "primus-cli direct [--log_file PATH] -- train pretrain --config <yaml> ...")
    options: dict[str, str] = {}
    rest = argv[1:]
    while rest and rest[0] != "--":
        option = rest.pop(0)
        if option in ("--log_file", "--config", "--script", "--env", "--patch") and rest:
            options[option[2:]] = rest.pop(0)
        else:
            options[option.lstrip("-")] = "1"
    return options, rest[1:]


def spec_from(config_path: Path, yaml_values: dict[str, str], overrides: dict[str, object], env: dict) -> JobSpec:
    merged: dict[str, object] = {**yaml_values, **overrides}
    model_name = str(yaml_values.get("model", "")).removesuffix(".yaml") or config_path.name.split("-")[0]
    try:
        model = model_by_name(model_name)
    except KeyError:
        model = model_by_name("llama3.1_8B")

    def as_int(key: str, default: int) -> int:
        try:
            return int(float(str(merged.get(key, default))))
        except ValueError:
            raise SystemExit(f"primus: --{key} must be an integer, got {merged.get(key)!r}") from None

    precision = "FP8" if str(merged.get("fp8", "")).lower() in ("hybrid", "e4m3") else config_path.name.split("-")[1] \
        if config_path.name.count("-") >= 2 else "BF16"
    spec = JobSpec(backend="primus", model=model, micro_batch=as_int("micro_batch_size", 2),
                   global_batch=as_int("global_batch_size", 128), train_iters=as_int("train_iters", 50),
                   seq=as_int("seq_length", model.seq), tp=as_int("tensor_model_parallel_size", 1),
                   pp=as_int("pipeline_model_parallel_size", 1), precision=precision, master_port=1234,
                   gpu_name=config_path.parent.name.upper(),
                   primus_style=(env.get("SIM_PRIMUS_STYLE") or "b3").lower(),
                   colour=env.get("SIM_PRIMUS_COLOR", "1") != "0")
    if spec.primus_style not in pt.STYLES:
        raise SystemExit(f"SIM_PRIMUS_STYLE={spec.primus_style!r}: expected one of {', '.join(pt.STYLES)}")
    # The YAML decides: its placeholders were resolved from the env above; a pinned value (the 405B
    # YAML's exp_name) is not reachable through PRIMUS_EXP_NAME.
    exp_root = Path(*[p for p in (yaml_values.get("workspace", "./output"), yaml_values.get("work_group", ""),
                                  yaml_values.get("user_name", ""), yaml_values.get("exp_name", ""))
                      if p])
    save = merged.get("save")
    if save and save != "null":
        spec.save_dir = Path(str(save)) if save is not True else exp_root / "checkpoints"
        spec.save_interval = as_int("save_interval", 20000)
    load = merged.get("load")
    if load and load not in ("null", True):
        spec.load_dir = Path(str(load))
    spec.disable_last_saving = str(merged.get("disable_last_saving", "true")).lower() == "true"
    checked = megatron_values(yaml_values, overrides)
    spec.startup_errors = po.megatron_refusals(checked)
    spec.extra_args = {**checked, **{f"cli:{k}": v for k, v in overrides.items()}}
    return apply_common_env(spec, env)


# The pre_trainer module preset's values under the experiment YAML (Primus v0.5.0 and later).
PRESET = {"use_torch_fsdp2": False, "use_distributed_optimizer": True, "recompute_granularity": None}


def megatron_values(yaml_values: dict[str, str], overrides: dict[str, object]) -> dict[str, object]:
    """The values Megatron checks at start: preset, then the YAML (typed as YAML loads it), then the
    overrides as the chosen Primus version parsed them, set as they are (no null-to-None step)."""
    values = dict(PRESET)
    values.update({k: po.yaml_scalar(yaml_values[k]) for k in PRESET if k in yaml_values})
    values.update({k: overrides[k] for k in PRESET if k in overrides})
    return values


def main(argv: list[str]) -> int:
    install_signal_handlers()
    env = dict(os.environ)
    options, python_cli = split_command(argv)
    host = socket.gethostname()
    node_rank = int(env.get("NODE_RANK", "0") or 0)
    out = Output(options.get("log_file"), truncate=True)

    def runner(level: str, message: str) -> None:
        out.console(pt.runner_line(datetime.now(), node_rank, host, level, message))

    try:
        if python_cli[:2] != ["train", "pretrain"]:
            runner("ERROR", f"[direct] unsupported command: {' '.join(python_cli[:2]) or '(none)'}")
            return EXIT_BAD_CONFIG
        overrides = po.parse(po.version_from(env), python_cli[2:])
        config = overrides.pop("config", None)
        if not isinstance(config, str):
            runner("ERROR", "[direct] train pretrain needs --config <experiment yaml>")
            return EXIT_BAD_CONFIG
        config_path = Path(config)
        if not config_path.is_file():
            out.worker("Traceback (most recent call last):",
                       f'  File "{Path.cwd() / "primus/cli/main.py"}", line 134, in <module>',
                       "    main()",
                       f"FileNotFoundError: [Errno 2] No such file or directory: '{config}'")
            runner("ERROR", f"[direct] torchrun exited with code {EXIT_BAD_CONFIG}")
            return EXIT_BAD_CONFIG
        spec = spec_from(config_path, read_flat_yaml(config_path.read_text(), env), overrides, env)
        out.console("==========================================",
                    "  Primus Direct Launch Configuration",
                    "==========================================",
                    "  Run Mode        : torchrun",
                    f"    NNODES          : {spec.nnodes}",
                    f"    NODE_RANK       : {spec.node_rank}",
                    f"    GPUS_PER_NODE   : {spec.gpus_per_node}",
                    f"    MASTER_ADDR     : {spec.master_addr}",
                    f"    MASTER_PORT     : {spec.master_port}",
                    f"    Executing: torchrun --nproc_per_node {spec.gpus_per_node} --nnodes {spec.nnodes} "
                    f"--node_rank {spec.node_rank} --master_addr {spec.master_addr} --master_port {spec.master_port} "
                    f"primus/cli/main.py {' '.join(python_cli)} 2>&1 | tee {options.get('log_file', 'logs/log.txt')}")
        code = Engine(spec, PrimusVoice(spec, out)).run()
        if code == 0:
            runner("INFO", "[direct] torchrun finished successfully (code 0)")
        elif code > 128:
            runner("ERROR", f"[direct] torchrun crashed due to signal {code - 128}")
        else:
            runner("ERROR", f"[direct] torchrun exited with code {code}")
        return code
    finally:
        out.close()
        sys.stdout.flush()
