"""Reading checkpoint I/O times and the FLOPs table."""

import pytest

from cvs_tasks.metrics import checkpoint_io_times
from cvs_tasks.metrics.flops import flops_per_token, model_dims


@pytest.mark.parametrize("name", ["ckpt_resume_primus.log", "ckpt_resume_primus_distributed.log"])
def test_checkpoint_load_time_single_and_distributed(fixture_log, name):
    times = checkpoint_io_times(fixture_log(name).read_text().splitlines())
    assert times.load_time_s == pytest.approx(12.0)


def test_checkpoint_save_times(fixture_log):
    times = checkpoint_io_times(fixture_log("ckpt_save_primus.log").read_text().splitlines())
    assert times.save_times_s == {10: pytest.approx(3.5), 20: pytest.approx(4.5)}
    assert times.mean_save_s == pytest.approx(4.0)
    assert times.load_time_s is None and times.notes == ["no checkpoint load lines found"]


def test_checkpoint_times_without_stamps_fall_back_to_timer(fixture_log):
    times = checkpoint_io_times(fixture_log("ckpt_megatron_old.log").read_text().splitlines())
    assert times.save_times_s == {}
    assert times.load_time_s == pytest.approx(12.57188)


def test_flops_table_matches_published_constants():
    assert flops_per_token(model_dims("llama3.1_8B"), 8192) == pytest.approx(51.47e9, rel=1e-3)
    assert flops_per_token(model_dims("llama3.1_8B"), 8192, "old") == pytest.approx(57.91e9, rel=1e-3)
    assert flops_per_token(model_dims("llama3.3_70B"), 8192) == pytest.approx(449.2e9, rel=1e-3)
    assert flops_per_token(model_dims("70B"), 4096) == pytest.approx(433.1e9, rel=1e-3)
    assert flops_per_token(model_dims("llama3.1_405B"), 8192) == pytest.approx(2524e9, rel=1e-3)
    assert flops_per_token(model_dims("deepseek_v2_lite"), 4096) > 0
    assert model_dims("gpt-5") is None
