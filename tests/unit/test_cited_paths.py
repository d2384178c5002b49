"""Every document the code cites is in the repository, cited by its repository path.

A citation is a repository path (``docs/log_formats.md#error-signatures``, ``cvs_tasks/run/stages.py``,
``tests/unit/...``) in a comment or docstring of the code, in README.md or in docs/. The path must
exist, and an ``#anchor`` on a markdown file must be one of its headings (GitHub's anchor rule).
Relative markdown links (``[x](primus_overrides.md#y)``, ``[x](#testbed)``) are checked the same way.
The names of documents that were never in the repository (the research notes the code was first
written against) are refused unless a ``docs/`` path (or, inside docs/, a relative link) carries
them, and so are the section signs that pointed into them.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]
CODE_FOLDERS = ("cvs_tasks", "testbed", "benchmarks", "tests")
CODE_FILES = ("tasks.py",)
MARKDOWN = ("README.md", "docs")

_PREFIXES = "docs|cvs_tasks|tests|testbed|benchmarks|configs|thresholds|cluster"
CITATION = re.compile(rf"(?<![\w./-])((?:{_PREFIXES})/[\w./-]*\w|README\.md)(?:#([\w-]+))?")
"""A repository path, optionally with ``#anchor``; a path inside another (``/tmp/docs/x``) is not one."""
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
OLD_NAMES = re.compile(
    r"(?<!docs/)(?<!\]\()(?<!\[)\b(log_formats|launch_contracts|cvs_megatron_behaviour|product_doc|peers_and_pitfalls)\b"
    r"|\bDESIGN\.md\b|§|\bbehaviou?r reference\b|\bproduct document\b(?![^\n]*docs/product\.md)"
)
"""Documents that were never in the repository, and the section sign that pointed into them. "The
product document" in code must name docs/product.md on the same line."""


@dataclass(frozen=True)
class Text:
    """A piece of prose: a comment, a docstring or a whole markdown file, with where it starts."""

    file: str
    line: int
    text: str
    markdown: bool = False


def python_prose(source: str, file: str) -> Iterator[Text]:
    """Comments and statement-level strings (docstrings, and strings standing alone as statements)."""
    statement_start = True
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield Text(file, tok.start[0], tok.string)
        elif tok.type == tokenize.STRING and statement_start:
            yield Text(file, tok.start[0], tok.string)
        if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            statement_start = True
        elif tok.type not in (tokenize.COMMENT, tokenize.NL):
            statement_start = tok.type == tokenize.STRING and statement_start  # implicit concatenation
    return


