"""Watching cost: the real watcher over a log that a separate writer process grows to >= 200 MB.

The watcher follows the log (one follower on the node, ``Hosts.follow``). What travels from the
node is counted exactly by wrapping the follower's stream (every frame byte: headers, payload,
heartbeats), and compared with the final log size. Each batch of events the watcher receives is
one "poll" here: the harness CPU of one cycle (receive + parse + local copy) is taken between
consecutive batches, and the early cycles are compared with the late ones: it must not grow with
the log. The reference approach (re-read and re-parse the whole log at every poll) is simulated
in the same run: its bytes are the file size at each of our batches, and its CPU per poll is
measured at an early and at the final size.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from benchmarks.common import at_most, cpu_seconds, median, not_measured, row, stop_process
from cvs_tasks.lifecycle.watch import Watcher, WatchSettings, WatchTarget
from cvs_tasks.metrics import LogParser
from cvs_tasks.remote import LocalHosts, Node
from cvs_tasks.remote.follow import Delta, Follow, FollowOptions, FollowTarget
from cvs_tasks.remote.streams import FollowerStream, StreamFollow

READ_HEADER_BYTES = 40  # a batch carrying no more than this is frame headers or heartbeats, not log data
BYTES_TARGET = 1.1  # total transferred <= 1.1 x final size
CPU_GROWTH_TARGET = 1.5  # late polls may cost at most 1.5x the early ones


@dataclass
class PollSample:
    started: float  # monotonic
    cpu_at_start: float
    payload: int  # bytes that travelled from the node for this batch (frames, heartbeats included)
    size: int | None  # the log's size when the batch arrived


class CountingStream(FollowerStream):
    """A follower's stream whose every byte read is added to ``counter[0]``."""

    def __init__(self, inner: FollowerStream, counter: list[int]):
        self.inner, self.counter = inner, counter

    def fileno(self) -> int:
        return self.inner.fileno()

    def read(self) -> tuple[bytes, bool]:
        data, ended = self.inner.read()
        self.counter[0] += len(data)
        return data, ended

    def poke(self) -> None:
        self.inner.poke()

    def why_ended(self) -> str:
        return self.inner.why_ended()

    def close(self) -> None:
        self.inner.close()


class CountingFollow(Follow):
    """The real follow; each batch that carried log bytes is stamped (time, CPU, wire bytes, log size)."""

    def __init__(self, inner: Follow, counter: list[int], log: Path, samples: list[PollSample]):
        self.inner, self.counter, self.log, self.samples = inner, counter, log, samples

    def events(self, timeout: float):
        return self._stamp(self.inner.events(timeout))

    def drain(self, timeout: float):
        return self._stamp(self.inner.drain(timeout))

    def restart(self, index: int, offset: int) -> None:
        self.inner.restart(index, offset)

    def close(self) -> None:
        self.inner.close()

    def _stamp(self, events):
        if any(isinstance(e, Delta) for e in events):
            self.samples.append(PollSample(time.monotonic(), cpu_seconds(), self.counter[0], _size(self.log)))
            self.counter[0] = 0
        return events


@dataclass
class CountingHosts:
    """Delegates to real Hosts; its followers' streams are counted (see ``CountingFollow``)."""

    inner: Any
    log: Path
    samples: list[PollSample] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return self.inner.names

    @property
    def nodes(self):
        return self.inner.nodes

    def follow(self, targets: Sequence[FollowTarget], options: FollowOptions) -> Follow:
        opener, counter = self.inner._follower_opener(), [0]
        if opener is None:
            raise RuntimeError(f"{type(self.inner).__name__} does not stream followers")
        follow = StreamFollow(self.inner.nodes, targets, options,
                              lambda i, args: CountingStream(opener(i, args), counter))
        return CountingFollow(follow, counter, self.log, self.samples)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def per_poll_cpu(samples: list[PollSample], min_share: float = 0.25) -> list[float]:
    """CPU seconds of each complete poll cycle (read, parse, copy), from one read to the next.

    Only cycles that carried a typical amount of new data count (at least ``min_share`` of the
    median payload): the first read of an empty file, or the drain after the job exited, say
    nothing about how a poll's cost changes with the log's size.
    """
    cycles = [(a.payload, b.cpu_at_start - a.cpu_at_start) for a, b in zip(samples, samples[1:])]
    typical = median([p for p, _ in cycles if p > READ_HEADER_BYTES]) or 0
    return [cpu for payload, cpu in cycles if payload >= typical * min_share and payload > READ_HEADER_BYTES]


