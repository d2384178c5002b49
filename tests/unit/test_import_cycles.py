"""cvs_tasks has no import cycle: none between modules, none between its packages.

The import graph is read from the source (``ast`` over every module): ``import a.b`` and
``from a.b import c`` are edges to ``a.b`` (or to ``a.b.c`` when that is a module) and to every
package on the way that is not the importer's own ancestor (importing runs its ``__init__``).
Imports under ``if TYPE_CHECKING:`` never run and are left out. An import at module level (also in
a class body or an ``if``/``try`` there) runs when the module is imported; one inside a function
runs when the function is called. A cycle through module-level imports alone is an import-order
bug waiting to happen and fails. A cycle that needs a function-level import does not break
importing but still ties two layers together; those are listed in ``DEFERRED`` with what closes
them, and any other one fails, as does an entry of ``DEFERRED`` that no longer exists.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "cvs_tasks"

DEFERRED: dict[frozenset[str], str] = {}
"""Function-level cycles tolerated for now, each with the import that closes it (none today: the last
three were broken by moving ``run_diagnose`` into ``flow``, the token path into ``jobspec`` and the
probe framing into ``fingerprint``)."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    deferred: bool  # the import runs inside a function
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({'in a function' if self.deferred else 'module level'}, {self.where})"


def modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` under ``root``."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(name: str, importer: str, known: dict[str, Path]) -> list[str]:
    """``name`` and the packages on its way that importing it runs (not the importer's ancestors)."""
    parts = name.split(".")
    chain = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ancestors = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    return [m for m in chain if m in known and m not in ancestors and m != importer]


def imports(name: str, path: Path, known: dict[str, Path], root: Path) -> list[Edge]:
    """Every edge from module ``name`` to another module of ``known``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    rel = path.relative_to(root)
    edges: list[Edge] = []

    def add(target: str, node: ast.stmt, deferred: bool) -> None:
        for t in _targets(target, name, known):
            edges.append(Edge(name, t, deferred, f"{rel}:{node.lineno}"))

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]), deferred)
                continue
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, child, deferred)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    package = package[:len(package) - child.level + 1]
                    base = ".".join(package + ([base] if base else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in known else base, child, deferred)
            visit(child, inner)

    visit(tree, False)
    return edges


def graph(root: Path = ROOT, package: str = PACKAGE) -> list[Edge]:
    known = modules(root, package)
    return [edge for name, path in known.items() for edge in imports(name, path, known, root)]


def package_of(module: str, package: str = PACKAGE) -> str:
    """The first level below ``package``: ``cvs_tasks.config.load`` -> ``cvs_tasks.config``."""
    return ".".join(module.split(".")[:2]) if module != package else module


def cycles(edges: list[Edge]) -> list[tuple[frozenset[str], list[Edge]]]:
    """Each strongly connected set of two or more nodes, with one closed walk through it (Tarjan)."""
    succ: dict[str, dict[str, Edge]] = {}
    for e in edges:
        if e.source != e.target:
            succ.setdefault(e.source, {}).setdefault(e.target, e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in succ.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(frozenset(members))

    for v in sorted(succ):
        if v not in index:
            strong(v)
    return [(members, _walk(members, succ)) for members in found]


def _walk(members: frozenset[str], succ: dict[str, dict[str, Edge]]) -> list[Edge]:
    """A shortest cycle through the first member, inside ``members``."""
    start = min(members)
    paths: dict[str, list[Edge]] = {start: []}
    queue = [start]
    for node in queue:
        for nxt, edge in sorted(succ.get(node, {}).items()):
            if nxt == start:
                return paths[node] + [edge]
            if nxt in members and nxt not in paths:
                paths[nxt] = paths[node] + [edge]
                queue.append(nxt)
    return []


def lifted(edges: list[Edge], package: str = PACKAGE) -> list[Edge]:
    """The same edges between packages (``cvs_tasks.<sub>``) instead of modules."""
    return [Edge(package_of(e.source, package), package_of(e.target, package), e.deferred, e.where)
            for e in edges if package_of(e.source, package) != package_of(e.target, package)]


def describe(found: list[tuple[frozenset[str], list[Edge]]]) -> str:
    return "\n".join(f"  {', '.join(sorted(members))}:\n" + "".join(f"    {e}\n" for e in walk)
                     for members, walk in found)


def _all_cycles(edges: list[Edge]) -> list[tuple[frozenset[str], list[Edge]]]:
    return cycles(edges) + cycles(lifted(edges))


def test_no_cycle_through_module_level_imports():
    edges = graph()
    found = _all_cycles([e for e in edges if not e.deferred])
    assert not found, ("import cycles through module-level imports:\n" + describe(found)
                       + "\nfunction-level cycles, for context:\n" + describe(_all_cycles(edges)))


def test_no_cycle_through_function_level_imports_but_the_known_ones():
    found = _all_cycles(graph())
    new = [(members, walk) for members, walk in found if members not in DEFERRED]
    assert not new, "new import cycles (an import inside a function closes each):\n" + describe(new)
    gone = [", ".join(sorted(members)) for members in DEFERRED if members not in {m for m, _ in found}]
    assert not gone, f"no longer a cycle, remove from DEFERRED: {gone}"


def test_history_and_report_do_not_import_each_other():
    between = [e for e in lifted(graph()) if {e.source, e.target} == {"cvs_tasks.history", "cvs_tasks.report"}]
    assert [str(e) for e in between if e.source == "cvs_tasks.report"] == []


def test_the_graph_sees_the_package():
    edges = graph()
    assert len(modules(ROOT)) > 100 and len(edges) > 300
    assert any(e.deferred for e in edges) and any(not e.deferred for e in edges)


# --- the graph and cycle finder on planted packages ----------------------------------------------

def _plant(root: Path, files: dict[str, str]) -> list[Edge]:
    for rel, text in {"pkg/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return graph(root, "pkg")


def test_a_function_level_cycle_is_found_and_told_apart(tmp_path):
    edges = _plant(tmp_path, {
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from pkg.a import thing\n",
    })
    assert [str(e) for e in edges] == ["pkg.a -> pkg.b (module level, pkg/a.py:1)",
                                       "pkg.b -> pkg.a (in a function, pkg/b.py:2)"]
    assert cycles([e for e in edges if not e.deferred]) == []
    ((members, walk),) = cycles(edges)
    assert members == {"pkg.a", "pkg.b"} and [e.target for e in walk] == ["pkg.b", "pkg.a"]


def test_module_level_cycles_through_relative_imports_and_package_inits(tmp_path):
    edges = _plant(tmp_path, {
        "pkg/x/__init__.py": "from .load import run\n",
        "pkg/x/load.py": "from ..y.util import helper\n",
        "pkg/y/__init__.py": "",
        "pkg/y/util.py": "import pkg.x.names\n",
        "pkg/x/names.py": "",
    })
    found = cycles([e for e in edges if not e.deferred])
    assert [m for m, _ in found] == [{"pkg.x", "pkg.x.load", "pkg.y.util"}]
    assert {m for m, _ in cycles(lifted(edges, "pkg"))} == {frozenset({"pkg.x", "pkg.y"})}


def test_type_checking_imports_are_left_out(tmp_path):
    edges = _plant(tmp_path, {
        "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\nelse:\n"
                    "    import pkg.c\n",
        "pkg/b.py": "import pkg.a\n",
        "pkg/c.py": "",
    })
    assert [str(e) for e in edges] == ["pkg.a -> pkg.c (module level, pkg/a.py:5)",
                                       "pkg.b -> pkg.a (module level, pkg/b.py:1)"]
    assert cycles(edges) == []
