from benchmarks.logwriter import grow, planned_iterations
from cvs_tasks.metrics import LogParser


def test_writer_grows_a_complete_parsable_log_and_writes_the_exit_status(tmp_path):
    log, exit_file = tmp_path / "training.log", tmp_path / "exit"
    written = grow(str(log), str(exit_file), target_mb=0.2, rate_mb_s=100.0)
    size = log.stat().st_size
    assert size >= 0.2 * 2**20 and written <= size
    parser = LogParser()
    parser.feed(log.read_text())
    parser.finish()
    assert parser.completed
    assert parser.last_step == parser.planned == planned_iterations(int(0.2 * 2**20))
    assert not [e for e in parser.errors if e.fatal]
    assert exit_file.read_text() == "0\n"
