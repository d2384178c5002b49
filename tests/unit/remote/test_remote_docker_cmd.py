"""Docker command builders: the exact strings that run on the nodes."""

from __future__ import annotations

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.remote import docker_cmd as dc


def spec(**over):
    container = {
        "lifetime": "per_run", "name": "cvs-megatron", "image": "rocm/megatron-lm:v25.9",
        "runtime": {"name": "docker", "args": {
            "network": "host", "ipc": "host", "privileged": True,
            "volumes": ["/home/u:/home/u", "/dev/infiniband:/dev/infiniband", "/home/u:/home/u"],
            "devices": ["/dev/kfd", "/dev/dri", "/dev/kfd"],
            "cap_add": ["SYS_PTRACE", "IPC_LOCK", "SYS_PTRACE"],
            "security_opt": ["seccomp=unconfined"], "group_add": ["video", "video"],
            "ulimit": ["memlock=-1", "nofile=1024:1024", "memlock=-1:-1"], "shm_size": "64g",
        }},
        "env": {"MASTER_ADDR": "10.0.0.1", "NNODES": "7", "NCCL_DEBUG": "WARN INFO"},
    }
    container.update(over)
    return dc.container_spec(container)


def test_run_command_has_each_flag_once_labels_env_and_nnodes_from_the_host_count():
    command = dc.run_command(spec(), run_id="20260101-120000", owner="alice@ctl", nnodes=2)
    assert command == (
        "docker run -d --name cvs-megatron --label cvs.run_id=20260101-120000 "
        "--label cvs.owner=alice@ctl --label cvs.name=cvs-megatron --network host --ipc host "
        "--privileged --shm-size 64g --device /dev/kfd --device /dev/dri "
        "-v /home/u:/home/u -v /dev/infiniband:/dev/infiniband "
        "--cap-add SYS_PTRACE --cap-add IPC_LOCK --security-opt seccomp=unconfined "
        "--group-add video --ulimit memlock=-1:-1 --ulimit nofile=1024:1024 "
        "-e MASTER_ADDR=10.0.0.1 -e 'NCCL_DEBUG=WARN INFO' -e NNODES=2 "
        "rocm/megatron-lm:v25.9 sleep infinity")


def test_a_bare_config_gets_every_container_default_once():
    bare = dc.container_spec({"name": "c", "image": "img", "runtime": {"name": "docker"}})
    assert dc.run_command(bare, run_id="r", owner="o", nnodes=1) == (
        "docker run -d --name c --label cvs.run_id=r --label cvs.owner=o --label cvs.name=c "
        "--network host --ipc host --privileged --device /dev/kfd --device /dev/dri --device /dev/infiniband "
        "--cap-add IPC_LOCK --cap-add SYS_PTRACE --security-opt seccomp=unconfined --group-add video "
        "--ulimit memlock=-1 -e NNODES=1 img sleep infinity")


def test_the_config_wins_over_each_default_and_nothing_appears_twice():
    args = {"network": "none", "ipc": "private", "privileged": False, "ulimit": {"memlock": 1024},
            "devices": ["/dev/kfd:/dev/kfd", "/dev/infiniband/rdma_cm"], "volumes": ["/dev/dri:/dev/dri"],
            "cap_add": ["cap_ipc_lock"], "security_opt": ["seccomp:/etc/docker/rocm.json"],
            "group_add": ["44"], "omit_defaults": ["cap_add:SYS_PTRACE"]}
    built = dc.container_spec({"name": "c", "image": "img", "runtime": {"name": "docker", "args": args}})
    assert dc.run_command(built, run_id="r", owner="o", nnodes=1) == (
        "docker run -d --name c --label cvs.run_id=r --label cvs.owner=o --label cvs.name=c "
        "--network none --ipc private --shm-size 64g --device /dev/kfd:/dev/kfd --device /dev/infiniband/rdma_cm "
        "-v /dev/dri:/dev/dri --cap-add cap_ipc_lock --security-opt seccomp:/etc/docker/rocm.json "
        "--group-add 44 --group-add video --ulimit memlock=1024 -e NNODES=1 img sleep infinity")


