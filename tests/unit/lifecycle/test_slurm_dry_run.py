"""`--dry-run` against a Slurm cluster file prints what would be asked of Slurm, and with pyxis
every step's container options; nothing is requested (no Slurm is needed to run this)."""

from __future__ import annotations

import json

from tests.e2e.conftest import REPO, edited_config, run_invoke


def test_a_pyxis_dry_run_prints_salloc_the_container_steps_and_the_job_step(tmp_path):
    def pyxis(cfg):
        cfg["container"]["runtime"]["name"] = "pyxis"

    cfg = edited_config(REPO / "configs" / "testbed" / "sim_megatron_distributed.json", tmp_path, pyxis)
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"scheduler": {"name": "slurm", "nodes": 2, "partition": "mi300x",
                                                 "time": "00:20:00", "container": "pyxis",
                                                 "slurm_conf": str(tmp_path / "no-such-slurm.conf")}}))
    reports = tmp_path / "reports"
    res = run_invoke("all", "--dry-run", "--config", str(cfg), "--cluster", str(cluster), reports=reports)
    assert res.code == 0, res.out + res.err
    out = res.out
    assert "[dry-run] salloc --no-shell --nodes=2 --ntasks-per-node=1 --exclusive --job-name=cvs-tasks-" in out
    assert "--partition=mi300x --time=00:20:00" in out
    assert ("(srun --container-name=cvs_sim_megatron_distributed --container-image=cvs-testbed/sim:latest "
            "--container-mounts=/tmp/cvs-testbed/shared:/tmp/cvs-testbed/shared,") in out
    job_step = next(line for line in out.splitlines() if "--jobid=<allocation>" in line)
    assert "--nodes=2 --ntasks-per-node=1" in job_step and "--container-name=cvs_sim_megatron_distributed" in job_step
    assert "export NCCL_SOCKET_IFNAME=lo" in out  # no `docker run -e`: the wrapper exports the env
    assert not reports.exists() or not any(reports.iterdir())


def test_a_pyxis_suite_over_ssh_is_refused_at_load(tmp_path):
    def pyxis(cfg):
        cfg["container"]["runtime"]["name"] = "pyxis"

    cfg = edited_config(REPO / "configs" / "testbed" / "sim_megatron_distributed.json", tmp_path, pyxis)
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": ["10.0.0.1", "10.0.0.2"]}))
    res = run_invoke("all", "--dry-run", "--config", str(cfg), "--cluster", str(cluster), reports=tmp_path / "r")
    assert res.code == 2, res.out + res.err
    assert "container.runtime.name 'pyxis' needs a Slurm cluster file" in res.out + res.err
