"""Where a run's nodes come from: the cluster file's list, a Slurm allocation, or, for a dry run, nowhere.

A session asks its node source for the hosts (once, when a stage first needs them), for the hosts
to tear down on, and to let the nodes go; nothing above asks which source it is. For ``--dry-run``
this is where the run differs from a run: its hosts print each command instead of running it
(``remote.dryrun.DryRunHosts``), after printing what a run would ask of Slurm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cvs_tasks.lifecycle.session import Session
    from cvs_tasks.plan import RunPlan
    from cvs_tasks.remote.hosts import Hosts


class StaticNodes:
    """The nodes the cluster file lists, over SSH (or this machine for a local node)."""

    def hosts(self, session: Session) -> Hosts:
        from cvs_tasks.remote import connect

        return connect(session.plan.cluster)

    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        return session.hosts()

    def release(self, session: Session) -> str | None:
        return None


class SlurmNodes:
    """The run's Slurm allocation: found or requested when first needed, released at teardown."""

    def hosts(self, session: Session) -> Hosts:
        from cvs_tasks.lifecycle.allocation import slurm_hosts

        return slurm_hosts(session)

    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        """Asked afresh: the allocation may have ended meanwhile (then re-acquired briefly)."""
        from cvs_tasks.lifecycle.allocation import slurm_hosts

        return slurm_hosts(session, for_teardown=True)

    def release(self, session: Session) -> str | None:
        from cvs_tasks.lifecycle.allocation import release

        return release(session)


class DryRunNodes:
    """No node: hosts that print what each node would run; on Slurm, first what would be asked of it."""

    def hosts(self, session: Session) -> Hosts:
        from cvs_tasks.lifecycle.allocation import dry_run_lines
        from cvs_tasks.remote.dryrun import DryRunHosts

        for line in dry_run_lines(session):
            session.say(line)
        return DryRunHosts([h.address for h in session.plan.hosts], echo=session.say)

    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        return session.hosts()

    def release(self, session: Session) -> str | None:
        return None


NodeSource = StaticNodes | SlurmNodes | DryRunNodes


def node_source(plan: RunPlan, *, dry_run: bool) -> NodeSource:
    if dry_run:
        return DryRunNodes()
    return SlurmNodes() if plan.cluster.scheduler is not None else StaticNodes()
