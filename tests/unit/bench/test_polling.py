from benchmarks.polling import PollSample, early_late, per_poll_cpu, rows_for, watch_growing_log
from cvs_tasks.remote import LocalHosts, Node


def test_poll_cycles_that_carried_no_data_are_left_out():
    samples = [PollSample(0, 0.0, 40, 0), PollSample(1, 0.01, 1000, 10), PollSample(2, 0.11, 1100, 20),
               PollSample(3, 0.22, 900, 30), PollSample(4, 0.30, 40, 30), PollSample(5, 0.31, 40, 30)]
    assert [round(x, 2) for x in per_poll_cpu(samples)] == [0.1, 0.11, 0.08]


def test_early_late_needs_enough_values():
    assert early_late([1.0]) == (None, None)
    assert early_late([1.0, 1.0, 5.0, 2.0, 2.0, 2.0, 3.0, 3.0]) == (1.0, 3.0)


def test_watcher_over_a_small_growing_log_reads_each_byte_once(tmp_path):
    local = LocalHosts([Node("localhost", "localhost")])
    fig = watch_growing_log(local, "localhost", tmp_path, size_mb=0.5, rate_mb_s=4.0, poll_s=0.05,
                            reference_hosts=local)
    assert fig["status"] == "completed", fig["reason"]
    assert fig["copied_bytes"] == fig["final_bytes"]
    # frames: the log once, plus a header per frame of at most 1 MiB and a heartbeat now and then
    assert fig["final_bytes"] < fig["transferred"] <= fig["final_bytes"] * 1.01 + 4096
    assert fig["reference_transferred"] >= fig["final_bytes"]
    fig["quick"] = True
    rows = rows_for("local", fig)
    assert rows[0]["name"] == "polling.bytes_ratio[local]" and rows[0]["status"] == "PASS"
