"""What the image's launcher and the nodes must confirm before a run (docs/launch_contracts.md): MXFP needs
a train_llama3.sh that reads TE_FP4 / TE_FP8_RECIPE (only the 2026 one does), DeepSeek's script
needs 8 RDMA links on every node, and a multi-node run's DATA_CACHE_PATH is ignored by the
Feb-2025 script. The decision is pure (needs + answer -> problems, warnings); the probe's text
is parsed by functions that take anything a node may print."""

from __future__ import annotations

import json
import re

import pytest
from config_helpers import FP8, minimal_config, minimal_thresholds

from cvs_tasks.config import load_cluster, load_suite
from cvs_tasks.config.errors import ConfigError
from cvs_tasks.jobs.contracts import (
    MARK,
    ProbeAnswer,
    ScriptFacts,
    launcher_findings,
    launcher_needs,
    parse_links,
    parse_scripts,
    scripts_to_probe,
)
from cvs_tasks.plan import check_launcher, make_plan
from cvs_tasks.remote.launcher import NO_IMAGE, probe_commands, probe_launcher
from cvs_tasks.remote.testing import ScriptedHosts

MXFP8 = "MBS=4,GBS=128,PRECISION=MXFP8"
MXFP4 = "MBS=4,GBS=128,PRECISION=MXFP4"
SCRIPT = "/workspace/Megatron-LM/examples/llama/train_llama3.sh"
DEEPSEEK_SCRIPT = "/workspace/Megatron-LM/examples/deepseek_v2/train_deepseekv2.sh"
OLD = ScriptFacts(True, frozenset(), frozenset({"TE_FP4", "TE_FP8_RECIPE", "DATA_CACHE_PATH"}))
NEW = ScriptFacts(True, frozenset({"TE_FP4", "TE_FP8_RECIPE", "DATA_CACHE_PATH"}), frozenset())
IBV_TWO_PORTS = """hca_id:\trocep0s0f0
\ttransport:\t\t\tInfiniBand (0)
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
hca_id:\trocep1s0f0
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_DOWN (1)
hca_id:\trocep2s0f0
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
"""


def _mxfp_config(**top):
    config = minimal_config(**top)
    config["sweep"] = {"combinations": {FP8: {}, MXFP8: {}, MXFP4: {}}, "runs": [FP8, MXFP8, MXFP4]}
    return config, minimal_thresholds(FP8, MXFP8, MXFP4)


def _suite(suite_files, config, thresholds=None, name="suite_single.json"):
    return load_suite(suite_files(config, thresholds, name=name))


def _deepseek():
    config = minimal_config()
    config["train_params"].update(model_name="deepseek_v2_lite", tokenizer_model="deepseek-ai/DeepSeek-V2-Lite")
    return config


def test_mxfp_combos_need_their_env_name_read_by_the_family_script(suite_files):
    suite = _suite(suite_files, *_mxfp_config())
    needs = launcher_needs(suite, distributed=False)
    assert [(n.where, n.script, n.name) for n in needs] == [
        (f'sweep.combinations["{MXFP8}"]', SCRIPT, "TE_FP8_RECIPE"),
        (f'sweep.combinations["{MXFP4}"]', SCRIPT, "TE_FP4")]
    assert scripts_to_probe(needs) == {SCRIPT: ("TE_FP8_RECIPE", "TE_FP4")}
    assert launcher_needs(_suite(suite_files, minimal_config()), distributed=False) == []  # FP8/BF16: nothing


def test_mxfp_on_a_script_that_predates_it_is_refused_naming_what_would_train(suite_files):
    suite = _suite(suite_files, *_mxfp_config())
    problems, warnings = launcher_findings(launcher_needs(suite, distributed=False), ProbeAnswer({SCRIPT: OLD}))
    found = dict(problems)
    assert set(found) == {f'sweep.combinations["{MXFP8}"]', f'sweep.combinations["{MXFP4}"]'} and warnings == []
    mxfp8 = found[f'sweep.combinations["{MXFP8}"]']
    assert f"{SCRIPT} in this image does not read TE_FP8_RECIPE" in mxfp8
    assert "would train plain (delayed-scaling) FP8 and the run would be reported as MXFP8" in mxfp8
    assert "use an image whose train_llama3.sh reads TE_FP8_RECIPE, or drop MXFP8 from the sweep" in mxfp8
    assert "would train BF16" in found[f'sweep.combinations["{MXFP4}"]']
    assert launcher_findings(launcher_needs(suite, distributed=False), ProbeAnswer({SCRIPT: NEW})) == ([], [])


