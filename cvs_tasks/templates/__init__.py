"""Where the files cvs-tasks ships are: the packaged templates, and the checkout it may run from.

The suite configs, threshold files and example cluster files live in this package (``configs/``,
``thresholds/``, ``cluster/`` here; the repository root holds symlinks of the same names, so every
documented path such as ``configs/testbed/demo_host.json`` works in a checkout). They are found
through ``importlib.resources``, so an install from a wheel lists and copies them as a checkout
does. The testbed (the simulated trainer the demo and testbed configs run) is not packaged: it
exists only in a checkout, which ``checkout_root`` finds.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = ("configs", "thresholds", "cluster")


def template_dir(folder: str) -> Path:
    """One folder of packaged templates (``configs``, ``thresholds`` or ``cluster``), as a path.

    setuptools installs the package as plain files, so the resource is a real folder: the
    templates are listed, copied and found next to a config with ordinary path operations."""
    if folder not in FOLDERS:
        raise ValueError(f"no packaged template folder {folder!r} (known: {', '.join(FOLDERS)})")
    return Path(str(resources.files(__name__).joinpath(folder)))


def checkout_root() -> Path | None:
    """The cvs-tasks checkout this package runs from (the folder holding ``testbed/``), or None when
    it is installed without one (from a wheel): ``{cvs-root}`` in a config stands for this folder."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "testbed" / "trainer").is_dir() else None
