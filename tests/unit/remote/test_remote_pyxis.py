"""The pyxis runtime, pinned by the exact srun options each of its steps carries (pyxis itself
cannot run here: it needs enroot and a pyxis-enabled slurmd)."""

from cvs_tasks.remote.container import runtime_for
from cvs_tasks.remote.dryrun import DryRunHosts

CONTAINER = {"name": "megatron_8b", "image": "registry.example.com/rocm/megatron-lm:v25.9",
             "runtime": {"name": "pyxis", "args": {"volumes": ["/home/ops:/home/ops", "/data:/data:ro"]}},
             "env": {"NCCL_DEBUG": "WARN"}}


def pyxis_runtime():
    printed: list[str] = []
    hosts = DryRunHosts(["gpu01", "gpu02"], printed.append)
    return runtime_for(hosts, CONTAINER, run_id="r1", owner="ops", nnodes=2), printed


def test_the_launch_creates_the_named_container_from_the_image_on_every_node():
    runtime, printed = pyxis_runtime()
    assert all(r.ok for r in runtime.launch())
    options = ("--container-name=megatron_8b --container-image=registry.example.com#rocm/megatron-lm:v25.9 "
               "--container-mounts=/home/ops:/home/ops,/data:/data:ro --no-container-mount-home --container-remap-root")
    assert printed == [f"[dry-run] gpu01 (srun {options}): true", f"[dry-run] gpu02 (srun {options}): true"]


def test_commands_run_in_the_existing_container_and_removal_is_the_allocations():
    runtime, printed = pyxis_runtime()
    runtime.exec("rocm-smi --showpids", timeout=5)
    options = ("--container-name=megatron_8b --container-mounts=/home/ops:/home/ops,/data:/data:ro "
               "--no-container-mount-home --container-remap-root")
    assert printed[0] == f"[dry-run] gpu01 (srun {options}): bash -lc 'rocm-smi --showpids'"
    assert [r.stdout for r in runtime.remove()] == ["removed with the Slurm allocation"] * 2