def test_every_default_can_be_left_out_and_other_runtimes_get_none():
    from cvs_tasks.config.container_defaults import DEFAULT_IDS

    none = dc.container_spec({"name": "c", "image": "img", "runtime": {
        "name": "docker", "args": {"omit_defaults": list(DEFAULT_IDS)}}})
    assert dc.run_command(none, run_id="r", owner="o", nnodes=1) == (
        "docker run -d --name c --label cvs.run_id=r --label cvs.owner=o --label cvs.name=c "
        "-e NNODES=1 img sleep infinity")
    pyxis = dc.container_spec({"name": "c", "image": "img", "runtime": {"name": "pyxis"}})
    assert pyxis.args.devices == () and pyxis.args.ulimit == ()


def test_a_pydantic_container_block_is_read_like_a_dict():
    from cvs_tasks.config.models import Container

    model = Container.model_validate({"name": "c", "image": "img", "runtime": {"name": "docker"}})
    built = dc.container_spec(model)
    assert (built.args.network, built.args.privileged, built.args.registry) == ("host", True, None)


def test_secret_looking_env_and_clashing_mounts_are_refused_naming_the_key():
    with pytest.raises(BadInput) as err:
        spec(env={"HF_TOKEN": "hf_abc"}, runtime={"name": "docker", "args": {
            "volumes": ["/a:/data", "/b:/data"]}})
    text = str(err.value)
    assert "container.env.HF_TOKEN: looks like a secret" in text
    assert "hf_abc" not in text
    assert "'/a:/data' and '/b:/data' both mount onto /data" in text


def test_unknown_lifetime_and_missing_image_are_reported_together():
    with pytest.raises(BadInput) as err:
        dc.container_spec({"name": "c", "lifetime": "forever", "runtime": {"name": "docker"}})
    assert "container.lifetime: 'forever' is not one of per_run, persistent, no_launch" in str(err.value)
    assert "container.image: required for the docker runtime" in str(err.value)


def test_login_reads_the_password_file_on_the_node_through_stdin():
    registry = dc.Registry("svc bot", "/etc/cvs/registry password", "registry.example:5000")
    assert dc.login_command(registry) == (
        "docker login --username 'svc bot' --password-stdin registry.example:5000 "
        "< '/etc/cvs/registry password'")
    assert dc.login_command(dc.Registry("u", "/p")) == "docker login --username u --password-stdin < /p"


def test_small_commands():
    assert dc.image_present_command("rocm/x:1") == "docker image inspect --format '{{.Id}}' rocm/x:1"
    assert dc.pull_command("rocm/x:1") == "docker pull rocm/x:1"
    assert dc.load_command("/data/img file.tar") == "docker load -i '/data/img file.tar'"
    assert dc.remove_command("a", "b") == "docker rm -f a b"
    assert dc.state_command("c") == "docker container inspect --format '{{.State.Status}}' c"
    assert dc.version_command() == "docker version --format '{{.Server.Version}}'"


def test_exec_quotes_the_whole_command_as_one_argument():
    assert dc.exec_command("c", "cd /w && echo \"$HOME\" 'x'") == (
        "docker exec c bash -lc 'cd /w && echo \"$HOME\" '\"'\"'x'\"'\"''")
    assert dc.host_shell_command("echo $X") == "bash -lc 'echo $X'"


def test_list_labelled_filters_by_run_and_owner():
    fmt = "'{{.Names}}\t{{.State}}\t{{.Label \"cvs.run_id\"}}\t{{.Label \"cvs.owner\"}}\t{{.Label \"cvs.name\"}}'"
    assert dc.list_labelled_command() == f"docker ps -a --filter label=cvs.run_id --format {fmt}"
    assert dc.list_labelled_command(run_id="r1", owner="bob") == (
        f"docker ps -a --filter label=cvs.run_id=r1 --filter label=cvs.owner=bob --format {fmt}")
