"""`invoke demo --fault NAME`: the demo with one fault injected into the simulated trainer, so a
newcomer sees what a failing run's report and console look like.

The shipped demo config (``configs/testbed/demo_host.json``) is never edited. The fault goes into
a copy written next to the runs (``<reports>/demo-configs/demo_host_<fault>.json``): the trainer
reads it from ``container.env`` (``SIM_FAULT``, see ``testbed/trainer/workspace/simtrainer/faults.py``),
and ``SIM_FAULT_PRECISION`` aims it at one combo, one whose precision is not the smoke cell's. So
the smoke test and the other combo pass and the report shows the failure beside what passed, as
a real sweep would. The copy is kept: its path is in the run's manifest, and `invoke report` or
`invoke all --config <copy>` read it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cvs_tasks.errors import BadInput


@dataclass(frozen=True)
class DemoFault:
    """One ``--fault`` choice: what the simulated trainer is told and what the report then shows."""

    name: str
    sim_fault: str  # the SIM_FAULT spec (name@step, slow_node=rank:factor)
    label: str  # a few words for `invoke --help demo`
    shows: str  # what the failing run shows, for the console's first line
    env: Mapping[str, str] = field(default_factory=dict)  # more SIM_* settings the fault needs
    watch: Mapping[str, float] = field(default_factory=dict)  # `watch` settings of the copy


HANG_S = "600"  # held until the harness stops the job (a NaN it read, or a stall)
STALL_TIMEOUT_S = 5.0  # the demo's `hang`: detected in seconds rather than the config's 30
SLOWDOWN = 1.5  # the slow node's step time over the thresholds' 1600 ms (bound: 1920 ms)

FAULTS = (
    DemoFault("oom", "oom@5", "HIP out of memory",
              "HIP out of memory at step 5: the combo fails with the OOM signature"),
    # The loss turns NaN at step 5 and the job then holds, as a real job still running its next
    # steps would: the harness must read the NaN while the job runs and stop it.
    DemoFault("nan", "nan_loss@5,hang@6", "NaN loss",
              "the loss turns NaN at step 5: the harness stops the job and fails the combo",
              env={"SIM_HANG_S": HANG_S}),
    DemoFault("hang", "hang@5", f"a stall, caught after {STALL_TIMEOUT_S:g} s",
              f"no iteration after step 4: after a {STALL_TIMEOUT_S:g} s stall timeout the combo fails as stalled",
              env={"SIM_HANG_S": HANG_S}, watch={"stall_timeout_s": STALL_TIMEOUT_S}),
    # The demo runs on one node: its "slow node" is that node, slowed. In a multi-node job one slow
    # node holds every other node at each collective, and the job misses the same gates.
    DemoFault("slow-node", f"slow_node=0:{SLOWDOWN:g}",
              f"the demo's one node steps {SLOWDOWN:g}x slower, missing the step-time and throughput gates",
              f"the demo's one node runs its steps {SLOWDOWN:g}x slower: the combo misses its step-time and "
              "throughput gates"),
)


def fault_help() -> str:
    """The ``--fault`` flag's help line, from the table."""
    return ("Inject a fault into the simulated trainer so the demo ends in a failing report: "
            + "; ".join(f"{f.name} ({f.label})" for f in FAULTS))


def fault_named(name: str) -> DemoFault:
    """The ``--fault`` choice called ``name``; BadInput (exit 2) listing the choices otherwise."""
    for fault in FAULTS:
        if fault.name == name:
            return fault
    raise BadInput(f"--fault: {name!r} is not a demo fault; choose one of: {', '.join(f.name for f in FAULTS)}")


def faulted_combo(config: Mapping[str, Any]) -> str:
    """The combo the fault hits: the last of ``sweep.runs`` whose precision is not the smoke
    cell's (the smoke test then passes), else the last combo."""
    runs = list(config["sweep"]["runs"])
    smoke = str(config.get("smoke", {}).get("precision", "")).upper()
    other = [c for c in runs if precision_of(c) != smoke]
    return (other or runs)[-1]


def faulted_config(config: Mapping[str, Any], fault: DemoFault, template_folder: Path) -> dict[str, Any]:
    """A copy of the demo ``config`` with ``fault`` in its trainer's environment. A relative
    ``threshold_json`` is made absolute (against ``template_folder``), since the copy lives elsewhere."""
    out = json.loads(json.dumps(config))
    precision = precision_of(faulted_combo(out))
    out["container"]["env"].update({"SIM_FAULT": fault.sim_fault, "SIM_FAULT_PRECISION": precision, **fault.env})
    out.setdefault("watch", {}).update(fault.watch)
    threshold = out.get("threshold_json") or ""
    if threshold and not Path(threshold).is_absolute():
        out["threshold_json"] = str((template_folder / threshold).resolve())
    out["_comment"] = (f"The demo with the fault {fault.name!r} (`invoke demo --fault {fault.name}`): {fault.shows}. "
                       "Written by the demo from configs/testbed/demo_host.json; rewritten on every such demo.")
    return out


def precision_of(combo: str) -> str:
    """The precision a combo key names (``FP8`` of ``MBS=2,GBS=16,PRECISION=FP8``), upper case."""
    from cvs_tasks.config import parse_combo_key

    parsed = parse_combo_key(combo)
    return parsed[2].upper() if parsed else ""


def write_faulted_config(template: Path, fault: DemoFault, folder: Path) -> tuple[Path, str]:
    """Write the demo config with ``fault`` to ``folder``: its (absolute) path and the combo hit."""
    from cvs_tasks.inputs import load_json
    from cvs_tasks.run.rundir import write_json_atomic

    config, _ = load_json(template, "config")
    target = (folder / f"{template.stem}_{fault.name.replace('-', '_')}.json").resolve()
    write_json_atomic(target, faulted_config(config, fault, template.parent))
    return target, faulted_combo(config)
