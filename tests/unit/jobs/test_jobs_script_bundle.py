"""Every node's job script in one Slurm broadcast: each node receives one script plus a short row per
node, not every node's script, and writes exactly the script it would have been sent alone."""

from __future__ import annotations

import os
import subprocess

from jobs_factory import make_job

from cvs_tasks.jobs.spec import build_launch
from cvs_tasks.remote import slurm_broadcast as sb
from cvs_tasks.remote.results import RawResult
from cvs_tasks.remote.shellcmd import put_command


def script_bundle(nodes: int, tmp_path=None, backend: str = "megatron") -> tuple[bytes, list, list[str]]:
    """What ``put_each`` of every node's wrapper hands srun on a Slurm allocation of ``nodes`` nodes."""
    where = {} if tmp_path is None else {"scripts_dir": str(tmp_path / "scripts"), "log_dir": str(tmp_path / "logs")}
    image = {"backend": "primus", "image": "rocm/primus:v26.5"} if backend == "primus" else {}
    plan = build_launch(make_job(nnodes=nodes, distributed=nodes > 1, **where, **image))
    names = [f"gpu{i:04d}" for i in range(nodes)]
    bundle = sb.build_bundle(names, [put_command(n.script_path, 0o700) for n in plan.nodes],
                             [n.script_text.encode("utf-8") for n in plan.nodes])
    return bundle, plan.nodes, names


def test_the_bundle_grows_by_a_short_row_per_node_not_by_a_script():
    for backend in ("megatron", "primus"):
        two, nodes, _ = script_bundle(2, backend=backend)
        many, _, _ = script_bundle(1024, backend=backend)
        per_node = (len(many) - len(two)) / 1022
        assert per_node < 220, (backend, per_node)  # measured 190-195 bytes (docs/measured.md)
        assert per_node < len(nodes[1].script_text) / 5
        assert len(many) < 256 * 1024  # every node's own script would be 1,024 x ~1.5 KiB


def test_each_node_writes_exactly_its_own_script_from_the_shared_bundle(tmp_path):
    bundle, nodes, names = script_bundle(300, tmp_path)
    for rank in (0, 1, 7, 10, 100, 299):
        env = {**os.environ, "SLURMD_NODENAME": names[rank]}
        done = subprocess.run(["bash", "-c", sb.TASK_PROGRAM, "cvs-broadcast", "60"], input=bundle, capture_output=True,
                              env=env, timeout=60)
        report = sb.parse_records(done.stdout, len(names))[0][rank]
        assert report == RawResult(0, b"", b""), done.stderr
        with open(nodes[rank].script_path, "rb") as written:
            assert written.read() == nodes[rank].script_text.encode("utf-8")
        assert os.stat(nodes[rank].script_path).st_mode & 0o777 == 0o700
    assert not os.path.exists(nodes[2].script_path)  # a node writes its own script only
