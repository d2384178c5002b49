"""The ``pyxis`` runtime: on a Slurm allocation, every job command runs in a named
pyxis/enroot container on its node.

pyxis adds ``--container-*`` options to ``srun``: the launch creates the container from the image
on every node (``--container-image`` + ``--container-name``); every later step names it again
and runs inside it. Named containers live as long as the allocation, so releasing the
allocation removes them. Host-level work (folders, scripts, log reads) stays on the node.
"""

from __future__ import annotations

from cvs_tasks.errors import BadInput
from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.container import Runtime, _ok
from cvs_tasks.remote.hosts import Hosts

LAUNCH_TIMEOUT_S = 1800.0  # the first step on a node imports the image
CHECK_TIMEOUT_S = 60.0


def _in_container(hosts: Hosts, args: list[str]) -> Hosts:
    return hosts.with_step_args(args)  # SlurmHosts, or DryRunHosts that print the options


class PyxisRuntime(Runtime):
    def __init__(self, hosts: Hosts, spec: dc.ContainerSpec):
        self.node_hosts = hosts
        super().__init__(_in_container(hosts, sc.pyxis_args(spec.name, spec.args.volumes)), spec)

    @classmethod
    def for_run(cls, hosts, spec, **_run):
        if not hasattr(hosts, "with_step_args"):
            raise BadInput(f"container.runtime.name {spec.runtime!r} runs only on a Slurm cluster file "
                           "(scheduler.container pyxis)")
        return cls(hosts, spec)

    def launch(self):
        """Create the container on every node (an image import the first time)."""
        self.mode = "launched"
        creating = _in_container(self.node_hosts, sc.pyxis_args(self.spec.name, self.spec.args.volumes,
                                                                image=self.spec.image))
        return creating.run("true", timeout=LAUNCH_TIMEOUT_S)

    def command(self, command: str) -> str:
        return dc.host_shell_command(command)

    def running(self):
        return [r.ok for r in self.hosts.run("true", timeout=CHECK_TIMEOUT_S)]

    def remove(self, force: bool = False):
        return [_ok(n, "removed with the Slurm allocation") for n in self.hosts.nodes]
