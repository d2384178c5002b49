"""Broadcom (Thor) NIC setup for distributed Megatron-LM, and the HCA check that follows it.

The host's libbnxt_re provider is bind-mounted into the container under a ``.host`` name; copying
it over the image's copy makes ibverbs use the driver that matches the host kernel. No sudo: the
container runs as root, and images without sudo broke the reference (its commit 99c827d5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cvs_tasks import backends
from cvs_tasks.jobs.shell import q, say
from cvs_tasks.jobs.spec import PARAM_DEFAULTS, JobSetupError, JobSpec

IBVERBS_DIR = "/usr/lib/x86_64-linux-gnu/libibverbs"
BNXT_LIBRARY = "libbnxt_re-rdmav34.so"
BROADCOM_GID_INDEX = "3"
_BROADCOM = re.compile(r"broadcom|thor", re.IGNORECASE)


def nic_type_for(gpu_name: str, train_params: Mapping[str, str]) -> str:
    """``train_params.nic_type`` if set, else ``ainic`` on MI355X and ``thor2`` on MI300X/MI325X."""
    configured = str(train_params.get("nic_type") or "").strip()
    if configured:
        return configured
    return "ainic" if "MI355" in gpu_name.upper() else "thor2"


def is_broadcom(nic_type: str) -> bool:
    return bool(_BROADCOM.search(nic_type))


def needs_broadcom_setup(job: JobSpec) -> bool:
    """Only distributed jobs of a backend that needs it (Megatron-LM) on Broadcom/Thor NICs copy the host libbnxt."""
    return (
        backends.get(job.backend).broadcom_nic_setup
        and job.distributed
        and is_broadcom(nic_type_for(job.gpu_name, job.train_params))
    )


def broadcom_gid_index(env: Mapping[str, str]) -> str:
    """The GID index the wrapper re-exports after the setup: the configured one, else 3."""
    return str(env.get("NCCL_IB_GID_INDEX") or "").strip() or BROADCOM_GID_INDEX


def nic_setup_command(job: JobSpec | None = None, *, ibverbs_dir: str = IBVERBS_DIR,
                      library: str = BNXT_LIBRARY) -> str:
    """Copy the host-mounted provider into place, then list the devices (run in the container).

    The command is the same for every job; ``job`` is accepted so callers can pass the job they
    are setting up without caring.
    """
    target = f"{ibverbs_dir.rstrip('/')}/{library}"
    source = f"{target}.host"
    return (
        f"if [ ! -e {q(source)} ]; then echo "
        + say(f"{source} is not mounted in the container; add the host copy of {library} as a volume "
              f"ending in :{source} to container.runtime.args.volumes")
        + " >&2; false; "
        f"else cp -f {q(source)} {q(target)} && ibv_devinfo; fi"
    )


def hca_regex(pattern: str | None) -> str | JobSetupError:
    """``hca_id:\\s+(seg1|seg2)`` from a ``|``-separated list of literal HCA-id prefixes."""
    raw = PARAM_DEFAULTS["hca_id_pattern"] if pattern is None else pattern
    segments = [re.escape(part.strip()) for part in raw.split("|") if part.strip()]
    if not segments:
        return JobSetupError(
            f"train_params.hca_id_pattern {raw!r} parsed to zero non-empty segments; set it to "
            f"HCA id prefixes separated by '|', e.g. 'bnxt_|rocep' or 'mlx5_'",
            field="train_params.hca_id_pattern",
        )
    return r"hca_id:\s+(" + "|".join(segments) + ")"


def check_hca(ibv_devinfo_output: str, pattern: str | None,
              node: str | None = None) -> str | None:
    """None when ibv_devinfo lists a matching hca_id, else why the node fails the setup."""
    regex = hca_regex(pattern)
    if isinstance(regex, JobSetupError):
        return regex.message
    if re.search(regex, ibv_devinfo_output, re.IGNORECASE):
        return None
    where = f" on node {node}" if node else ""
    return (
        f"Broadcom libbnxt RDMA driver is not properly copied{where}: ibv_devinfo lists no "
        f"hca_id matching {regex!r} (train_params.hca_id_pattern); check the libbnxt volume "
        f"and /dev/infiniband devices of the container"
    )
