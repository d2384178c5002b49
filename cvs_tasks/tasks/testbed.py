"""`invoke testbed.*`: the local GPU-less cluster the tests and the demo run against.

Real sshd + dockerd per loopback node, a registry-free image holding the simulated trainer.
State lives in `$CVS_TESTBED_DIR` (default /tmp/cvs-testbed).
"""
from __future__ import annotations

import json

from invoke import Collection

from cvs_tasks.tasks._common import number_flag, task, user_errors

STATE_HELP = "State directory (default: $CVS_TESTBED_DIR or /tmp/cvs-testbed)"


@task(help={"docker_host": "Daemon to load the image into (default: the local default daemon)"})
def image(c, docker_host="unix:///var/run/docker.sock"):
    """Build (once, cached) and load the simulated-trainer image; prints its name."""
    with user_errors():
        from testbed.image import ensure_image
        print(ensure_image(docker_host))


@task(help={"nodes": "Number of nodes (127.0.0.2, .3, …); default 2 (--light: 64, up to 4096)",
            "docker_nodes": "How many of them get their own dockerd (default: all; the rest share node 0's)",
            "state_dir": STATE_HELP + " (--light: $CVS_LIGHT_TESTBED_DIR or /tmp/cvs-light-testbed)",
            "scheduler": "Also run a local Slurm cluster over the nodes (slurm); writes cluster-slurm.json",
            "light": "Scale testbed: nodes 127.1.x.y behind ONE sshd, the host runtime, ONE log writer",
            "rate": "--light: iteration lines a second the writer appends to each node's log (default 1)",
            "port": "--light: the shared sshd's port (default 2322)"})
def up(c, nodes=None, docker_nodes=None, state_dir=None, scheduler=None, light=False, rate=None, port=None):
    """Start (or reuse) the local testbed cluster and print its cluster files."""
    with user_errors():
        if light:
            from testbed import light as light_testbed
            light_testbed.up(nodes=number_flag("nodes", nodes, 64, 1, light_testbed.MAX_NODES, whole=True),
                             state_dir=state_dir, rate=number_flag("rate", rate, 1.0, 0.001, 1000.0),
                             port=number_flag("port", port, light_testbed.DEFAULT_PORT, 1024, 65535, whole=True))
            return
        from testbed import cluster
        cluster.up(nodes=number_flag("nodes", nodes, 2, 1, 253, whole=True),
                   docker_nodes=number_flag("docker-nodes", docker_nodes, None, 1, 253, whole=True),
                   state_dir=state_dir, scheduler=scheduler)


@task(help={"state_dir": STATE_HELP, "light": "Stop the light scale testbed (`testbed.up --light`) instead"})
def down(c, state_dir=None, light=False):
    """Stop the testbed's daemons and containers, unmount and remove its state."""
    with user_errors():
        if light:
            from testbed import light as light_testbed
            if not light_testbed.down(state_dir):
                print("testbed: no light testbed to stop")
            return
        from testbed import cluster
        if not cluster.down(state_dir):
            print("testbed: nothing to stop")


@task(help={"state_dir": STATE_HELP, "json_": "Print the status as JSON",
            "light": "The light scale testbed (`testbed.up --light`) instead"})
def status(c, state_dir=None, json_=False, light=False):
    """Show each testbed node and whether its sshd and dockerd answer."""
    with user_errors():
        if light:
            from testbed import light as light_testbed
            report = light_testbed.status(state_dir)
            if json_ or not report["running"]:
                print(json.dumps(report, indent=2) if json_ else f"testbed: no light testbed ({report['state_dir']})")
                return
            print(f"light testbed in {report['state_dir']}: {report['nodes']} nodes on port {report['port']}, "
                  f"sshd {'up' if report['sshd'] else 'DOWN'}, writer {'up' if report['writer'] else 'DOWN'} "
                  f"({report['rate']:g} line(s)/s per node), cluster file {report['cluster_file']}")
            return
        from testbed import cluster
        report = cluster.status(state_dir)
        if json_:
            print(json.dumps(report, indent=2))
            return
        if not report["nodes"]:
            print(f"testbed: not running ({report['state_dir']})")
            return
        print(f"testbed in {report['state_dir']}: image {report['image']}, cluster file {report['cluster_file']}")
        for node in report["nodes"]:
            docker = "shared" if node["dockerd"] is None else ("up" if node["dockerd"] else "DOWN")
            print(f"  node{node['index']} {node['address']}: sshd {'up' if node['sshd'] else 'DOWN'}, "
                  f"dockerd {docker} ({node['docker_host']})")


@task(help={"nodes": "Number of Slurm nodes (127.2.x.y, one slurmd each, the host runtime); default 64",
            "state_dir": "State directory (default: $CVS_SLURM_SCALE_DIR or /tmp/cvs-slurm-scale)",
            "down": "Stop the Slurm scale testbed instead"})
def slurm(c, nodes=None, state_dir=None, down=False):
    """The Slurm scale testbed: N slurmd's under one slurmctld, no sshd or dockerd per node."""
    with user_errors():
        from testbed import slurm_scale
        if down:
            print("\n".join(slurm_scale.down(state_dir)) or "testbed: no Slurm scale testbed to stop")
            return
        slurm_scale.up(number_flag("nodes", nodes, 64, 1, slurm_scale.MAX_NODES, whole=True), state_dir)
        print(json.dumps(slurm_scale.memory(state_dir)))


ns = Collection("testbed")
ns.add_task(up, default=True)
ns.add_task(image)
ns.add_task(down)
ns.add_task(status)
ns.add_task(slurm)
