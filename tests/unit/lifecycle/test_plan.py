import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.plan import choose_suite, suite_from_name


@pytest.mark.parametrize(
    "name, expected",
    [
        ("mi3xx_megatron_llama-3.1-8b_single.json", "single"),
        ("mi3xx_megatron_llama-3.3-70b_distributed.json", "distributed"),
        ("site.json", None),
    ],
)
def test_suite_is_read_from_the_config_name(name, expected):
    assert suite_from_name(name) == expected


def test_host_count_decides_when_the_name_does_not():
    assert choose_suite(None, "site.json", 1) == "single"
    assert choose_suite(None, "site.json", 4) == "distributed"


def test_single_config_on_a_multi_host_cluster_is_refused_with_a_way_out():
    with pytest.raises(BadInput, match="one host"):
        choose_suite(None, "x_single.json", 2)


def test_distributed_config_needs_two_hosts():
    with pytest.raises(BadInput, match="node_dict"):
        choose_suite(None, "x_distributed.json", 1)


def test_explicit_suite_must_agree_with_the_config_name():
    with pytest.raises(BadInput, match="does not match"):
        choose_suite("distributed", "x_single.json", 2)
    assert choose_suite("distributed", "site.json", 2) == "distributed"


def test_unknown_suite_flag():
    with pytest.raises(BadInput, match="single' or 'distributed"):
        choose_suite("multi", "site.json", 2)
