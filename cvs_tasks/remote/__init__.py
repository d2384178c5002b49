"""The only code that touches SSH and Docker: hosts (SSH, local, Slurm), log followers, host keys, runtimes."""

from cvs_tasks.remote.check import CheckItem, NodeCheck, check_nodes, format_check_table
from cvs_tasks.remote.connect import connect, nodes_of
from cvs_tasks.remote.container import DockerRuntime, DockerTimeouts, HostRuntime, Runtime, runtime_for
from cvs_tasks.remote.docker_cmd import LABEL_NAME, LABEL_OWNER, LABEL_RUN_ID, ContainerSpec, container_spec
from cvs_tasks.remote.hostkeys import TrustOutcome, known_hosts_path, trust
from cvs_tasks.remote.hosts import CompositeHosts, Hosts
from cvs_tasks.remote.leftovers import Leftover, LeftoverScan, find_leftovers, remove_leftovers
from cvs_tasks.remote.local import LocalHosts
from cvs_tasks.remote.results import Node, NodeResult, ReadResult, failure_summary, failures
from cvs_tasks.remote.retry import NO_RETRY, Attempt, RetryPolicy, retry_call
from cvs_tasks.remote.ssh import SshHosts

__all__ = [
    "Attempt", "CheckItem", "CompositeHosts", "ContainerSpec", "DockerRuntime", "DockerTimeouts",
    "HostRuntime", "Hosts", "LABEL_NAME", "LABEL_OWNER", "LABEL_RUN_ID", "Leftover",
    "LeftoverScan", "LocalHosts", "NO_RETRY", "Node", "NodeCheck", "NodeResult", "ReadResult",
    "RetryPolicy", "Runtime", "SshHosts", "TrustOutcome", "check_nodes", "connect",
    "container_spec", "failure_summary", "failures", "find_leftovers", "format_check_table",
    "known_hosts_path", "nodes_of", "remove_leftovers", "retry_call", "runtime_for", "trust",
]
