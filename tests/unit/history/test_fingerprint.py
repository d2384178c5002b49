"""Node fingerprints from one probe command per node, and drift against the majority."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cvs_tasks.remote import LocalHosts, Node
from cvs_tasks.remote.check import CheckItem, NodeCheck, framed, parse_probe, with_drift
from cvs_tasks.remote.fingerprint import collect_fingerprints, drift, fingerprint_probes, parse_fingerprint

TOOLS = Path(__file__).resolve().parents[3] / "testbed" / "trainer" / "workspace" / "bin"


def probe_node(tmp_path: Path, name: str, versions: dict | None = None) -> dict:
    """Run the fingerprint command the way a testbed node's shell would (its own tools, its folder)."""
    folder = tmp_path / "nodes" / name
    folder.mkdir(parents=True)
    if versions:
        (folder / "versions.env").write_text("".join(f"{k}={v}\n" for k, v in versions.items()))
    env = {**os.environ, "PATH": f"{TOOLS}:{os.environ['PATH']}", "CVS_SIM_NODE_DIR": str(folder)}
    done = subprocess.run(["bash", "-c", framed(fingerprint_probes("host", None))], capture_output=True,
                          text=True, timeout=60, env=env)
    return parse_fingerprint(parse_probe(done.stdout))


def test_a_nodes_own_versions_file_changes_what_its_tools_say(tmp_path):
    facts = probe_node(tmp_path, "node1", {"DRIVER": "6.9.0", "NIC_FW": "231.1.1.0", "GPU_COUNT": "4"})
    assert (facts["driver"], facts["nic_fw"], facts["gpu_count"]) == ("6.9.0", "231.1.1.0", 4) \
        or Path("/sys/module/amdgpu/version").is_file()


def test_every_fact_is_read_from_the_tools_output(tmp_path):
    facts = probe_node(tmp_path, "node0")
    assert facts["gpu_model"] == "AMD Instinct MI300X" and facts["gpu_count"] == 8
    assert facts["rocm"] == "6.4.1" or Path("/opt/rocm/.info/version").is_file()
    assert facts["driver"] == "6.10.5" or Path("/sys/module/amdgpu/version").is_file()
    assert facts["gpu_fw"] == "CP_MEC=177,PSP_SOSDRV=00.36.02.59"
    assert facts["nic_fw"] == "230.0.157.0"
    assert facts["kernel"] == os.uname().release


def test_a_missing_tool_leaves_the_fact_out_instead_of_failing():
    facts = parse_fingerprint({"fp_asic": (127, "amd-smi: command not found"), "fp_kernel": (0, "6.8.0-45\n")})
    assert facts == {"kernel": "6.8.0-45"}


def test_bare_version_files_and_labelled_tool_output_both_parse():
    assert parse_fingerprint({"fp_rocm": (0, "6.3.2-66\n"), "fp_driver": (0, "6.8.5\n")}) == {"rocm": "6.3.2-66",
                                                                                               "driver": "6.8.5"}
    asic = "GPU: 0\n    DRIVER:\n        NAME: amdgpu\n        VERSION: 6.12.12\n"
    assert parse_fingerprint({"fp_driver": (1, "No such file"), "fp_asic": (0, asic)})["driver"] == "6.12.12"


def test_the_odd_node_out_is_named_with_the_majority_value():
    facts = {f"n{i}": {"driver": "6.10.5", "kernel": "6.8"} for i in range(4)}
    facts["n2"] = {"driver": "6.9.0", "kernel": "6.8"}
    [d] = drift(facts)
    assert (d.host, d.fact, d.value, d.expected) == ("n2", "driver", "6.9.0", "6.10.5")
    assert "majority: 3 of 4" in d.text


def test_two_nodes_that_disagree_name_the_second_against_the_master():
    [d] = drift({"a": {"driver": "6.10.5"}, "b": {"driver": "6.9.0"}})
    assert d.host == "b" and "no majority" in d.why


def test_a_node_that_cannot_tell_a_fact_the_others_report_is_drift():
    found = drift({"a": {"nic_fw": "1"}, "b": {"nic_fw": "1"}, "c": {"kernel": "6.8"}})
    assert [(d.host, d.fact) for d in found] == [("c", "nic_fw")]
    assert drift({"a": {"kernel": "x"}}) == []


def test_cluster_check_flags_drift_in_a_versions_column(tmp_path):
    base = tuple(CheckItem(n, True, "ok") for n in ("ssh", "docker", "image", "gpus", "disk"))
    checks = with_drift([NodeCheck("a", 0, base, {"driver": "6.10.5"}), NodeCheck("b", 1, base, {"driver": "6.10.5"}),
                         NodeCheck("c", 2, base, {"driver": "6.9.0"})])
    assert [c.ok for c in checks] == [True, True, False]
    assert checks[2].failed() == ["versions"] and "driver 6.9.0 differs from 6.10.5" in checks[2].items[-1].detail


def test_collect_fingerprints_is_one_command_per_node():
    found = collect_fingerprints(LocalHosts([Node("localhost", "localhost")]), "host", None)
    assert found["localhost"]["kernel"] == os.uname().release


def test_the_image_is_known_by_its_registry_digest_else_by_its_layers():
    from cvs_tasks.remote.fingerprint import image_digest

    pulled = "rocm/megatron-lm@sha256:aa11,docker.io/rocm/megatron-lm@sha256:aa11\nsha256:l1,sha256:l2\n"
    assert image_digest(pulled) == "sha256:aa11"
    imported = "\nsha256:l1,sha256:l2\n"
    assert image_digest(imported).startswith("layers:sha256:")
    assert image_digest(imported) == image_digest("\nsha256:l1,sha256:l2")
    assert image_digest(imported) != image_digest("\nsha256:l1,sha256:l3")
    assert image_digest("") is None
