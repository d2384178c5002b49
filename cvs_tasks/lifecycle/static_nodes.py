"""Nodes no scheduler hands out: the static scheduler (the nodes the cluster file lists, over SSH, or
this machine for a local node), and a dry run's, which are none.

The nodes are there before the run and after it: acquiring them is connecting, tearing down uses
the same connection, nothing is released. A job is started detached on each node (its wrapper's
pid, log and exit files are all the harness follows), so nothing of the harness is left to end.

For ``--dry-run`` the session's hosts come from ``DryRunNodes`` whatever the scheduler: they print
each command instead of running it (``remote.dryrun.DryRunHosts``), after printing what a run
would ask of the scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cvs_tasks.errors import InfraError
from cvs_tasks.schedulers import STATIC, JobHandle, Scheduler

if TYPE_CHECKING:
    from cvs_tasks.config import Cluster
    from cvs_tasks.jobs.spec import LaunchPlan
    from cvs_tasks.lifecycle.leftovers import CleanupOutcome
    from cvs_tasks.lifecycle.session import Session
    from cvs_tasks.remote.hosts import Hosts


class StaticNodes(Scheduler):
    name = STATIC
    label = "static nodes"

    def acquire(self, session: Session) -> Hosts:
        from cvs_tasks.remote import connect

        return connect(session.plan.cluster)

    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        return session.hosts()

    def launch(self, session: Session, launch: LaunchPlan, output_dir: Path) -> JobHandle | None:
        """The detached launch on each node; InfraError naming the first node that could not start."""
        started = session.runtime().exec([n.launch_command for n in launch.nodes], timeout=60)
        bad = [r for r in started if not r.ok]
        if bad:
            raise InfraError(
                f"could not start the job on node {bad[0].host}: "
                f"{bad[0].error or session.redactor(bad[0].stderr or bad[0].stdout).strip()[-300:]}"
            )
        return None

    def cleanup(self, cluster: Cluster, where: dict[str, Any], *, dry_run: bool,
                say: Callable[[str], None]) -> CleanupOutcome:
        from cvs_tasks.lifecycle.leftovers import clean_hosts
        from cvs_tasks.remote import connect

        with connect(cluster) as hosts:
            return clean_hosts(hosts, where, dry_run=dry_run, say=say)


STATIC_NODES = StaticNodes()


class DryRunNodes:
    """No node: hosts that print what each node would run, after what would be asked of the scheduler."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def acquire(self, session: Session) -> Hosts:
        from cvs_tasks.remote.dryrun import DryRunHosts

        for line in self.scheduler.dry_run_lines(session):
            session.say(line)
        return DryRunHosts([h.address for h in session.plan.hosts], echo=session.say)

    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        return session.hosts()

    def release(self, session: Session) -> str | None:
        return None


NodeSource = Scheduler | DryRunNodes


def node_source(scheduler: Scheduler, *, dry_run: bool) -> NodeSource:
    """Where a session's hosts come from: its scheduler, or for ``--dry-run`` nowhere."""
    return DryRunNodes(scheduler) if dry_run else scheduler
