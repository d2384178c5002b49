"""The testbed's container image, built without any registry.

A minimal Debian root filesystem (debootstrap, from the mirror this machine's apt already uses)
is cached once as a tarball; the simulated trainer is appended to a copy of it and the result is
`docker import`-ed. The image tag carries a hash of the trainer files, so the image is rebuilt
only when the trainer changes; `cvs-testbed/sim:latest` always points at the newest build, which
is what the static testbed configs name.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from cvs_tasks.errors import BadInput, InfraError

from . import docker_api

IMAGE_REPO = "cvs-testbed/sim"
LATEST_TAG = f"{IMAGE_REPO}:latest"
# The harness picks Primus when the image name contains "primus"; the same image under this tag
# is how the Primus testbed configs say so.
PRIMUS_TAG = f"{IMAGE_REPO}:primus-latest"
IMAGE_CHANGES = ["WORKDIR /workspace", 'CMD ["sleep", "infinity"]']
TRAINER_ROOT = Path(__file__).resolve().parent / "trainer" / "workspace"
LAYOUT_VERSION = "1+ibv"  # bump when the way files are placed in the image changes
DEBOOTSTRAP_TIMEOUT_S = 1200
IMPORT_TIMEOUT_S = 600


def cache_dir() -> Path:
    """Where the base rootfs and image tarballs live (env `CVS_TESTBED_CACHE` overrides)."""
    return Path(os.environ.get("CVS_TESTBED_CACHE", "/var/cache/cvs-testbed"))


@dataclass(frozen=True)
class AptSource:
    mirror: str
    suite: str


def parse_apt_sources(texts: list[str]) -> AptSource | None:
    """The first main-archive Debian source (not -security/-updates) in deb822 or one-line form."""
    for text in texts:
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("uris"):
                for suite in fields.get("suites", "").split():
                    if "-" not in suite and fields["uris"].split()[0].rstrip("/").endswith("debian"):
                        return AptSource(fields["uris"].split()[0], suite)
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb":
                words = [p for p in parts[1:] if not p.startswith("[")]
                if len(words) >= 2 and "-" not in words[1] and words[0].rstrip("/").endswith("debian"):
                    return AptSource(words[0], words[1])
    return None


def configured_apt_source() -> AptSource:
    """The Debian mirror and suite from /etc/apt/sources.list{,.d/*}."""
    files = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    texts = [f.read_text(errors="replace") for f in files
             if f.is_file() and (f.suffix in (".list", ".sources") or f.name == "sources.list")]
    source = parse_apt_sources(texts)
    if source is None:
        raise BadInput("no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/*; "
                       "the testbed image is bootstrapped from the configured apt mirror")
    return source


def trainer_files(root: Path = TRAINER_ROOT) -> list[Path]:
    """Every trainer file that goes into the image, sorted (no caches)."""
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))


def trainer_hash(root: Path = TRAINER_ROOT) -> str:
    """12 hex digits over the trainer files' paths, modes and bytes (the image tag)."""
    digest = hashlib.sha256(LAYOUT_VERSION.encode())
    for path in trainer_files(root):
        rel = path.relative_to(root).as_posix()
        digest.update(f"{rel}\0{path.stat().st_mode & 0o111}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def image_name(root: Path = TRAINER_ROOT) -> str:
    return f"{IMAGE_REPO}:{trainer_hash(root)}"


@contextlib.contextmanager
def _cache_lock():
    """One builder at a time per machine (threads and processes alike)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_rootfs_tar(log=print) -> Path:
    """The cached debootstrap tarball, built on first use (~40 s plus download)."""
    with _cache_lock():
        return _base_rootfs_tar(log)


def _base_rootfs_tar(log) -> Path:
    source = configured_apt_source()
    key = hashlib.sha256(f"{source.mirror} {source.suite}".encode()).hexdigest()[:8]
    target = cache_dir() / f"base-{source.suite}-{key}.tar"
    if target.is_file():
        return target
    for tool in ("debootstrap", "tar"):
        if shutil.which(tool) is None:
            raise InfraError(f"{tool} not found: install it (apt-get install debootstrap) to build the testbed image")
    target.parent.mkdir(parents=True, exist_ok=True)
    root = target.parent / f"rootfs-{key}.tmp"
    if root.exists():
        _remove_tree(root)
    log(f"testbed image: debootstrap {source.suite} from {source.mirror} (first build only)")
    started = time.monotonic()
    try:
        _run(["debootstrap", "--variant=minbase", "--include=python3", source.suite, str(root), source.mirror],
             DEBOOTSTRAP_TIMEOUT_S, "debootstrap")
        partial = target.with_suffix(".tar.part")
        _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], 300, "tar of the rootfs")
        partial.rename(target)
    finally:
        _remove_tree(root)
    log(f"testbed image: base rootfs cached at {target} ({time.monotonic() - started:.0f} s)")
    return target


def image_tar(log=print) -> Path:
    """Base rootfs + trainer under /workspace + rocm-smi on PATH, cached per trainer hash."""
    base = base_rootfs_tar(log)
    with _cache_lock():
        return _image_tar(base)


def _image_tar(base: Path) -> Path:
    tag = trainer_hash()
    target = cache_dir() / f"sim-{tag}.tar"
    if target.is_file():
        return target
    partial = target.with_suffix(".tar.part")
    shutil.copyfile(base, partial)
    with tarfile.open(partial, "a", format=tarfile.GNU_FORMAT) as tar:
        _add_dir(tar, "./workspace")
        seen_dirs = {"./workspace"}
        for path in trainer_files():
            rel = path.relative_to(TRAINER_ROOT)
            for parent in reversed(rel.parents[:-1]):
                name = f"./workspace/{parent.as_posix()}"
                if name not in seen_dirs:
                    _add_dir(tar, name)
                    seen_dirs.add(name)
            info = tarfile.TarInfo(f"./workspace/{rel.as_posix()}")
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        for tool in ("rocm-smi", "amd-smi", "ibv_devinfo"):  # stand-ins on PATH, as in real images
            link = tarfile.TarInfo(f"./usr/local/bin/{tool}")
            link.type = tarfile.SYMTYPE
            link.linkname = f"/workspace/bin/{tool}"
            link.mode = 0o777
            tar.addfile(link)
        _add_dir(tar, "./usr/lib/x86_64-linux-gnu/libibverbs")  # where the Broadcom library is copied
    partial.rename(target)
    for stale in cache_dir().glob("sim-*.tar"):
        if stale != target:
            stale.unlink(missing_ok=True)
    return target


def has_image(docker_host: str, name: str) -> bool:
    return docker_api.has_image(docker_host, name)


def ensure_image(docker_host: str, log=print) -> str:
    """Make sure the daemon at `docker_host` holds the current image; returns its name.

    Also tags it `cvs-testbed/sim:latest` and `:primus-latest`. Imports the cached tarball when missing.
    """
    name = image_name()
    if not has_image(docker_host, name):
        tar_path = image_tar(log)
        started = time.monotonic()
        docker_api.import_image(docker_host, tar_path, name, IMAGE_CHANGES, IMPORT_TIMEOUT_S)
        log(f"testbed image: imported {name} into {docker_host} ({time.monotonic() - started:.1f} s)")
    for tag in (LATEST_TAG, PRIMUS_TAG):
        docker_api.tag(docker_host, name, tag)
    return name


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def _run(cmd: list[str], timeout: float, what: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InfraError(f"{what} timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise InfraError(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def _remove_tree(root: Path) -> None:
    """Remove a debootstrap tree, unmounting anything it left mounted (proc, sys) first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, timeout=60)
    shutil.rmtree(root, ignore_errors=True)
