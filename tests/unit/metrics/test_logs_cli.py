import json

import pytest
from invoke import Context, Program
from invoke.exceptions import Exit

from cvs_tasks.tasks.logs import ns, parse, scan


def run(*argv):
    return Program(namespace=ns).run(["inv", *argv], exit=False)


def test_parse_json(fixture_log, capsys):
    run("parse", str(fixture_log("megatron_rocm_fork.log")), "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["dialect"] == "megatron" and out["iterations"] == 10 and out["planned_iterations"] == 10
    assert out["completed"] is True and out["errors"] == []
    assert out["loss"]["first"] == pytest.approx(11.75) and out["loss"]["last"] == pytest.approx(9.5)
    assert set(out["metrics"]) >= {"training.throughput_per_gpu", "training.tokens_per_gpu",
                                   "training.elapsed_time_per_iteration", "training.mem_usage",
                                   "training.step_time_p50_ms", "training.step_time_p95_ms"}


def test_parse_table_and_flags(fixture_log, capsys):
    run("parse", str(fixture_log("primus_legacy_a.log")), "--dialect", "primus", "--seq-length", "4096",
        "--world-size", "8")
    out = capsys.readouterr().out
    assert "dialect primus" in out and "training.tokens_per_gpu" in out and "ms" in out


def test_scan_lists_hits_and_exits_1_on_fatal(fixture_log, capsys):
    with pytest.raises(Exit) as exc:
        scan(Context(), str(fixture_log("fail_oom.log")), json=True)
    assert exc.value.code == 1
    hits = json.loads(capsys.readouterr().out)
    assert hits == [{"name": "gpu_oom", "class": "oom", "fatal": True, "line": 30,
                     "text": hits[0]["text"], "hint": hits[0]["hint"]}]
    assert "micro batch size" in hits[0]["hint"]
    assert "HIP out of memory" in hits[0]["text"]


def test_scan_clean_log_exits_0(fixture_log, capsys):
    run("scan", str(fixture_log("megatron_upstream_seconds.log")))
    assert "no error signatures" in capsys.readouterr().out


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(Exit) as exc:
        parse(Context(), str(tmp_path / "nope.log"))
    assert exc.value.code == 2


def test_parse_says_what_the_trainer_ran(fixture_log, capsys):
    run("parse", str(fixture_log("megatron_upstream_seconds.log")), "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["effective_config"]["seq_length"] == 8192 and out["effective_config"]["world_size"] == 8
    run("parse", str(fixture_log("megatron_upstream_seconds.log")))
    assert "trainer ran: 8 GPUs, MBS 2, GBS 128, seq 8192" in capsys.readouterr().out
