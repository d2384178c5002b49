"""The per-run node folder ``<scripts_dir>/<run id>`` and the marker that proves the harness made it.

`invoke cleanup` used to remove every folder the user owned under ``paths.scripts_dir``; with that
set to a home folder it took ``Documents/``. Now the command that creates a run folder also writes
``.cvs-run`` into it (run id, owner, harness host, created time), and clean-up removes a folder
only when that marker is a regular file naming the folder's own run id. Symbolic links (folder or
marker) are never followed. The node answers a scan with one row per entry; the verdicts are made
here from plain data; the removal re-checks the marker on the node right before ``rm``. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cvs_tasks.identifiers import identifier_problem
from cvs_tasks.jobs.shell import q, say

MARKER = ".cvs-run"
MARKER_MAX_BYTES = 1024
MARKER_FIELDS = ("created", "host", "owner", "run_id")


@dataclass(frozen=True)
class RunMarker:
    """What ``.cvs-run`` holds: whose run made the folder, from which machine, when (epoch s)."""

    run_id: str
    owner: str
    host: str
    created: int

    def to_json(self) -> str:
        return json.dumps({"created": int(self.created), "host": self.host, "owner": self.owner,
                           "run_id": self.run_id}, sort_keys=True)


def run_id_fragment(run_id: str) -> str:
    """The exact text a marker or lock holder holds for its run id (the node greps for it)."""
    return json.dumps({"run_id": run_id})[1:-1]


def parse_marker(text: str) -> tuple[RunMarker | None, str]:
    """The marker, or None and why it is not one (a sentence)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None, "marker is not JSON"
    if not isinstance(data, dict):
        return None, "marker is not a JSON object"
    missing = [k for k in MARKER_FIELDS if k not in data]
    if missing:
        return None, f"marker lacks {', '.join(missing)}"
    run_id, owner, host, created = data["run_id"], data["owner"], data["host"], data["created"]
    if identifier_problem("run id", run_id):
        return None, "marker's run_id is not a run id"
    if identifier_problem("user name", owner):
        return None, "marker's owner is not a user name"
    if not isinstance(host, str) or identifier_problem("host", host):
        return None, "marker's host is not a host name"
    if isinstance(created, bool) or not isinstance(created, int) or created < 0:
        return None, "marker's created is not a time"
    return RunMarker(run_id, owner, host, created), ""


# --- creating the folder (launch) ------------------------------------------------------------
def create_folder_command(folder: str, marker: RunMarker) -> str:
    """Create ``folder`` (0700) and write its marker, in one command; refuse a symlinked folder or marker.

    An existing marker naming this run is kept (a later command of the same run); anything else
    at the marker's place is replaced only if it is a regular file."""
    d, m = q(folder), q(f"{folder.rstrip('/')}/{MARKER}")
    return (
        f"if [ -L {d} ]; then echo {say(f'{folder} is a symbolic link; refusing to use it')} >&2; exit 1; fi; "
        f"(umask 077 && mkdir -p {d}) && chmod 700 {d} && "
        f"if [ -L {m} ] || {{ [ -e {m} ] && [ ! -f {m} ]; }}; then "
        f"echo {say(f'{folder}/{MARKER} is not a regular file; refusing to use the folder')} >&2; exit 1; fi && "
        f"{{ grep -qF -- {q(run_id_fragment(marker.run_id))} {m} 2> /dev/null || "
        f"(umask 077 && printf '%s\\n' {q(marker.to_json())} > {m}); }}"
    )


# --- finding the folders (cleanup) -----------------------------------------------------------
# One row per entry: name, dir|link|other|badname, mine|other (owner on the node), marker state
# (file|none|link|notfile|-), the marker's first bytes without control characters.
_SCAN = (
    "cvs_folders() { local e n k o m s t; for e in \"$@\"; do [ -e \"$e\" ] || [ -L \"$e\" ] || continue; "
    "n=${e##*/}; case \"$n\" in *[!A-Za-z0-9._-]*) "
    "printf '%s\\tbadname\\t-\\t-\\t\\n' \"$(printf '%s' \"$n\" | tr -c 'A-Za-z0-9._-' '?')\"; continue;; esac; "
    "if [ -L \"$e\" ]; then k=link; elif [ -d \"$e\" ]; then k=dir; else k=other; fi; "
    "if [ -O \"$e\" ]; then o=mine; else o=other; fi; m=\"$e/" + MARKER + "\"; t=; "
    "if [ \"$k\" != dir ]; then s=-; elif [ -L \"$m\" ]; then s=link; elif [ ! -e \"$m\" ]; then s=none; "
    "elif [ ! -f \"$m\" ]; then s=notfile; else s=file; "
    f"t=$(head -c {MARKER_MAX_BYTES} \"$m\" 2> /dev/null | tr -d '\\000-\\037'); fi; "
    "printf '%s\\t%s\\t%s\\t%s\\t%s\\n' \"$n\" \"$k\" \"$o\" \"$s\" \"$t\"; done; }"
)