def shell_prose(source: str, file: str) -> Iterator[Text]:
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#"):
            yield Text(file, number, line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor of a markdown file: its headings' slugs (a repeated one gets -1, -2, ...) and
    explicit ``<a id=...>`` / ``<a name=...>`` anchors; headings inside fenced code do not count."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
    return found


def citations(piece: Text) -> Iterator[tuple[int, str, str | None]]:
    """(line, repository path, anchor or None) of every citation in a piece of prose."""
    for m in CITATION.finditer(piece.text):
        yield piece.line + piece.text.count("\n", 0, m.start()), m.group(1), m.group(2)
    if piece.markdown:
        for m in MARKDOWN_LINK.finditer(piece.text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or CITATION.fullmatch(target):
                continue  # a URL, or a repository path the pattern above already read
            path, _, anchor = target.partition("#")
            folder = str(Path(piece.file).parent)
            where = piece.file if not path else str(Path(folder, path)) if folder != "." else path
            yield piece.line + piece.text.count("\n", 0, m.start()), where, anchor or None


def problems(pieces: Iterable[Text], read: Callable[[str], str | None], exists: Callable[[str], bool]) -> list[str]:
    """What is wrong with the citations in ``pieces``; ``read`` gives a repository file's text (None if
    absent), ``exists`` says whether a repository path exists."""
    out: list[str] = []
    heading_cache: dict[str, set[str] | None] = {}
    for piece in pieces:
        for m in OLD_NAMES.finditer(piece.text):
            line = piece.line + piece.text.count("\n", 0, m.start())
            out.append(f"{piece.file}:{line}: {m.group(0)!r} names a document outside the repository: "
                       "cite its docs/ path (docs/<name>.md#<heading>) instead")
        for line, path, anchor in citations(piece):
            path = path.rstrip("/")
            if not exists(path):
                out.append(f"{piece.file}:{line}: {path} does not exist")
                continue
            if anchor is None or not path.endswith(".md"):
                continue
            if path not in heading_cache:
                text = read(path)
                heading_cache[path] = anchors(text) if text is not None else None
            known = heading_cache[path]
            if known is not None and anchor not in known:
                out.append(f"{piece.file}:{line}: {path}#{anchor}: no such heading in {path}")
    return out


def repository_prose(root: Path = ROOT) -> Iterator[Text]:
    files: list[Path] = [root / name for name in CODE_FILES]
    for folder in CODE_FOLDERS:
        files += sorted(p for ext in ("*.py", "*.sh") for p in (root / folder).rglob(ext))
    for path in files:
        rel = str(path.relative_to(root))
        source = path.read_text(encoding="utf-8")
        yield from (python_prose if path.suffix == ".py" else shell_prose)(source, rel)
    for name in MARKDOWN:
        target = root / name
        for path in [target] if target.is_file() else sorted(target.rglob("*.md")):
            yield Text(str(path.relative_to(root)), 1, path.read_text(encoding="utf-8"), markdown=True)


def _read(root: Path) -> Callable[[str], str | None]:
    def read(rel: str) -> str | None:
        path = root / rel
        return path.read_text(encoding="utf-8") if path.is_file() else None
    return read


def test_every_cited_path_exists_and_every_anchor_is_a_heading():
    found = problems(repository_prose(), _read(ROOT), lambda rel: (ROOT / rel).exists())
    assert not found, "citations that do not resolve:\n" + "\n".join(found)


def test_the_repository_cites_its_documents():
    """The scan reads what it should: the cited documents are found by it (not vacuously clean)."""
    cited = {(path, anchor) for piece in repository_prose() for _, path, anchor in citations(piece)}
    for doc in ("docs/log_formats.md", "docs/launch_contracts.md", "docs/reference_suite.md", "docs/product.md"):
        assert any(path == doc and anchor for path, anchor in cited), f"nothing cites a section of {doc}"


# --- the checker itself, on planted text ----------------------------------------------------------

DOC = """# Log formats

## Error signatures

```
## not a heading
```

## Error signatures

<a id="explicit"></a>
"""


def _check(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for rel, text in {"docs/log_formats.md": DOC, "docs/product.md": "# Product\n", **files}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    pieces: list[Text] = []
    for rel, text in files.items():
        if rel.endswith(".py"):
            pieces += python_prose(text, rel)
        elif rel.endswith(".md"):
            pieces.append(Text(rel, 1, text, markdown=True))
        else:
            pieces += shell_prose(text, rel)
    return problems(pieces, _read(tmp_path), lambda rel: (tmp_path / rel).exists())


def test_a_missing_path_fails(tmp_path):
    found = _check(tmp_path, {"cvs_tasks/a.py": '"""Shapes: docs/log_format.md."""\n'})
    assert found == ["cvs_tasks/a.py:1: docs/log_format.md does not exist"]


def test_an_anchor_that_is_not_a_heading_fails_and_headings_resolve(tmp_path):
    code = ('"""See docs/log_formats.md#error-signatures and\n'
            'docs/log_formats.md#error-signatures-1, docs/log_formats.md#explicit."""\n'
            "x = 1  # docs/log_formats.md#not-a-heading\n"
            'y = "docs/missing.md is data, not prose"\n')
    found = _check(tmp_path, {"cvs_tasks/a.py": code})
    assert found == ["cvs_tasks/a.py:3: docs/log_formats.md#not-a-heading: no such heading in docs/log_formats.md"]


def test_old_document_names_and_section_signs_fail(tmp_path):
    code = ('"""Texts from log_formats.md §3."""\n'
            "# behaviour reference 5.5; see DESIGN.md\n"
            "# the product document's order\n"
            "# the product document's order (docs/product.md)\n"
            "# docs/log_formats.md is fine\n")
    found = _check(tmp_path, {"cvs_tasks/a.py": code})
    assert [f.split(": ", 1)[0] for f in found] == ["cvs_tasks/a.py:1"] * 2 + ["cvs_tasks/a.py:2"] * 2 + [
        "cvs_tasks/a.py:3"]
    assert "'§'" in found[1] and "'DESIGN.md'" in found[3]


def test_shell_comments_and_markdown_links_are_read(tmp_path):
    files = {
        "testbed/run.sh": "# see docs/nowhere.md\necho docs/also-nowhere.md\n",
        "docs/guide.md": "[shapes](log_formats.md#error-signatures), [bad](log_formats.md#nope), "
                         "[self](#guide), [web](https://example.com/x.md)\n\n# Guide\n",
    }
    found = _check(tmp_path, files)
    assert found == ["testbed/run.sh:1: docs/nowhere.md does not exist",
                     "docs/guide.md:1: docs/log_formats.md#nope: no such heading in docs/log_formats.md"]


def test_slugs_follow_githubs_rule():
    assert slug("Metrics and PASS/FAIL") == "metrics-and-passfail"
    assert slug("The `train_llama3.sh` launcher") == "the-train_llama3sh-launcher"
    assert slug("Primus B3 (current)") == "primus-b3-current"