def test_the_smoke_cell_and_the_default_combo_are_held_to_it_too(suite_files):
    config = minimal_config(smoke={"enabled": True, "precision": "MXFP8"})
    config["train_params"].update(precision="MXFP4", micro_batch_size="4", global_batch_size="128")
    config["sweep"] = {"combinations": {}, "runs": []}
    suite = _suite(suite_files, config, minimal_thresholds("default"))
    problems, _ = launcher_findings(launcher_needs(suite, distributed=False), ProbeAnswer({SCRIPT: OLD}))
    assert {where for where, _ in problems} == {"train_params.precision", "smoke.precision"}


def test_an_unanswered_probe_warns_and_never_refuses(suite_files):
    needs = launcher_needs(_suite(suite_files, *_mxfp_config()), distributed=False)
    problems, warnings = launcher_findings(needs, ProbeAnswer(unknown="rocm/megatron-lm:test is not on node n0 yet"))
    assert problems == [] and len(warnings) == 2
    assert "not checked whether" in warnings[0] and "is not on node n0 yet" in warnings[0]
    missing = launcher_findings(needs, ProbeAnswer({SCRIPT: ScriptFacts(False)}))
    assert missing[0] == [] and "is not in the image (train_params.megatron_root?)" in missing[1][0]
    silent = launcher_findings(needs, ProbeAnswer({SCRIPT: ScriptFacts(True)}))  # asked, but no line about it
    assert silent[0] == [] and "does not say whether it reads TE_FP8_RECIPE" in silent[1][0]


def test_a_multi_node_run_on_the_feb_2025_script_is_warned_that_data_cache_path_is_ignored(suite_files):
    suite = _suite(suite_files, minimal_config(), name="suite_distributed.json")
    needs = launcher_needs(suite, distributed=True)
    assert [(n.where, n.name, n.refuse) for n in needs] == [("paths.data_cache_dir", "DATA_CACHE_PATH", False)]
    problems, warnings = launcher_findings(needs, ProbeAnswer({SCRIPT: OLD}))
    assert problems == [] and len(warnings) == 1
    assert warnings[0].startswith(f"paths.data_cache_dir: {SCRIPT} in this image does not read DATA_CACHE_PATH")
    assert "paths.data_cache_dir is not used" in warnings[0] and "storage every node shares" in warnings[0]
    assert launcher_findings(needs, ProbeAnswer({SCRIPT: NEW})) == ([], [])
    assert launcher_needs(suite, distributed=False) == []


def test_deepseek_on_fewer_than_8_rdma_links_is_refused_per_node_and_unknown_is_a_warning(suite_files):
    needs = launcher_needs(_suite(suite_files, _deepseek()), distributed=False)
    assert [(n.script, n.links) for n in needs] == [(DEEPSEEK_SCRIPT, 8)] and scripts_to_probe(needs) == {}
    problems, warnings = launcher_findings(needs, ProbeAnswer(links={"n0": 2, "n1": 8, "n2": None}))
    assert len(problems) == 1 and problems[0][0] == "train_params.tokenizer_model"
    assert problems[0][1].startswith("node n0 has 2 active RDMA link(s) (ibv_devinfo), but train_deepseekv2.sh")
    assert "links[i] for i in range(8)" in problems[0][1] and "exits before torchrun" in problems[0][1]
    assert len(warnings) == 1 and "cannot count the active RDMA links on node n2" in warnings[0]


def test_primus_and_a_users_own_script_need_nothing(suite_files):
    config, thresholds = _mxfp_config()
    config["container"]["image"] = "rocm/primus:v25.10"
    assert launcher_needs(_suite(suite_files, config, thresholds), distributed=True) == []
    config, thresholds = _mxfp_config()
    config["train_params"]["training_script"] = "examples/custom/run.sh"
    assert launcher_needs(_suite(suite_files, config, thresholds), distributed=True) == []


@pytest.mark.parametrize("text, links", [
    (f"{MARK} links 0\n{IBV_TWO_PORTS}", 2),
    (f"{MARK} links 0\nNo IB devices found\n", 0),
    (f"{MARK} links 127\nbash: ibv_devinfo: command not found\n", None),
    (f"{MARK} links 0\nsegmentation fault\n", None),
    ("", None),
    ("\x00\xff garbage", None),
    (f"{MARK} links x\n{IBV_TWO_PORTS}", None),
])
def test_links_are_the_active_ports_ibv_devinfo_lists_or_unknown(text, links):
    assert parse_links(text) == links


