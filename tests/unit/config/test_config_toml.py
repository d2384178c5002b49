"""TOML as well as JSON: same models, same messages, annotated templates that round-trip."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from config_helpers import FP8, fill_template, minimal_config, minimal_thresholds, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvs_tasks.config import (
    ConfigError,
    copy_template,
    list_templates,
    load_cluster,
    load_suite,
    load_threshold_file,
    parse_cluster,
    template_toml,
)
from cvs_tasks.config.placeholders import strip_comments
from cvs_tasks.config.templates import annotated_toml
from cvs_tasks.plan import make_plan

REPO = Path(__file__).resolve().parents[3]
TEMPLATES = list_templates()


def write_toml(path: Path, data: dict, kind: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(annotated_toml(data, kind), encoding="utf-8")
    return path


def strip_none(value):
    """What a JSON file means once written as TOML, which has no null: the key is left out."""
    if isinstance(value, dict):
        return {k: strip_none(v) for k, v in value.items() if v is not None}
    return value


def nodes(count: int) -> dict:
    return {"username": "ops", "priv_key_file": "/home/ops/.ssh/id_ed25519",
            "node_dict": {f"10.0.0.{i}": ({"port": 2222} if i == 2 else {}) for i in range(1, count + 1)}}


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.name for t in TEMPLATES])
def test_every_template_as_annotated_toml_holds_the_same_data(template):
    raw = json.loads(template.path.read_text())
    text = template_toml(template)
    assert strip_none(strip_comments(raw)) == tomllib.loads(text)
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert len(comments) >= 3 and template.name in text


@pytest.mark.parametrize("template", [t for t in TEMPLATES if t.kind == "config"], ids=lambda t: t.name)
def test_every_config_field_in_the_toml_template_has_a_comment_above_it(template):
    lines = template_toml(template).splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith(("#", " ", "]")) and not line.startswith("["):
            above = lines[i - 1]
            assert above.startswith("#"), f"no comment above {line!r}"


@pytest.mark.parametrize("template", [t for t in TEMPLATES if t.kind == "threshold"], ids=lambda t: t.name)
def test_threshold_templates_round_trip_to_the_same_model(template, tmp_path):
    toml_path = tmp_path / template.name.replace(".json", ".toml")
    toml_path.write_text(template_toml(template))
    cells_json, _, problems_json, _ = load_threshold_file(template.path)
    cells_toml, _, problems_toml, _ = load_threshold_file(toml_path)
    assert problems_json == problems_toml == []
    assert cells_toml == cells_json


@pytest.mark.parametrize("template", [t for t in TEMPLATES if t.kind == "cluster"], ids=lambda t: t.name)
def test_cluster_templates_round_trip_to_the_same_model(template, tmp_path):
    toml_path = tmp_path / template.name.replace(".json", ".toml")
    toml_path.write_text(template_toml(template))
    results = []
    for path in (template.path, toml_path):
        try:
            cluster = load_cluster(path)
            results.append((cluster.username, cluster.priv_key_file, cluster.hosts, cluster.known_hosts))
        except ConfigError as exc:
            results.append(exc.problems)
    assert results[0] == results[1]


@pytest.mark.parametrize("template", [t for t in TEMPLATES if t.kind == "config"], ids=lambda t: t.name)
def test_config_templates_as_shipped_fail_with_the_same_problems(template, tmp_path):
    raw = json.loads(template.path.read_text())
    problems = []
    for path in (write_json(tmp_path / template.name, raw),
                 write_toml(tmp_path / template.name.replace(".json", ".toml"), raw, "config")):
        with pytest.raises(ConfigError) as info:
            load_suite(path)
        problems.append(info.value.problems)
    assert problems[0] == problems[1] and problems[0]


@pytest.mark.parametrize("name, count", [("mi3xx_megatron_llama-3.1-8b_distributed.json", 2),
                                         ("mi3xx_megatron_llama-3.1-405b_distributed.json", 4)])
def test_a_toml_suite_and_a_json_suite_load_to_the_same_plan(name, count, tmp_path):
    filled = fill_template(json.loads((REPO / "configs" / name).read_text()), gpu="MI300X", config_name=name)
    filled["threshold_json"] = ""  # the threshold file next to the config, in the config's own format
    threshold = json.loads((REPO / "thresholds" / filled_threshold_name(name)).read_text())
    plans = []
    for fmt in ("json", "toml"):
        folder = tmp_path / fmt
        config_path = folder / name.replace(".json", f".{fmt}")
        write = write_json if fmt == "json" else (lambda p, d: write_toml(p, d, "config"))
        write(config_path, filled)
        if fmt == "json":
            write_json(folder / filled_threshold_name(name), threshold)
            cluster = parse_cluster(nodes(count), folder / "cluster.json")
        else:
            write_toml(folder / filled_threshold_name(name).replace(".json", ".toml"), threshold, "threshold")
            cluster = load_cluster(write_toml(folder / "cluster.toml", nodes(count), "cluster"))
        suite = load_suite(config_path, cluster)
        plans.append((make_plan(suite, cluster), suite))
    (plan_a, suite_a), (plan_b, suite_b) = plans
    assert suite_a.threshold_path.suffix == ".json" and suite_b.threshold_path.suffix == ".toml"
    assert suite_a.config == suite_b.config
    assert suite_a.combos == suite_b.combos and suite_a.thresholds == suite_b.thresholds
    assert suite_a.backend == suite_b.backend
    assert (plan_a.mode, plan_a.hosts, plan_a.env) == (plan_b.mode, plan_b.hosts, plan_b.env)
    assert plan_a.manifest_fields() == plan_b.manifest_fields()


def filled_threshold_name(config_name: str) -> str:
    return f"mi300x_{config_name.split('_', 1)[1].removesuffix('.json')}_threshold.json"


def test_toml_model_errors_name_the_file_and_the_same_dotted_paths(tmp_path):
    config = minimal_config()
    config["container"]["runtime"]["name"] = "podman"
    config["sweep"]["combinations"][FP8]["training_iterations"] = "twenty"
    config["watch"] = {"poll_intervall_s": 1.0}
    messages = []
    for path in (write_json(tmp_path / "j" / "s.json", config),
                 write_toml(tmp_path / "t" / "s.toml", config, "config")):
        write_json(path.parent / "thr.json", minimal_thresholds())
        with pytest.raises(ConfigError) as info:
            load_suite(path)
        assert str(path) in str(info.value)
        messages.append(info.value.problems)
    assert messages[0] == messages[1]
    assert {"container.runtime.name", "watch.poll_intervall_s"} <= {where for where, _ in messages[1]}


@pytest.mark.parametrize("text, where, words", [
    ('gpu_name = "MI300X"\ngpus_per_node = \n', "line 2 column 17", "invalid TOML"),
    ('gpu_name = "MI300X"\ngpu_name = "MI325X"\n', "line 2", "defined twice"),
    ('[watch]\npoll_interval_s = nan\n', "watch.poll_interval_s", "not a finite number"),
    ('[paths]\nlog_dir = 2026-12-03\n', "paths.log_dir", "date/time"),
    ('n = 1234567890123456789012345678901\n', "n", "digits"),
    ("x = " + "[" * 70 + "]" * 70 + "\n", "", "nested"),
])
def test_toml_syntax_and_limits_name_file_and_line_or_key(tmp_path, text, where, words):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    rendered = str(info.value)
    assert str(path) in rendered and words in rendered and where in rendered


def test_copy_format_toml_writes_annotated_files_that_load_once_filled(tmp_path):
    written = copy_template("mi355x_megatron_llama-3.1-8b_single.json", f"{tmp_path}/", with_thresholds=True,
                            fmt="toml")
    assert [p.name for p in written] == ["mi355x_megatron_llama-3.1-8b_single.toml",
                                         "mi355x_megatron_llama-3.1-8b_single_threshold.toml"]
    assert "# Image to run;" in written[0].read_text()
    # a site fills the placeholders and names the TOML threshold file
    data = fill_template(tomllib.loads(written[0].read_text()), gpu="MI355X",
                         config_name="mi355x_megatron_llama-3.1-8b_single.json")
    data["threshold_json"] = written[1].name
    suite = load_suite(write_toml(tmp_path / "site.toml", data, "config"))
    assert suite.threshold_path == written[1] and suite.combos
    by_name = copy_template("mi355x_megatron_llama-3.1-8b_single.toml", tmp_path / "x.toml")
    assert tomllib.loads(by_name[0].read_text()) == tomllib.loads(written[0].read_text())


def test_an_unquoted_dotted_metric_name_in_toml_is_explained(tmp_path):
    path = tmp_path / "x_threshold.toml"
    path.write_text('["MBS=4,GBS=128,PRECISION=FP8"]\ntraining.throughput_per_gpu = {kind = "min", value = 400}\n')
    _, _, problems, _ = load_threshold_file(path)
    [(where, message)] = problems
    assert where == '["MBS=4,GBS=128,PRECISION=FP8"].training' and "quote the metric name" in message

TOML_BITS = st.sampled_from(['[a]', '[[a]]', 'a = ', '"x"', "'y'", '1', '1.5', 'nan', 'inf', '-0', 'true', '{', '}',
                             '[', ']', ',', '=', '.', '\n', ' ', '#c', '1979-05-27', '07:32:00', '"""', 'b.c',
                             '"MBS=4,GBS=128,PRECISION=FP8"', '\\u0000', '0x1F', '1e999'])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(TOML_BITS, max_size=40).map("".join))
def test_any_toml_text_is_a_config_error_or_a_load_never_a_traceback(tmp_path, text):
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    for load in (load_suite, load_cluster, lambda p: load_threshold_file(p)):
        try:
            load(path)
        except ConfigError as exc:
            assert str(path) in str(exc)
