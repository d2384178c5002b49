"""The testbeds' sshd config texts, byte for byte as f32cf36 wrote them.

``testbed.up`` restarts an up node's sshd when the text it would write differs from the one on
disk, so a refactor of the shared options (``daemons.sshd_login_lines``) must not move a byte."""

from __future__ import annotations

from pathlib import Path

from testbed import daemons, light

_LOGIN_GOLDEN = (  # in both texts, as written out at f32cf36 (not taken from the code under test)
    "PubkeyAuthentication yes\n"
    "PasswordAuthentication no\n"
    "KbdInteractiveAuthentication no\n"
    "UsePAM no\n"
    "PermitRootLogin prohibit-password\n"
    "StrictModes no\n"
    "UseDNS no\n"
    "PrintMotd no\n"
)

_NODE_GOLDEN = (
    "# cvs-testbed node sshd (generated)\n"
    "ListenAddress 127.0.0.2:22\n"
    "HostKey /srv/tb/node2/ssh_host_ed25519_key\n"
    "PidFile /srv/tb/node2/sshd.pid\n"
    "AuthorizedKeysFile /srv/tb/authorized_keys\n"
    + _LOGIN_GOLDEN +
    "MaxStartups 200:30:400\n"
    "MaxSessions 64\n"
    "LogLevel ERROR\n"
    "SetEnv DOCKER_HOST=unix:///run/cvs-tb/n2/docker.sock CVS_SIM_NODE_DIR=/srv/tb/node2{sys} "
    "PATH=/srv/tb/node2/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    "Subsystem sftp /usr/lib/openssh/sftp-server\n"
)

_LIGHT_GOLDEN = (
    "# cvs light testbed sshd: 2 node(s) on 127.1.x.y:2322 (generated)\n"
    "ListenAddress 127.1.0.1:2322\n"
    "ListenAddress 127.1.0.2:2322\n"
    "HostKey /srv/light/sshd/ssh_host_ed25519_key\n"
    "PidFile /srv/light/sshd/sshd.pid\n"
    "AuthorizedKeysFile /srv/light/authorized_keys\n"
    "AllowUsers root@127.0.0.0/8\n"
    + _LOGIN_GOLDEN +
    "MaxStartups 128:30:512\n"
    "MaxSessions 16\n"
    "LogLevel ERROR\n"
    "Subsystem sftp /usr/lib/openssh/sftp-server\n"
    "Match LocalAddress 127.1.0.1\n"
    "  SetEnv CVS_SIM_NODE_DIR=/srv/light/nodes/node0 CVS_LIGHT_NODE=0 HOME=/srv/light/home "
    "PATH=/srv/light/sshd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    "Match LocalAddress 127.1.0.2\n"
    "  SetEnv CVS_SIM_NODE_DIR=/srv/light/nodes/node1 CVS_LIGHT_NODE=1 HOME=/srv/light/home "
    "PATH=/srv/light/sshd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
)

_PATHS = daemons.NodePaths(Path("/srv/tb/node2"), Path("/run/cvs-tb/n2"))
_DOCKER = "unix:///run/cvs-tb/n2/docker.sock"


def test_a_normal_nodes_sshd_config_is_byte_identical_to_f32cf36s():
    text = daemons.sshd_config_text("127.0.0.2", _PATHS, Path("/srv/tb/authorized_keys"), _DOCKER)
    assert text == _NODE_GOLDEN.format(sys="")


def test_a_normal_nodes_sshd_config_with_its_sys_tree_is_byte_identical_to_f32cf36s():
    text = daemons.sshd_config_text("127.0.0.2", _PATHS, Path("/srv/tb/authorized_keys"), _DOCKER,
                                    Path("/srv/tb/shared/node_sys/2"))
    assert text == _NODE_GOLDEN.format(sys=" CVS_SIM_NODE_SYS=/srv/tb/shared/node_sys/2")


def test_the_light_testbeds_sshd_config_is_byte_identical_to_f32cf36s():
    text = light.sshd_config_text(Path("/srv/light"), 2, 2322, Path("/srv/light/authorized_keys"))
    assert text == _LIGHT_GOLDEN


def test_both_testbeds_take_their_login_options_from_the_one_list():
    node = daemons.sshd_config_text("127.0.0.2", _PATHS, Path("/k"), _DOCKER).splitlines()
    lite = light.sshd_config_text(Path("/srv/light"), 2, 2322, Path("/k")).splitlines()
    for line in daemons.SSHD_KEY_LOGIN_ONLY:
        assert line in node and line in lite
