"""Where the simulated job's lines go: the console (stdout) and, like `tee`, a log file."""
from __future__ import annotations

import sys
from pathlib import Path


class Output:
    def __init__(self, tee_path: str | None = None, truncate: bool = False):
        self._tee = None
        if tee_path:
            path = Path(tee_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            if truncate:
                path.write_text("")
            # O_APPEND: safe when the console is also appended (`>>`) to the same file
            self._tee = open(path, "a", encoding="utf-8")

    def worker(self, *lines: str) -> None:
        """Lines produced by the training processes: console and tee file."""
        for text in lines:
            sys.stdout.write(text + "\n")
            if self._tee is not None:
                self._tee.write(text + "\n")
        sys.stdout.flush()
        if self._tee is not None:
            self._tee.flush()

    def console(self, *lines: str) -> None:
        """Launcher lines that never reach the tee'd file."""
        for text in lines:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        if self._tee is not None:
            self._tee.close()
            self._tee = None
