"""RDMA counters: both sources parse to the same keys; only error counters that grew are reported."""

from cvs_tasks.health import CounterKey, diff_counters, is_error_counter, parse_rdma_statistic, parse_sysfs_counters

SYSFS_BEFORE = """\
mlx5_0/ports/1/counters/port_rcv_errors:0
mlx5_0/ports/1/counters/symbol_error:2
mlx5_0/ports/1/counters/port_xmit_data:1000
mlx5_0/ports/1/hw_counters/out_of_buffer:5
mlx5_0/ports/1/hw_counters/rnr_nak_retry_err:0
mlx5_0/ports/1/hw_counters/lifespan:12
bnxt_re0/hw_counters/to_retransmits:7
bnxt_re0/ports/1/hw_counters/rx_roce_discards:0
mlx5_0/ports/1/counters/bogus
mlx5_0/ports/1/counters/text:abc
"""

SYSFS_AFTER = SYSFS_BEFORE.replace("symbol_error:2", "symbol_error:9").replace(
    "port_xmit_data:1000", "port_xmit_data:99999").replace("to_retransmits:7", "to_retransmits:8")


def test_sysfs_lines_become_device_port_counter_keys():
    counters = parse_sysfs_counters(SYSFS_BEFORE.splitlines())
    assert counters[CounterKey("mlx5_0", "1", "counters", "symbol_error")] == 2
    assert counters[CounterKey("mlx5_0", "1", "hw_counters", "out_of_buffer")] == 5
    assert counters[CounterKey("bnxt_re0", "-", "hw_counters", "to_retransmits")] == 7  # device-level
    assert not any(k.name in ("bogus", "text") for k in counters)


def test_rdma_statistic_lines_parse_in_pairs():
    text = ["link mlx5_0/1 rx_write_requests 0 rx_read_requests 4 out_of_buffer 2 out_of_sequence 0",
            "link bnxt_re1/1 seq_err_naks_rcvd 3", "garbage line", "link nodevice 1 2"]
    counters = parse_rdma_statistic(text)
    assert counters[CounterKey("mlx5_0", "1", "rdma", "out_of_buffer")] == 2
    assert counters[CounterKey("mlx5_0", "1", "rdma", "rx_read_requests")] == 4
    assert counters[CounterKey("bnxt_re1", "1", "rdma", "seq_err_naks_rcvd")] == 3
    assert len(counters) == 5


def test_the_reference_pattern_picks_error_counters_only():
    for name in ("port_rcv_errors", "symbol_error", "port_xmit_discards", "rnr_nak_retry_err", "out_of_buffer",
                 "to_retransmits", "seq_err_naks_rcvd", "rx_roce_discards", "link_downed_reset", "req_rx_oflow",
                 "Local_Ack_Timeout_Err", "resp_invalid_rkey", "tx_drop", "local_link_integrity_fail"):
        assert is_error_counter(name), name
    for name in ("port_xmit_data", "port_rcv_packets", "rx_write_requests", "out_of_sequence", "lifespan"):
        assert not is_error_counter(name), name


def test_only_grown_error_counters_are_reported_with_their_delta():
    before = parse_sysfs_counters(SYSFS_BEFORE.splitlines())
    after = parse_sysfs_counters(SYSFS_AFTER.splitlines())
    grew, notes = diff_counters("10.0.0.2", before, after)
    assert [(g.device, g.port, g.counter, g.delta) for g in grew] == [
        ("bnxt_re0", "-", "to_retransmits", 1), ("mlx5_0", "1", "symbol_error", 7)]
    assert grew[1].describe() == "node 10.0.0.2: mlx5_0 port 1 symbol_error +7 (2 -> 9)"
    assert notes == []


def test_a_counter_that_went_down_is_a_note_not_a_pass_or_a_failure():
    before = {CounterKey("mlx5_0", "1", "counters", "port_rcv_errors"): 40}
    after = {CounterKey("mlx5_0", "1", "counters", "port_rcv_errors"): 1}
    grew, notes = diff_counters("n1", before, after)
    assert grew == [] and "went down (40 -> 1)" in notes[0]


def test_a_counter_seen_only_on_one_side_is_not_compared():
    before = {}
    after = {CounterKey("mlx5_1", "1", "counters", "port_rcv_errors"): 9}
    assert diff_counters("n1", before, after) == ([], [])
