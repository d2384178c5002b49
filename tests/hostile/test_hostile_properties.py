"""Property-based checks of the one validation layer and the quoting helpers, on generated text:
whatever a name is, an accepted one is a single safe path component, a refused one is a clear
problem (never an exception); whatever a comment or a quoted word holds, bash sees exactly that."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvs_tasks.config.sweep import parse_combo_key
from cvs_tasks.errors import BadInput
from cvs_tasks.identifiers import GRAMMARS, identifier_problem
from cvs_tasks.inputs import InputRefused, parse_json
from cvs_tasks.jobs.shell import comment, q
from cvs_tasks.run.records import combo_dir
from cvs_tasks.run.rundir import check_run_flag

hostile_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60) | st.sampled_from([
    "..", ".", "a/..", "../x", "x\n", "\nx", "r1\ntouch x #", "-rf", "--privileged", "a b", "٤", "²",
    "\u202e", "\x1b[2J", "x\x00y", "MBS=4,GBS=128,PRECISION=FP8\n", "MBS=4,GBS=128,PRECISION=FP8/..",
])
no_nul = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80)


def is_safe_component(name: str) -> bool:
    return (name.isascii() and name not in (".", "..") and "/" not in name and ".." not in name
            and all(" " < ch <= "~" for ch in name) and not name.startswith("-") and Path(name).name == name)


PATH_LIKE = ("image", "registry", "tokenizer")  # repo ids and local paths: several segments


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(sorted(k for k in GRAMMARS if k not in PATH_LIKE)), name=hostile_text)
def test_an_accepted_name_is_one_safe_path_component(kind, name):
    problem = identifier_problem(kind, name)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        assert is_safe_component(name), (kind, name)


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(PATH_LIKE), name=hostile_text)
def test_an_accepted_path_like_name_has_no_parent_or_unsafe_segment(kind, name):
    if identifier_problem(kind, name) is None:
        assert ".." not in name.split("/") and not name.startswith("-"), (kind, name)
        assert name.isascii() and all(" " < ch <= "~" for ch in name), (kind, name)


@settings(max_examples=300, deadline=None)
@given(run=hostile_text)
def test_a_run_flag_is_accepted_only_as_a_safe_run_id(run):
    try:
        check_run_flag(run)
    except BadInput as exc:
        assert "--run" in str(exc)
    else:
        assert is_safe_component(Path(run).name)


@settings(max_examples=300, deadline=None)
@given(key=hostile_text | st.builds(lambda a, b, c: f"MBS={a},GBS={b},PRECISION={c}",
                                    hostile_text, hostile_text, hostile_text))
def test_a_parsed_sweep_key_names_a_safe_folder(key):
    if parse_combo_key(key) is not None:
        folder = combo_dir(key)
        assert is_safe_component(folder), (key, folder)
        assert set(folder) <= set("._-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        assert "\n" not in key and "/" not in key


@settings(max_examples=40, deadline=None)
@given(text=no_nul)
def test_a_comment_line_stays_a_comment_in_bash(text):
    line = comment(text)
    assert "\n" not in line and "\r" not in line and line.startswith("# ")
    out = subprocess.run(["bash", "-c", f"{line}\necho ok"], capture_output=True, text=True, timeout=10)
    assert out.stdout == "ok\n" and out.returncode == 0


@settings(max_examples=40, deadline=None)
@given(text=no_nul)
def test_a_quoted_word_reaches_the_command_unchanged(text):
    out = subprocess.run(["bash", "-c", f"printf %s {q(text)}"], capture_output=True, timeout=10)
    assert out.stdout == text.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("text, words", [
    ("[" * 100 + "]" * 100, "nested 100 levels deep"),
    ('{"a": ' * 70 + "1" + "}" * 70, "nested 70 levels deep"),
    ('{"a": 1' + "0" * 31 + "}", "32 digits"),
    ('{"a": NaN}', "NaN"),
    ('{"a": 1e400}', "out of range"),
    ('{"a": "\\udfff"}', "lone surrogate"),
    ('{"\\ud800": 1}', "lone surrogate"),
    ('{"a": 1, "a": 2}', "appears twice"),
    ('{"a": [1, 2', "invalid JSON"),
])
def test_parse_limits_are_input_errors(text, words):
    with pytest.raises(InputRefused) as info:
        parse_json(text, "f.json", "config")
    assert words in str(info.value) and info.value.exit_code == 2


def test_depth_inside_strings_does_not_count():
    assert parse_json('{"a": "' + "[" * 1000 + '"}', "f.json", "config") == {"a": "[" * 1000}


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_any_bytes_parse_or_are_refused(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        parse_json(text, "f.json", "config")
    except InputRefused:
        pass


# --- the wrapper scripts themselves ------------------------------------------------------------

def _job(**changes):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "jobs"))
    from jobs_factory import make_job

    return make_job(**changes)


@pytest.mark.parametrize("backend", ["megatron", "primus"])
@pytest.mark.parametrize("field, value", [
    ("label", "MBS=4,GBS=128,PRECISION=FP8\ntouch pwned #"), ("label", "../../etc"), ("label", ".."),
    ("run_id", "r1\ntouch x #"), ("run_id", ".."), ("run_id", "a/b"),
])
def test_a_job_with_a_hostile_name_is_never_built(backend, field, value):
    from cvs_tasks.jobs.spec import JobSetupError, build_launch

    with pytest.raises(JobSetupError):
        build_launch(_job(backend=backend, **{field: value}), experiment="examples/x.yaml")


@settings(max_examples=25, deadline=None)
@given(text=no_nul)
def test_free_text_in_train_params_cannot_add_a_line_to_the_wrapper(text):
    """Whatever megatron_root holds (it is written into a `cd`, an echo and the launch line), the
    script parses and its top-level commands are the same as with a plain path: the text stays
    inside quoted words."""
    from cvs_tasks.jobs.spec import build_launch

    def commands(root: str) -> list[str]:
        job = _job(train_params={**_job().train_params, "megatron_root": root})
        script = build_launch(job).nodes[0].script_text
        checked = subprocess.run(["bash", "-n"], input=script.encode("utf-8", "surrogateescape"),
                                 capture_output=True, timeout=10)
        assert checked.returncode == 0, checked.stderr
        # bash's own view of the script: `declare -f` of it wrapped in a function lists every command
        shown = subprocess.run(["bash", "-c", "f() {\n" + script + "\n}\ndeclare -f f"],
                               capture_output=True, timeout=10)
        return [line.split()[0] for line in shown.stdout.decode("utf-8", "replace").splitlines()
                if line.startswith("    ") and not line.startswith("     ") and line.split()]

    plain = commands("/workspace/Megatron-LM")
    assert "cd" in plain and "export" in plain  # the comparison sees the script's real commands
    assert commands(text) == plain
