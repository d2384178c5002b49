"""Slurm command lines and the parsing of what Slurm's clients print (texts as Slurm 22.05 writes them)."""

import pytest

from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import drain_lines


def test_salloc_line_carries_only_what_was_asked_and_bounds_the_wait():
    req = sc.AllocationRequest(nodes=4, job_name="cvs-tasks", partition="mi300x", account="ops",
                               time="00:30:00", reservation="val", wait_s=120)
    assert sc.salloc_command(req) == [
        "salloc", "--no-shell", "--nodes=4", "--ntasks-per-node=1", "--exclusive", "--job-name=cvs-tasks",
        "--immediate=120", "--partition=mi300x", "--account=ops", "--time=00:30:00", "--reservation=val"]
    bare = sc.salloc_command(sc.AllocationRequest(nodes=2, job_name="x", nodelist="gpu[01-02]"))
    assert bare[-1] == "--nodelist=gpu[01-02]" and not any(a.startswith("--partition") for a in bare)


def test_salloc_output_granted_pending_and_refused():
    assert sc.parse_salloc("salloc: Granted job allocation 4242\n") == ("4242", None)
    job, why = sc.parse_salloc("salloc: Pending job allocation 17\nsalloc: job 17 queued and waiting for resources\n"
                               "salloc: error: Unable to allocate resources: Connection timed out\n")
    assert job == "17" and why == "Unable to allocate resources: Connection timed out"
    job, why = sc.parse_salloc("salloc: error: invalid partition specified: nope\n"
                               "salloc: error: Job submit/allocate failed: Invalid partition name specified\n")
    assert job is None and why == ("invalid partition specified: nope; "
                                   "Job submit/allocate failed: Invalid partition name specified")


def test_step_and_spread_commands():
    assert sc.step_command("9", "gpu01", "echo hi") == [
        "srun", "--jobid=9", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=gpu01", "--quiet",
        "--kill-on-bad-exit=0", "bash", "-c", "echo hi"]
    argv = sc.spread_command("9", ["gpu01", "gpu02"], {"gpu01": "bash /s/node0.sh", "gpu02": "bash /s/node1.sh"})
    assert argv[:6] == ["srun", "--jobid=9", "--overlap", "--nodes=2", "--ntasks-per-node=1", "--nodelist=gpu01,gpu02"]
    script = argv[-1]
    assert "gpu01) bash /s/node0.sh ;; gpu02) bash /s/node1.sh ;;" in script and "exit 97" in script


def test_oneliner_records_keep_reasons_with_spaces():
    text = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.1.0.1 NodeHostName=gpu01 "
            "State=IDLE+DRAIN ThreadsPerCore=1 Reason=bad xgmi link [root@2026-12-01T10:00:00]\n"
            "NodeName=gpu02 NodeAddr=10.1.0.2 State=IDLE Reason=(null)\n"
            "NodeName=gpu03 NodeAddr=10.1.0.3 State=DOWN* Reason=Not responding [slurm@2026-12-01T09:00:00]\n"
            "NodeName=gpu04 NodeAddr=10.1.0.4 State=ALLOCATED\n"
            "NodeName=gpu05 NodeAddr=10.1.0.5 State=IDLE*\n")
    nodes = sc.parse_nodes(text)
    assert nodes["gpu01"].reason == "bad xgmi link [root@2026-12-01T10:00:00]" and not nodes["gpu01"].usable
    assert nodes["gpu02"].reason == "" and nodes["gpu02"].usable and nodes["gpu02"].address == "10.1.0.2"
    assert not nodes["gpu03"].usable and nodes["gpu04"].usable and not nodes["gpu05"].usable


def test_job_record():
    info = sc.parse_job("JobId=31 JobName=cvs-tasks UserId=ops(1000) JobState=RUNNING Reason=None "
                        "TimeLimit=00:30:00 NodeList=gpu[01-02] BatchHost=gpu01\n")
    assert info == sc.JobInfo("31", "RUNNING", "gpu[01-02]", "None", "00:30:00") and info.running
    pending = sc.parse_job("JobId=32 JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:gpu03 NodeList=(null)\n")
    assert pending.nodelist == "" and not pending.running and not pending.ended
    assert sc.parse_job("JobId=33 JobState=TIMEOUT NodeList=gpu01\n").ended
    assert sc.parse_job("JobId=34 JobState=COMPLETING NodeList=gpu01\n").ended
    assert sc.parse_job("") is None


