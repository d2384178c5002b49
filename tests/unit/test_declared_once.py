"""A backend, runtime or scheduler name is compared only in the module that declares it (issues #28, #25).

Everywhere else the code asks the object (``backends.get(name).checkpoint_test``,
``runtimes.get(name).host_pids``, ``schedulers.for_cluster(cluster).assigns_nodes``), so a new
backend, runtime or scheduler is one module, not a hunt through the tree. The scan reads
``cvs_tasks/**/*.py`` with ``tokenize``: only string tokens count, so a name in a comment or
inside a docstring's text never trips it. A string literal holding a
declared name is a comparison when it stands next to ``==``, ``!=``, ``is``, ``in`` or
``not in``, sits in a tuple, list or set right after ``in`` / ``not in``, or is a ``case``
pattern. The log dialects ``megatron`` and ``primus`` share the backends' names: they are a
metrics concept, declared in ``metrics.parser.DIALECTS``, and compared only under ``metrics/``.
"""

from __future__ import annotations

import ast
import inspect
import io
import tokenize
from pathlib import Path

from cvs_tasks import backends, runtimes, schedulers
from cvs_tasks.metrics.parser import DIALECTS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cvs_tasks"
DIALECT_HOME = "cvs_tasks/metrics/"
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
OPENERS = {"(": ")", "[": "]", "{": "}"}


def _value(token: str) -> str | None:
    """The text of a plain string literal token (None for bytes, f-strings or anything odd)."""
    prefix = token[: len(token) - len(token.lstrip("rRuUbBfF"))].lower()
    if "b" in prefix or "f" in prefix:
        return None
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string literal in ``source`` holding one of ``names`` that is compared."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in SKIP]
    found: list[tuple[int, str]] = []
    groups: list[bool] = []  # per open bracket: does it follow a membership `in` / `not in`?
    loops = [False]  # per bracket depth: a `for` waits for its `in` (iteration, not membership)
    membership = set()  # indices of the `in` tokens that test membership
    case_line = False  # inside a `case ...:` pattern
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.type == tokenize.NAME and tok.string == "for":
            loops[-1] = True
        if tok.type == tokenize.NAME and tok.string == "in":
            if loops[-1]:
                loops[-1] = False
            else:
                membership.add(i)
        if tok.type == tokenize.NAME and tok.string == "case" and (prev is None or prev.start[0] != tok.start[0]):
            case_line = True
        if tok.type == tokenize.OP and tok.string == ":" and case_line and not groups:
            case_line = False
        if tok.type == tokenize.OP and tok.string in OPENERS:
            groups.append(i - 1 in membership)
            loops.append(False)
            continue
        if tok.type == tokenize.OP and tok.string in OPENERS.values():
            if groups:
                groups.pop()
                loops.pop()
            continue
        if tok.type != tokenize.STRING:
            continue
        value = _value(tok.string)
        if value not in names:
            continue
        compared = (
            (prev is not None and prev.string in ("==", "!=", "is"))
            or (after is not None and after.string in ("==", "!=", "is", "in", "not"))
            or (bool(groups) and groups[-1])
            or case_line
        )
        if compared:
            found.append((tok.start[0], value))
    return found


def declarations() -> dict[str, str]:
    """name -> the file (relative to the repository) that declares it."""
    declared = {b.name: _relative(inspect.getsourcefile(type(b))) for b in backends.all_backends()}
    declared.update({name: _relative(runtimes.__file__) for name in runtimes.names()})
    declared.update({name: _relative(inspect.getsourcefile(type(schedulers.get(name)))) for name in schedulers.names()})
    return declared


def _relative(path: str | None) -> str:
    return Path(path or "").resolve().relative_to(ROOT).as_posix()


def misplaced(sources: list[tuple[str, str]]) -> list[str]:
    """``file:line: name`` for every comparison outside the name's own declaration; ``sources``
    are (path relative to the repository, text) pairs."""
    declared = declarations()
    dialects = set(DIALECTS)
    out = []
    for where, text in sources:
        for line, name in comparisons(text, set(declared)):
            if where == declared[name] or (name in dialects and where.startswith(DIALECT_HOME)):
                continue
            out.append(f"{where}:{line}: {name!r}")
    return out


def test_no_backend_runtime_or_scheduler_name_is_compared_outside_its_declaration():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    problems = misplaced([(_relative(str(f)), f.read_text(encoding="utf-8")) for f in files])
    assert not problems, ("compare the backend's, runtime's or scheduler's property, not its name "
                          "(cvs_tasks/backends.py, cvs_tasks/runtimes.py, cvs_tasks/schedulers.py):\n"
                          + "\n".join(problems))


def test_every_declared_name_has_one_home():
    declared = declarations()
    assert declared["megatron"] == "cvs_tasks/jobs/megatron.py"
    assert declared["primus"] == "cvs_tasks/jobs/primus.py"
    assert {declared[n] for n in ("docker", "host", "pyxis")} == {"cvs_tasks/runtimes.py"}
    assert declared["static"] == "cvs_tasks/lifecycle/static_nodes.py"
    assert declared["slurm"] == "cvs_tasks/lifecycle/slurm_nodes.py"


NAMES = {"primus", "megatron", "docker", "host", "pyxis"}


def test_the_scan_finds_each_form_of_comparison():
    source = '''
if job.backend == "primus":
    pass
ok = "docker" != runtime
host_pids = runtime in ("host", "pyxis")
other = name not in ["megatron"]
picked = [k for k in kinds if k.name in {"pyxis"}]
found = "primus" in image.lower()
same = kind is "host"
match backend:
    case "megatron" | "primus":
        pass
'''
    assert comparisons(source, NAMES) == [(2, "primus"), (4, "docker"), (5, "host"), (5, "pyxis"),
                                          (6, "megatron"), (7, "pyxis"), (8, "primus"), (9, "host"),
                                          (11, "megatron"), (11, "primus")]


def test_the_scan_ignores_comments_docstrings_and_other_uses():
    source = '''
def f(x):
    """Runs when backend == "primus" or runtime in ("host", "pyxis")."""
    # if backend == "primus": a comment
    problem = identifier_problem("host", x)
    labels = {"megatron": "Megatron-LM"}
    default = spec.get("name", "docker")
    call("host") == x.other
    values = [data.get(k) for k in ("host", "pid")]
    for name in ("docker", "host"):
        pass
    return f"{x} == primus"
'''
    assert comparisons(source, NAMES) == []


def test_a_comparison_outside_its_declaration_is_named_with_file_and_line():
    branch = 'def stray(job):\n    """One backend."""\n    return job.backend == "primus"\n'
    assert misplaced([("cvs_tasks/jobs/spec.py", branch)]) == ["cvs_tasks/jobs/spec.py:3: 'primus'"]
    assert misplaced([("cvs_tasks/jobs/primus.py", branch)]) == []  # its own declaration
    assert misplaced([("cvs_tasks/metrics/summary.py", branch)]) == []  # the log dialect of that name
    pids = 'kill = runtime not in ("host", "pyxis")\n'
    assert misplaced([("cvs_tasks/metrics/summary.py", pids)]) == ["cvs_tasks/metrics/summary.py:1: 'host'",
                                                                   "cvs_tasks/metrics/summary.py:1: 'pyxis'"]
