"""The amdgpu classifier table, on lines in the shapes the amdgpu driver prints them."""

import pytest

from cvs_tasks.health import classify_line, line_time, scan_kernel_lines

FAULTS = [
    ("[ 8123.456789] amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!", "gpu_reset"),
    ("[ 8125.001002] amdgpu 0000:c1:00.0: amdgpu: GPU reset(2) succeeded!", "gpu_reset"),
    ("[ 8124.000001] amdgpu 0000:c1:00.0: amdgpu: MODE1 reset", "gpu_reset"),
    ("[ 8124.000002] amdgpu 0000:c1:00.0: amdgpu: GPU recovery disabled.", "gpu_reset"),
    ("[  912.331024] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring comp_1.0.0 timeout, signaled seq=3751, "
     "emitted seq=3753", "ring_timeout"),
    ("[  912.331100] amdgpu 0000:05:00.0: [drm] *ERROR* ring gfx_0.0.0 timeout, signaled seq=12, emitted seq=14",
     "ring_timeout"),
    ("[ 1401.100200] amdgpu: Queue preemption time out", "ring_timeout"),
    ("[ 3301.552001] amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32769, "
     "for process python3 pid 41233 thread python3 pid 41290)", "page_fault"),
    ("[ 3301.552010] amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:1 "
     "pasid:32770)", "page_fault"),
    ("[ 3301.552050] amdgpu 0000:c1:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00801031", "page_fault"),
    ("[ 5011.000300] amdgpu 0000:05:00.0: amdgpu: socket: 0, die: 1, 1 uncorrectable hardware errors detected "
     "in umc block", "ras_uncorrectable"),
    ("[ 5011.000301] amdgpu 0000:05:00.0: amdgpu: 2 uncorrectable hardware errors detected in total in gfx block",
     "ras_uncorrectable"),
    ("[ 5011.000400] amdgpu 0000:05:00.0: amdgpu: Poison consumption interrupt (source id 12)", "ras_uncorrectable"),
    ("[ 6100.100000] amdgpu 0000:05:00.0: amdgpu: 1 uncorrectable hardware errors detected in xgmi_wafl block",
     "xgmi_error"),
    ("[ 6100.200000] amdgpu 0000:05:00.0: amdgpu: XGMI: Set topology failure on device 1, hive 0x4c7a2b5e, ret -22",
     "xgmi_error"),
    ("[   11.000000] amdgpu 0000:05:00.0: amdgpu: Fatal error during GPU init", "driver_fatal"),
]

BENIGN = [
    "[   10.112233] amdgpu 0000:05:00.0: amdgpu: XGMI: Add node 3, hive 0x4c7a2b5e.",
    "[   10.200000] amdgpu 0000:05:00.0: amdgpu: RAS: optional ras ta ucode is not available",
    "[   10.300000] [drm] Initialized amdgpu 3.57.0 20150101 for 0000:05:00.0 on minor 1",
    "[   10.400000] amdgpu 0000:05:00.0: amdgpu: SE 4, SH per SE 2, CU per SH 10, active_cu_number 304",
    "[ 9000.000000] mlx5_core 0000:2a:00.0: mlx5e: link is down; GPU reset begin!",  # not amdgpu
    "[ 9000.100000] bnxt_en 0000:41:00.0 enp65s0f0np0: NIC Link is Down",
]


@pytest.mark.parametrize("line, rule", FAULTS)
def test_each_amdgpu_fault_shape_is_classified(line, rule):
    found = classify_line(line)
    assert found is not None and found.name == rule


@pytest.mark.parametrize("line", BENIGN)
def test_informational_and_non_amdgpu_lines_match_nothing(line):
    assert classify_line(line) is None


def test_a_correctable_error_is_a_warning_not_a_failure():
    rule = classify_line("[ 501.1] amdgpu 0000:05:00.0: amdgpu: 3 correctable hardware errors detected in umc block")
    assert rule is not None and rule.name == "ras_correctable" and rule.severity == "warn"


def test_scan_keeps_log_order_and_names_the_node():
    lines = [BENIGN[0], FAULTS[0][0] + "\n", BENIGN[2], FAULTS[4][0]]
    found = scan_kernel_lines("10.0.0.3", lines)
    assert [f.rule for f in found] == ["gpu_reset", "ring_timeout"]
    assert found[0].line == FAULTS[0][0]
    assert found[0].describe() == f"node 10.0.0.3: GPU reset: {FAULTS[0][0]}"


def test_journalctl_short_monotonic_lines_classify_like_dmesg_lines():
    line = "[ 8123.456789] node7 kernel: amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!"
    assert classify_line(line).name == "gpu_reset"
    assert line_time(line) == pytest.approx(8123.456789)
    assert line_time("amdgpu: no stamp") is None
