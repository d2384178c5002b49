"""A real Slurm cluster of two nodes (munged, slurmctld, two slurmds), owned by this test session.

No dockerd behind it: these tests exercise the transport (allocation, steps, reads, release).
It uses its own ports, so it can run beside a testbed's Slurm cluster.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CTLD_PORT = 26817
FIRST_PORT = 27001
ADDRESSES = ["127.0.0.60", "127.0.0.61"]


@pytest.fixture(scope="session")
def slurm_conf() -> Path:
    from testbed import slurm

    problems = slurm.check_prerequisites() + ([] if os.geteuid() == 0 else ["needs root"])
    if problems:
        pytest.fail("Slurm prerequisites missing:\n  " + "\n  ".join(problems), pytrace=False)
    # not under pytest's 0700 tmp folder: the munge user must reach munged's socket directory
    root = Path(tempfile.mkdtemp(prefix="cvs-slurm-test-"))
    root.chmod(0o755)
    try:
        yield slurm.up(root, ADDRESSES, ["unix:///nonexistent/n0.sock", "unix:///nonexistent/n1.sock"],
                       ctld_port=CTLD_PORT, first_port=FIRST_PORT, log=lambda _: None)
    finally:
        slurm.down(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_time_limit_step():
    """The time-limited step the root conftest started after collection (started here if not)."""
    from tests.integration.slurm import time_limit

    started = time_limit.start()
    if started.error:
        pytest.fail(f"could not start the time-limited Slurm step: {started.error}", pytrace=False)
    return started