def early_late(values: list[float], fraction: float = 0.25) -> tuple[float | None, float | None]:
    """Medians of the first and the last ``fraction`` of the values (the middle is ignored)."""
    k = max(1, int(len(values) * fraction))
    if len(values) < 2 * k:
        return None, None
    return median(values[:k]), median(values[-k:])


def reference_poll_cpu(hosts: Any, path: str, size: int) -> float:
    """CPU seconds of one reference poll: read the log's first ``size`` bytes and parse it all."""
    before = cpu_seconds()
    res = hosts.read_from([path], [0], max(size, 4), timeout=120.0)[0]
    if res.error:
        raise RuntimeError(res.error)
    parser = LogParser()
    parser.feed(res.data)
    parser.finish()
    return cpu_seconds() - before


def read_seconds(hosts: Any, path: str, nbytes: int) -> float:
    """Wall time of one ``read_from`` of ``nbytes`` from the start of ``path``."""
    t0 = time.perf_counter()
    hosts.read_from([path], [0], nbytes, timeout=120.0)
    return time.perf_counter() - t0


def watch_growing_log(hosts: Any, host_label: str, work: Path, size_mb: float, rate_mb_s: float,
                      poll_s: float, reference_hosts: Any) -> dict[str, Any]:
    """Start the writer, watch its log with the real Watcher until it completes; return the figures."""
    log, exit_file = work / "training.log", work / "exit_status"
    log.touch()
    counting = CountingHosts(hosts, log)
    target = WatchTarget(0, host_label, str(log), str(exit_file), work / "pulled" / "training.log")
    settings = WatchSettings(poll_interval_s=poll_s, stall_timeout_s=60.0, startup_timeout_s=60.0,
                             timeout_s=size_mb / rate_mb_s * 2 + 30.0)  # a watcher that falls behind is a MISS
    events: list[object] = []
    watcher = Watcher(counting, [target], iterations=0, settings=settings,
                      parser_factory=lambda: LogParser(seq_length=8192, world_size=8, global_batch_size=128),
                      listener=events.append, stage="training", combo="bench")
    writer = subprocess.Popen([sys.executable, "-m", "benchmarks.logwriter", str(log), str(exit_file),
                               "--mb", str(size_mb), "--rate", str(rate_mb_s)],
                              cwd=Path(__file__).resolve().parents[1], start_new_session=True)
    try:
        started = time.monotonic()
        outcome = watcher.run()
        watch_s = time.monotonic() - started
        if outcome.status == "completed":
            writer.wait(timeout=30)
    finally:
        stop_process(writer)
    final = log.stat().st_size
    copied = target.local_copy.stat().st_size if target.local_copy.exists() else 0
    cpu = per_poll_cpu(counting.samples)
    early, late = early_late(cpu)
    sizes = [s.size or 0 for s in counting.samples]
    early_size = next((s for s in sizes if s >= final * 0.1), sizes[0] if sizes else 0)
    ref_early = reference_poll_cpu(reference_hosts, str(log), early_size) if early_size else None
    ref_late = reference_poll_cpu(reference_hosts, str(log), final)
    scaling = None
    if reference_hosts is not hosts and final >= 4 * 2**20:
        scaling = (read_seconds(hosts, str(log), 2**20), read_seconds(hosts, str(log), min(final, 8 * 2**20)))
    return {
        "status": outcome.status, "reason": outcome.reason, "watch_s": watch_s,
        "final_bytes": final, "copied_bytes": copied, "polls": len(counting.samples),
        "transferred": sum(s.payload for s in counting.samples),
        "reference_transferred": sum(sizes),
        "cpu_early": early, "cpu_late": late, "mean_bytes_per_poll": final / max(1, len(counting.samples)),
        "ref_cpu_early": ref_early, "ref_cpu_late": ref_late, "ref_early_size": early_size,
        "parsed_steps": outcome.reporting.last_step, "ssh": reference_hosts is not hosts,
        "read_scaling": scaling,
    }


