"""The light scale testbed's pure parts: addresses, the one sshd's config, the writer's lines."""

from __future__ import annotations

from pathlib import Path

from cvs_tasks.metrics import LogParser
from testbed import light, light_writer


def test_light_addresses_are_distinct_loopback_away_from_the_normal_testbed():
    addresses = [light.light_address(i) for i in range(4096)]
    assert len(set(addresses)) == 4096
    assert addresses[0] == "127.1.0.1" and addresses[249] == "127.1.0.250" and addresses[250] == "127.1.1.1"
    assert all(a.startswith("127.1.") and not a.endswith((".0", ".255")) for a in addresses)


def test_one_sshd_serves_every_node_loopback_only_with_a_block_per_node(tmp_path):
    text = light.sshd_config_text(tmp_path, 3, 2322, tmp_path / "authorized_keys")
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("ListenAddress")] == [
        "ListenAddress 127.1.0.1:2322", "ListenAddress 127.1.0.2:2322", "ListenAddress 127.1.0.3:2322"]
    assert "AllowUsers root@127.0.0.0/8" in lines
    assert "PasswordAuthentication no" in lines
    startups = next(line for line in lines if line.startswith("MaxStartups"))
    assert int(startups.split()[1].split(":")[0]) > 32  # above the default fan-out window
    assert [line for line in lines if line.startswith("Match")] == [
        "Match LocalAddress 127.1.0.1", "Match LocalAddress 127.1.0.2", "Match LocalAddress 127.1.0.3"]
    node2 = lines[lines.index("Match LocalAddress 127.1.0.3") + 1]
    assert f"CVS_SIM_NODE_DIR={tmp_path}/nodes/node2 " in node2 and "CVS_LIGHT_NODE=2 " in node2
    assert f"HOME={tmp_path}/home " in node2  # never root's ~/.bashrc


def test_past_sixteen_nodes_the_one_sshd_listens_on_the_wildcard_of_its_port(tmp_path):
    lines = light.sshd_config_text(tmp_path, 17, 2322, tmp_path / "authorized_keys").splitlines()
    assert [line for line in lines if line.startswith("ListenAddress")] == ["ListenAddress 0.0.0.0:2322"]
    assert "AllowUsers root@127.0.0.0/8" in lines and len([x for x in lines if x.startswith("Match")]) == 17


def test_the_writer_spreads_lines_evenly_over_each_second():
    assert light_writer.due(1024, 1.0, 0.0) == 0
    assert light_writer.due(1024, 1.0, 0.5) == 512
    assert light_writer.due(64, 2.0, 3.0) == 384


def test_the_writers_lines_are_megatron_iterations_the_parser_reads(tmp_path):
    text = light_writer.HEADER + "".join(light_writer.line(5, step, light_writer.datetime(2026, 3, 6))
                                         for step in range(1, 11))
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    assert parser.last_step == 10 and parser.iterations_parsed == 10
    assert not parser.errors


def test_the_writer_appends_to_every_nodes_log_until_stopped(tmp_path):
    stops = iter([False, False, True])
    written = light_writer.run(tmp_path, 3, 1000.0, stop=lambda: next(stops))
    logs = [light_writer.log_path(tmp_path, i) for i in range(3)]
    assert all(p.read_text().startswith(light_writer.HEADER) for p in logs)
    assert written == sum(p.read_text().count("] iteration ") for p in logs) > 0


def test_down_without_a_light_testbed_does_nothing(tmp_path):
    assert light.down(tmp_path / "none", log=lambda *_: None) == []
    assert not Path(tmp_path / "none").exists()
