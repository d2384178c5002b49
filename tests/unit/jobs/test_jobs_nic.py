"""Broadcom NIC setup and the HCA-id check (docs/reference_suite.md#nic-setup, with the
reference's own unit-test cases)."""

from __future__ import annotations

import pytest
from jobs_factory import make_job, with_params

from cvs_tasks.jobs import (
    JobSetupError,
    check_hca,
    hca_regex,
    needs_broadcom_setup,
    nic_setup_command,
    nic_type_for,
)

IBV_BROADCOM = """hca_id:\trocep1s0f0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t230.2.49.0
"""
IBV_MLX = "hca_id:\tmlx5550000\n\ttransport:\t\t\tInfiniBand (0)\n"


def test_nic_type_defaults_by_gpu_and_can_be_overridden():
    assert nic_type_for("MI355X", {}) == "ainic"
    assert nic_type_for("mi355x", {}) == "ainic"
    assert nic_type_for("MI300X", {}) == "thor2"
    assert nic_type_for("MI325X", {"nic_type": " "}) == "thor2"
    assert nic_type_for("MI355X", {"nic_type": "broadcom"}) == "broadcom"


def test_broadcom_setup_only_for_distributed_megatron_on_thor():
    dist = make_job(nnodes=2, distributed=True)
    assert needs_broadcom_setup(dist)
    assert not needs_broadcom_setup(make_job())
    assert not needs_broadcom_setup(make_job(gpu_name="MI355X", nnodes=2, distributed=True))
    assert not needs_broadcom_setup(make_job(backend="primus", nnodes=2, distributed=True))
    assert needs_broadcom_setup(with_params(make_job(gpu_name="MI355X", nnodes=2, distributed=True),
                                            nic_type="Broadcom"))


def test_setup_copies_the_host_library_without_sudo_then_lists_devices():
    lib = "/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so"
    command = nic_setup_command(make_job())
    assert "sudo" not in command
    assert command == (
        f"if [ ! -e {lib}.host ]; then echo 'cvs-tasks: {lib}.host is not mounted in the container; "
        f"add the host copy of libbnxt_re-rdmav34.so as a volume ending in :{lib}.host to "
        f"container.runtime.args.volumes' >&2; false; else cp -f {lib}.host {lib} && ibv_devinfo; fi"
    )
    assert nic_setup_command() == command


def test_default_pattern_matches_rocep():
    assert hca_regex("bnxt_|rocep") == r"hca_id:\s+(bnxt_|rocep)"
    assert check_hca(IBV_BROADCOM, "bnxt_|rocep") is None
    assert check_hca(IBV_BROADCOM, None) is None


def test_override_mlx5_matches():
    assert check_hca(IBV_MLX, "mlx5_") is not None  # mlx5550000 has no underscore
    assert check_hca("hca_id:\tmlx5_0\n", "mlx5_") is None


def test_whitespace_around_segments_is_stripped_and_empties_dropped():
    assert hca_regex(" bnxt_ | rocep |  ") == r"hca_id:\s+(bnxt_|rocep)"
    assert check_hca(IBV_BROADCOM, " bnxt_ | rocep ") is None


def test_plus_is_literal():
    assert hca_regex("mlx5+") == r"hca_id:\s+(mlx5\+)"
    reason = check_hca(IBV_MLX, "mlx5+", node="10.0.0.2")
    assert reason == (
        "Broadcom libbnxt RDMA driver is not properly copied on node 10.0.0.2: ibv_devinfo lists no "
        "hca_id matching 'hca_id:\\\\s+(mlx5\\\\+)' (train_params.hca_id_pattern); check the "
        "libbnxt volume and /dev/infiniband devices of the container"
    )


@pytest.mark.parametrize("pattern", ["", " | ", "|||"])
def test_empty_pattern_is_a_clear_error_value(pattern):
    err = hca_regex(pattern)
    assert isinstance(err, JobSetupError)
    assert err.field == "train_params.hca_id_pattern"
    assert "parsed to zero non-empty segments" in str(err)
    assert check_hca(IBV_BROADCOM, pattern) == err.message