def test_step_failures_are_told_apart_from_the_task_exit():
    assert sc.step_failure("srun: error: gpu01: task 0: Exited with exit code 3\n") is None
    assert (sc.step_failure("srun: error: Unable to create step for job 5: Job/step already completing or "
                            "completed\n")
            == "the allocation cannot start a step: Job/step already completing or completed")
    assert sc.step_failure("srun: error: Slurm job 5 has expired\n") == "the allocation has ended"
    assert sc.step_failure("slurmstepd: error: *** STEP 5.3 ON gpu01 CANCELLED AT 2026-12-02T10:00:00 DUE TO "
                           "TIME LIMIT ***\n") == "the allocation hit its time limit"
    assert sc.step_failure("slurmstepd-gpu01: error: *** JOB 5 ON gpu01 CANCELLED AT 2026-12-02T10:00:00 ***\n") \
        == "the step was cancelled (scancel)"
    assert sc.step_failure("srun: error: Task launch for StepId=5.2 failed on node gpu02: Invalid node name\n") \
        == "task launch failed on gpu02: Invalid node name"
    assert sc.task_stderr("oops\nsrun: error: gpu01: task 0: Exited with exit code 3\n") == "oops\n"


def test_drain_lines_are_printed_quoted():
    assert drain_lines({"gpu02": "step time 31% above the median"}) == [
        "scontrol update NodeName=gpu02 State=DRAIN Reason='cvs-tasks: step time 31% above the median'"]


def test_enroot_uris_name_the_registry_with_a_hash():
    assert sc.enroot_uri("rocm/megatron-lm:v25.9") == "rocm/megatron-lm:v25.9"
    assert sc.enroot_uri("ubuntu:22.04") == "ubuntu:22.04"
    assert sc.enroot_uri("registry.example.com:5000/team/primus:v26.1") == "registry.example.com:5000#team/primus:v26.1"
    assert sc.enroot_uri("localhost/sim:latest") == "localhost#sim:latest"


def test_pyxis_options_for_creating_and_for_reusing_the_container():
    volumes = ["/home/ops:/home/ops", "/data/hf:/hf:ro", "/scratch:/scratch:ro,rslave"]
    assert sc.pyxis_args("megatron_8b", volumes, image="rocm/megatron-lm:v25.9") == [
        "--container-name=megatron_8b", "--container-image=rocm/megatron-lm:v25.9",
        "--container-mounts=/home/ops:/home/ops,/data/hf:/hf:ro,/scratch:/scratch:ro+rslave",
        "--no-container-mount-home", "--container-remap-root"]
    assert sc.pyxis_args("megatron_8b", []) == [
        "--container-name=megatron_8b", "--no-container-mount-home", "--container-remap-root"]
    with pytest.raises(ValueError, match="comma"):
        sc.pyxis_mounts(["/a,b:/c"])


def test_steps_carry_the_container_options_before_the_command():
    argv = sc.step_command("9", "gpu01", "true", ["--container-name=c"])
    assert argv[-4:] == ["--container-name=c", "bash", "-c", "true"]
    spread = sc.spread_command("9", ["gpu01"], {"gpu01": "run"}, ["--container-name=c"])
    assert spread[-4] == "--container-name=c" and spread[-3:-1] == ["bash", "-c"]


def test_launch_failures_name_each_node_srun_could_not_start_a_task_on():
    stderr = ("srun: error: Task launch for StepId=2.0 failed on node cvs-n2: Communication connection failure\n"
              "srun: error: Application launch failed: Communication connection failure\n"
              "slurmstepd-cvs-n0: error: *** STEP 2.0 ON cvs-n0 CANCELLED AT 2026-12-06T09:09:55 ***\n"
              "srun: error: cvs-n1: task 1: Killed\n")  # as Slurm 22.05 says it (docs/measured.md)
    assert sc.launch_failures(stderr) == {
        "cvs-n2": "Task launch for StepId=2.0 failed on node cvs-n2: Communication connection failure"}
    assert sc.launch_failures("srun: error: cvs-n1: task 1: Exited with exit code 3\n") == {}


def test_a_step_is_found_by_its_name_among_the_jobs_steps():
    assert sc.steps_command("4") == ["squeue", "--steps", "--noheader", "--jobs=4", "--format=%i %j"]
    listing = "4.0 cvs-abc\n4.1 cvs-def\n4.12 cvs-abc\n4.batch cvs-abc\nweird\n"
    assert sc.steps_named(listing, "cvs-abc") == ["4.0", "4.12"]
    assert sc.steps_named(listing, "cvs-x") == []