def rows_for(label: str, fig: dict[str, Any]) -> list[dict[str, Any]]:
    final_mb = fig["final_bytes"] / 2**20
    ratio = fig["transferred"] / fig["final_bytes"] if fig["final_bytes"] else None
    ref_ratio = fig["reference_transferred"] / fig["final_bytes"] if fig["final_bytes"] else None
    ok_watch = fig["status"] == "completed" and fig["copied_bytes"] == fig["final_bytes"]
    head = (f"{fig['polls']} batches over {fig['watch_s']:.1f}s, watcher {fig['status']}, "
            f"final log {final_mb:.0f} MiB, pulled-back copy {'identical size' if ok_watch else 'DIFFERS'}")
    if ok_watch:
        head += f"; reference (whole log at each of these batches): {ref_ratio:.1f}x"
    out = [at_most(f"polling.bytes_ratio[{label}]", ratio, BYTES_TARGET, "x final size", head)]
    if not ok_watch:
        out[0]["status"] = "MISS"
        out[0]["detail"] += (f"; watcher outcome: {fig['reason']}; it read {fig['transferred'] / 2**20:.0f} of "
                             f"{final_mb:.0f} MiB")
    if fig.get("read_scaling"):
        one, big = fig["read_scaling"]
        mib = min(fig["final_bytes"], 8 * 2**20) / 2**20
        out[0]["detail"] += (f"; one read of 1 MiB over this transport takes {one:.2f}s, of {mib:.0f} MiB "
                             f"{big:.2f}s ({big / one:.0f}x for {mib:.0f}x the bytes)")
    early, late = fig["cpu_early"], fig["cpu_late"]
    if early and late:
        growth = late / early
        ref = ""
        if fig["ref_cpu_early"] and fig["ref_cpu_late"]:
            where = " (read locally)" if fig["ssh"] else ""
            ref = (f"; reference poll CPU{where} {fig['ref_cpu_early'] * 1000:.0f} ms at "
                   f"{fig['ref_early_size'] / 2**20:.0f} MiB -> {fig['ref_cpu_late'] * 1000:.0f} ms at "
                   f"{final_mb:.0f} MiB ({fig['ref_cpu_late'] / fig['ref_cpu_early']:.1f}x)")
        out.append(at_most(f"polling.cpu_growth[{label}]", growth, CPU_GROWTH_TARGET, "x (late/early)",
                           f"median harness CPU per data-carrying batch {early * 1000:.1f} ms in the first "
                           f"quarter, {late * 1000:.1f} ms in the last (~{fig['mean_bytes_per_poll'] / 2**20:.1f} "
                           f"MiB new per batch){ref}"))
    else:
        why = f"only {fig['polls']} batches" + ("" if ok_watch else f", the watcher ended {fig['status']}")
        out.append(not_measured(f"polling.cpu_growth[{label}]", "x (late/early)", f"<= {CPU_GROWTH_TARGET:g}", why))
    out.append(row(f"polling.final_log[{label}]", round(final_mb, 1), "MiB", ">= 200 (full run)",
                   final_mb >= 200 or fig.get("quick", False),
                   "log size the writer reached" + (" (quick mode: small size)" if fig.get("quick") else "")))
    return out


def run(size_mb: float = 200.0, rate_mb_s: float = 8.0, poll_s: float = 1.0, ssh_hosts: Any = None,
        ssh_label: str = "", quick: bool = False) -> list[dict[str, Any]]:
    """Local transport always; SSH too when ``ssh_hosts`` (a one-node testbed Hosts) is given."""
    rows: list[dict[str, Any]] = []
    variants: list[tuple[str, Any, str]] = [("local", LocalHosts([Node("localhost", "localhost")]), "localhost")]
    if ssh_hosts is not None:
        variants.append(("ssh", ssh_hosts, ssh_label))
    local = variants[0][1]
    for label, hosts, host_label in variants:
        with tempfile.TemporaryDirectory(prefix=f"cvs_bench_poll_{label}_") as tmp:
            fig = watch_growing_log(hosts, host_label, Path(tmp), size_mb, rate_mb_s, poll_s, local)
        fig["quick"] = quick
        rows += rows_for(label, fig)
    return rows