def scan_folders_command(scripts_dir: str, run_id: str | None = None) -> str:
    """Every entry directly under ``scripts_dir`` (or just ``<scripts_dir>/<run_id>``), as rows."""
    base = q(scripts_dir.rstrip("/") or "/")
    target = f"{base}/{q(run_id)}" if run_id else f"{base}/*"
    return f"{_SCAN}; [ -d {base} ] && cvs_folders {target}; true"


@dataclass(frozen=True)
class FolderEntry:
    """One row of the scan: an entry under scripts_dir as the node saw it."""

    name: str
    kind: str
    mine: bool
    marker_state: str
    marker_text: str


@dataclass(frozen=True)
class FolderVerdict:
    entry: FolderEntry
    remove: bool
    reason: str
    marker: RunMarker | None = None


def parse_scan(stdout: str) -> list[FolderEntry]:
    entries = []
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) != 5 or not fields[0]:
            continue
        entries.append(FolderEntry(fields[0], fields[1], fields[2] == "mine", fields[3], fields[4]))
    return entries


_KEEP_BECAUSE = {
    "badname": "its name is not a run id",
    "link": "it is a symbolic link (never followed)",
    "other": "it is not a folder",
}
_MARKER_BECAUSE = {
    "none": f"no {MARKER} marker: not made by cvs-tasks",
    "link": f"its {MARKER} is a symbolic link",
    "notfile": f"its {MARKER} is not a regular file",
}


def folder_verdict(entry: FolderEntry, *, owner: str | None) -> FolderVerdict:
    """Remove only a folder whose marker names the folder's own run id, and (``owner`` set) is that
    owner's run in a folder the node user owns; ``owner`` None is ``--all-owners``."""
    if entry.kind != "dir":
        return FolderVerdict(entry, False, _KEEP_BECAUSE.get(entry.kind, _KEEP_BECAUSE["other"]))
    if identifier_problem("run id", entry.name):
        return FolderVerdict(entry, False, _KEEP_BECAUSE["badname"])
    if entry.marker_state != "file":
        return FolderVerdict(entry, False, _MARKER_BECAUSE.get(entry.marker_state, "no readable marker"))
    marker, why = parse_marker(entry.marker_text)
    if marker is None:
        return FolderVerdict(entry, False, why or "marker unreadable")
    if marker.run_id != entry.name:
        return FolderVerdict(entry, False, f"its marker names run {marker.run_id}, not {entry.name}", marker)
    if owner is not None and marker.owner != owner:
        return FolderVerdict(entry, False, f"a run of {marker.owner} (--all-owners takes it)", marker)
    if owner is not None and not entry.mine:
        return FolderVerdict(entry, False, "owned by another user on the node (--all-owners takes it)", marker)
    return FolderVerdict(entry, True, f"run {marker.run_id} of {marker.owner} from {marker.host}", marker)


# --- removing them ---------------------------------------------------------------------------
_REMOVE = (
    "cvs_rm_run() { local d=\"$1/$2\" m=\"$1/$2/" + MARKER + "\"; "
    "if [ -d \"$d\" ] && [ ! -L \"$d\" ] && [ -f \"$m\" ] && [ ! -L \"$m\" ] && grep -qF -- \"$3\" \"$m\"; "
    "then rm -rf -- \"$d\"; else echo \"cvs-tasks: kept $d: not a marked run folder at removal time\" >&2; fi; }"
)


def remove_runs_command(scripts_dir: str, run_ids: list[str]) -> str:
    """Remove the named run folders of one node, each re-checked on the node just before ``rm``;
    names that are not run ids are refused here (``ValueError``), ``true`` when there is none."""
    bad = [r for r in run_ids if identifier_problem("run id", r)]
    if bad:
        raise ValueError(f"not run ids: {bad!r}")
    if not run_ids:
        return "true"
    base = q(scripts_dir.rstrip("/") or "/")
    calls = "; ".join(f"cvs_rm_run {base} {q(r)} {q(run_id_fragment(r))} || cvs_bad=1" for r in run_ids)
    return f"{_REMOVE}; cvs_bad=; {calls}; [ -z \"$cvs_bad\" ]"