def test_script_answers_with_garbage_lines_keep_only_what_they_tell():
    text = "\n".join([f"{MARK} present /a b/s.sh", f"{MARK} reads TE_FP4 /a b/s.sh",
                      f"{MARK} ignores bad-name /a b/s.sh", f"{MARK} reads", "noise", f"{MARK} missing /x.sh",
                      f"{MARK} reads TE_FP4 /x.sh", "\x00\x01"])
    assert parse_scripts(text) == {"/a b/s.sh": ScriptFacts(True, frozenset({"TE_FP4"})), "/x.sh": ScriptFacts(False)}
    assert parse_scripts("") == {} and parse_scripts("@@cvs-launcher") == {}


def test_docker_reads_the_script_from_the_image_only_when_it_is_there_and_other_nodes_only_count_links():
    commands = probe_commands(2, "docker", "rocm/megatron-lm:v25.3", {SCRIPT: ("TE_FP4",)}, links=True)
    assert commands[0].startswith("if docker image inspect --format '{{.Id}}' rocm/megatron-lm:v25.3 >/dev/null")
    assert "docker run --rm --network none --entrypoint /bin/bash rocm/megatron-lm:v25.3 -c" in commands[0]
    assert "ibv_devinfo" in commands[0] and "docker" not in commands[1] and "ibv_devinfo" in commands[1]
    host = probe_commands(2, "host", "ignored", {SCRIPT: ("TE_FP4",)}, links=False)
    assert host[0].startswith(f"if [ -f {SCRIPT} ] && [ -r {SCRIPT} ]") and host[1] == ""


def test_the_probe_asks_node_0_and_reads_a_missing_image_or_a_lost_node_as_unknown():
    with ScriptedHosts(["n0", "n1"]) as hosts:
        hosts.expect(re.compile("docker run --rm"), on="n0",
                     stdout=f"{MARK} present {SCRIPT}\n{MARK} ignores TE_FP4 {SCRIPT}\n")
        answer = probe_launcher(hosts, "docker", "img", {SCRIPT: ("TE_FP4",)}, links=False)
    assert answer.scripts == {SCRIPT: ScriptFacts(True, frozenset(), frozenset({"TE_FP4"}))} and answer.links == {}
    with ScriptedHosts(["n0"]) as hosts:
        hosts.expect(re.compile("docker image inspect"), stdout=NO_IMAGE + "\n")
        unknown = probe_launcher(hosts, "docker", "img", {SCRIPT: ("TE_FP4",)}, False).unknown
    assert "img is not on node n0 yet" in unknown
    with ScriptedHosts(["n0", "n1"]) as hosts:
        hosts.expect(re.compile("ibv_devinfo"), on="n0", error="connection refused")
        hosts.expect(re.compile("ibv_devinfo"), on="n1", stdout=f"{MARK} links 0\n{IBV_TWO_PORTS}")
        answer = probe_launcher(hosts, "host", "img", {}, links=True)
    assert answer.links == {"n0": None, "n1": 2}


def test_check_launcher_puts_the_readiness_problems_and_the_launcher_ones_in_one_error(suite_files, tmp_path,
                                                                                      monkeypatch):
    config, thresholds = _mxfp_config()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {"10.0.0.1": {}}}))
    loaded = load_cluster(cluster)
    plan = make_plan(load_suite(suite_files(config, thresholds), loaded), loaded)
    closed = []

    class Hosts:
        nodes = [object()]

        def close(self):
            closed.append(True)

    monkeypatch.setattr("cvs_tasks.remote.connect", lambda cluster: Hosts())
    monkeypatch.setattr("cvs_tasks.remote.launcher.probe_launcher", lambda *a, **k: ProbeAnswer({SCRIPT: OLD}))
    earlier = ConfigError(plan.suite.config_path, [("paths.hf_token_file", "holds no token")])
    with pytest.raises(ConfigError) as info:
        check_launcher(plan, earlier)
    assert [where for where, _ in info.value.problems] == [
        "paths.hf_token_file", f'sweep.combinations["{MXFP8}"]', f'sweep.combinations["{MXFP4}"]']
    assert closed == [True]
    monkeypatch.setattr("cvs_tasks.remote.launcher.probe_launcher", lambda *a, **k: ProbeAnswer({SCRIPT: NEW}))
    hosts, warnings = check_launcher(plan)
    assert isinstance(hosts, Hosts) and warnings == []
