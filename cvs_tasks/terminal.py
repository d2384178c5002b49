"""Text from nodes is text: the one way a string reaches the terminal.

Reasons, error lines, kernel versions, log lines and host names come from nodes and logs. Printed
raw, an escape sequence in one of them retitles the window, plants a hyperlink or resets the
screen, and rich markup in it (``[/oops]``) is parsed as markup and crashes the summary. So:

* ``visible`` shows control characters instead of sending them: ESC as ``\\x1b``, C0/C1 controls
  and DEL as ``\\xNN``, a newline inside one field as ``\\n``, bidi overrides as ``\\u202e``;
  printable Unicode (accents, CJK, emoji) is kept as it is;
* ``echo`` prints plain lines through it; ``cell`` / ``line`` build rich ``Text`` (never markup);
* ``make_console`` gives a rich Console with markup and highlighting off whose every rendered
  string and segment goes through ``visible``, so a print site that forgets ``cell`` still cannot
  send an escape byte. Control segments rich makes itself (cursor moves of a live display) pass.
"""

from __future__ import annotations

import sys
import unicodedata
from functools import lru_cache
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads only when a console view is built: the task modules stay light
    from rich.console import Console
    from rich.text import Text

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = frozenset(chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)))
_HIDDEN = ("Cc", "Cs", "Zl", "Zp")


def _shown(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if unicodedata.category(ch) in _HIDDEN or ch in _BIDI:
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return ch


def visible(value: object, *, keep_newlines: bool = False) -> str:
    """``value`` as text safe for a terminal: every control character shown as an escape.

    ``keep_newlines`` keeps ``\\n`` (a multi-line message the program composed itself, each of
    whose lines may carry node text)."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    if keep_newlines:
        return "\n".join(visible(part) for part in text.split("\n"))
    return "".join(_shown(ch) for ch in text)


def cell(value: object, style: str = "") -> Text:
    """A rich table cell or line part from any value: plain text, never markup."""
    from rich.text import Text

    return Text(visible("" if value is None else value), style=style)


def line(*parts: object) -> Text:
    """A rich line from parts: a value, or a (value, style) pair; each part through ``visible``."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(visible(part[0]), style=part[1])
        elif isinstance(part, Text):
            out.append_text(safe_text(part))
        else:
            out.append(visible(part))
    return out


def safe_text(text: Text) -> Text:
    """``text`` itself when it holds no control character, else a plain copy with them shown."""
    plain = text.plain
    shown = visible(plain)
    return text if shown == plain else cell(shown, text.style)


def echo(*lines: object, file: IO[str] | None = None) -> None:
    """Print each of ``lines`` on a line of its own, through ``visible``."""
    out = file or sys.stdout
    for item in lines:
        print(visible(item), file=out)



def make_console(**kwargs: Any) -> Console:
    """The Console every console view uses (summary, live progress, history, compare): markup and
    highlighting off, and every string and segment it renders through ``visible``, so a print site
    that forgets ``cell`` still cannot send a control character. Segments rich marks as control
    (a live display's cursor moves) pass."""
    kwargs.setdefault("markup", False)
    kwargs.setdefault("highlight", False)
    return _safe_console_class()(**kwargs)


@lru_cache(maxsize=1)
def _safe_console_class() -> type:
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Text:  # every str printed or put in a table
            kwargs["markup"] = False
            return super().render_str(visible(text), **kwargs)

        def render(self, renderable, options=None):  # every segment of every renderable
            for segment in super().render(renderable, options):
                if segment.control is None and not segment.text.isprintable() and segment.text != "\n":
                    segment = Segment(visible(segment.text, keep_newlines=True), segment.style, None)
                yield segment

    return SafeConsole
