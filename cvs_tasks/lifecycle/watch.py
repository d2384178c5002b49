"""Watch a launched training job on every node until it completes, fails, stalls or times out.

One follower per node for the whole job (``Hosts.follow``, ``remote/follow.py``) streams what the
node's log gains and, at the end, the job's exit status; the watcher waits for those events in
one loop, feeds each node's bytes to its incremental parser and error scanner, and copies them
into the run directory as they arrive (the node logs are "pulled back" without being read twice).
Nothing is asked of a node per poll: a fatal signature ends the watch as soon as the node's
follower sends the line (its own poll interval on the node plus the transport's latency). A
follower that is lost is restarted from the offset the watcher holds; one that keeps failing
(``unreachable_after``) makes the node unreachable.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Sequence

from cvs_tasks.errors import InfraError
from cvs_tasks.jobs.watch_state import (  # noqa: F401 - re-exported: callers import them from here
    ConfigCheckFn,
    NodeState,
    WatchOutcome,
    WatchSettings,
    WatchTarget,
)
from cvs_tasks.metrics import LogParser
from cvs_tasks.metrics.signatures import CAUSE_RANK
from cvs_tasks.remote.follow import FRAME_BYTES, Delta, Exited, Follow, FollowOptions, FollowTarget, Lost, take
from cvs_tasks.run.events import NodeProgress
from cvs_tasks.run.redact import RedactingWriter, Redactor
from cvs_tasks.run.sandbox import open_for_write

Clock = Callable[[], float]
MIN_WAIT_S = 0.05  # a wait for events never shorter (a deadline reached exactly is decided next turn)
DRAIN_MIN_S = 10.0  # how long every node's follower may take to answer a look asked for (the old read's timeout)


class Watcher:
    """Follows every node's log; one instance per job launch."""

    def __init__(
        self,
        hosts,
        targets: Sequence[WatchTarget],
        *,
        iterations: int,
        settings: WatchSettings,
        parser_factory: Callable[[], LogParser],
        listener: Callable[[object], None],
        stage: str,
        combo: str | None,
        stop: threading.Event | None = None,
        clock: Clock = time.monotonic,
        redactor: Redactor | None = None,
        config_check: ConfigCheckFn | None = None,
    ) -> None:
        self.hosts = hosts
        self.config_check = config_check
        self.redactor = redactor or Redactor()  # the local log copy never holds a secret
        self.iterations = iterations
        self.settings = settings
        self.listener = listener
        self.stage = stage
        self.combo = combo
        self.stop = stop or threading.Event()
        self.clock = clock
        self.nodes = [NodeState(target=t, parser=parser_factory()) for t in targets]
        self._sinks: list[RedactingWriter | None] = []
        self._start = clock()
        self._options = FollowOptions(poll_s=settings.poll_interval_s,
                                      frame_bytes=max(4, min(settings.max_bytes, FRAME_BYTES)))
        self._follow: Follow | None = None
        self._restarts: list[str] = []  # what the outcome says about followers that were mended
        # kept as events arrive, so a turn of the loop costs what arrived, not a scan of every node
        self._top_step: int | None = None  # the highest step any node printed
        self._any_completed = self._fatal_seen = False
        self._errors_seen = [0] * len(self.nodes)  # per node: parser errors already looked at
        self._troubled: set[int] = set()  # nodes whose follower was lost and has not sent bytes since
        self._exited: list[int] = []  # nodes whose exit status arrived
        self._unchecked = set(range(len(self.nodes)))  # nodes whose arguments dump is not checked yet

    # -- public -------------------------------------------------------------------------------
    def run(self) -> WatchOutcome:
        self._start = self.clock()
        self._open_sinks()
        targets = [FollowTarget(n.target.log_path, n.target.exit_path, n.offset) for n in self.nodes]
        try:
            with self.hosts.follow(targets, self._options) as follow:
                self._follow = follow
                outcome = self._loop()
            outcome.notes += self._restarts
            for n in self.nodes:
                n.parser.finish()  # a last line without its newline still counts
            return outcome
        finally:
            for sink in self._sinks:
                if sink is not None:
                    try:
                        sink.close()
                    except OSError:
                        pass  # a full disk was already reported by the write that failed

    # -- loop ---------------------------------------------------------------------------------
    def _loop(self) -> WatchOutcome:
        s = self.settings
        start = self.clock()
        last_progress = start
        completed_at: float | None = None
        deadline = start + s.overall_timeout(self.iterations)
        best_step: int | None = None
        while True:
            self._apply(self._follow.events(self._wait(start, last_progress, completed_at, best_step, deadline)))
            if self.stop.is_set():
                return self._outcome("interrupted", "interrupted by the user", start)
            now = self.clock()
            if self._troubled:
                self._restart_lost(now)
            if self._fatal_seen:
                self._drain()  # the root cause may sit in another node's log, not yet looked at
            failure = (self._fatal_error() if self._fatal_seen else None) or self._config_mismatch(start)
            if failure is not None:
                return failure
            unreachable = [self.nodes[i] for i in sorted(self._troubled)
                           if self.nodes[i].read_failures >= s.unreachable_after]
            if unreachable:
                n = unreachable[0]
                return self._outcome(
                    "unreachable", f"lost contact with node {n.target.host}: {n.last_error}", start, rank=n.target.rank
                )
            step = self._top_step
            if step is not None and (best_step is None or step > best_step):
                best_step, last_progress = step, now
            if completed_at is None and self._completed():
                completed_at = now
            if completed_at is not None:
                if len(self._exited) == len(self.nodes):
                    return self._finish_completed(start)  # an exit comes after every byte before it
                if now - completed_at > s.exit_grace_s:
                    return self._finish_completed(
                        start, note=f"job did not exit within {s.exit_grace_s:.0f}s of its last iteration")
            else:
                if self._exited:
                    self._drain()
                    failure = self._fatal_error() or self._config_mismatch(start, final=True)
                    if failure is not None:
                        return failure
                    if self._completed():
                        continue  # the last lines arrived with the drain
                    n = self.nodes[min(self._exited)]
                    return self._outcome(
                        "exited",
                        f"job exited with status {n.exit_code} on node {n.target.host} before completing "
                        f"(step {self._progress_text()})",
                        start,
                        rank=n.target.rank,
                    )
                stalled = (best_step is None and now - start > s.startup_timeout_s) or \
                    (best_step is not None and now - last_progress > s.stall_timeout_s)
                if stalled and not self._looked_again():
                    continue  # what the nodes wrote since their followers' last look changed the picture
                if best_step is None and now - start > s.startup_timeout_s:
                    return self._outcome(
                        "stalled", f"no training iteration within {s.startup_timeout_s:.0f}s of launch", start
                    )
                if best_step is not None and now - last_progress > s.stall_timeout_s:
                    return self._outcome(
                        "stalled",
                        f"no new iteration for {s.stall_timeout_s:.0f}s (stuck at step {self._progress_text()})",
                        start,
                    )
            if now > deadline:
                return self._outcome("timeout", f"overall timeout of {deadline - start:.0f}s reached", start)

    def _wait(self, start: float, last_progress: float, completed_at: float | None, best_step: int | None,
              deadline: float) -> float:
        """How long the next wait for events may last: until the nearest thing to decide (a
        timeout, a restart due), at most one poll interval (so a stop is seen), never zero."""
        s = self.settings
        due = [deadline]
        if completed_at is not None:
            due.append(completed_at + s.exit_grace_s)
        elif best_step is None:
            due.append(start + s.startup_timeout_s)
        else:
            due.append(last_progress + s.stall_timeout_s)
        due += [self.nodes[i].restart_at for i in self._troubled if self.nodes[i].restart_at is not None]
        return max(MIN_WAIT_S, min(s.poll_interval_s, min(due) - self.clock()))

    def _apply(self, events: list) -> None:
        """Each node's new bytes into its copy and its parser; exits and lost followers noted."""
        for event in events:
            node, sink = self.nodes[event.index], self._sinks[event.index]
            if isinstance(event, Delta):
                if event.offset > node.offset:  # bytes missing: read again from what is held
                    self._follow.restart(event.index, node.offset)
                    continue
                data = take(node.offset, event)
                if data:
                    node.offset += len(data)
                    node.read_failures = 0
                    self._troubled.discard(event.index)
                    self._feed(event.index, sink, node.decoder.decode(data))
            elif isinstance(event, Exited):
                if event.size is not None and node.offset < event.size:
                    self._follow.restart(event.index, node.offset)
                elif node.exit_code is None:
                    node.exit_code = event.code
                    self._exited.append(event.index)
                    node.state = "done" if event.code == 0 else "failed"
                    self._emit(node)
            elif isinstance(event, Lost):
                now = self.clock()
                if node.restarted_at is not None and now - node.restarted_at > self._options.silence_s:
                    node.read_failures = 0  # the last restart lived long enough to count as mended
                node.read_failures += 1
                self._troubled.add(event.index)
                node.last_error = event.error
                node.restart_at = now if node.read_failures == 1 else now + self.settings.poll_interval_s

    def _feed(self, index: int, sink: RedactingWriter | None, text: str) -> None:
        node = self.nodes[index]
        if not text:
            return
        if sink is not None:
            try:
                sink.write(text)
                sink.flush()
            except OSError as exc:  # disk full / unwritable run directory: stop, don't watch blind
                raise InfraError(f"cannot copy node {node.target.host}'s log to {node.target.local_copy}: "
                                 f"{exc.strerror or exc}") from None
        if node.parser.feed(text):
            node.state = "running"
            self._emit(node)
        step, errors = node.last_step, node.parser.errors
        if step is not None and (self._top_step is None or step > self._top_step):
            self._top_step = step
        self._any_completed = self._any_completed or node.parser.completed
        if len(errors) > self._errors_seen[index]:
            self._fatal_seen = self._fatal_seen or any(hit.fatal for hit in errors[self._errors_seen[index]:])
            self._errors_seen[index] = len(errors)

    def _restart_lost(self, now: float) -> None:
        """Start again, from the offset held, every lost follower whose restart is due."""
        for index in sorted(self._troubled):
            node = self.nodes[index]
            if node.restart_at is not None and node.restart_at <= now \
                    and node.read_failures < self.settings.unreachable_after:
                node.restart_at, node.restarted_at = None, now
                self._restarts.append(f"the log follower of node {node.target.host} was restarted from byte "
                                      f"{node.offset} after: {node.last_error}")
                self._follow.restart(index, node.offset)

    def _looked_again(self) -> bool:
        """Before a stall is declared: every follower looks at its node now (its last look may be a
        poll interval old). True when that changed nothing (no new step, no error, no exit)."""
        steps, exits = self._best_step(), sum(n.exit_code is not None for n in self.nodes)
        self._drain()
        fatal = any(hit.fatal for n in self.nodes for hit in n.parser.errors)
        return not fatal and self._best_step() == steps and sum(n.exit_code is not None for n in self.nodes) == exits

    def _drain(self) -> None:
        """Every node's log up to now, before a decision (a job exited, a cause is named, a stall):
        each follower looks once more. It returns as soon as all answered; the bound only matters
        for a node whose follower is still starting (a loaded node) or hangs."""
        self._apply(self._follow.drain(max(DRAIN_MIN_S, 5 * self.settings.poll_interval_s)))

    # -- decisions ----------------------------------------------------------------------------
    def _fatal_error(self) -> WatchOutcome | None:
        """The root cause among every node's fatal hits: a node's own fault (GPU, OOM, HIP, NaN,
        segfault) outranks the NCCL/process errors its peers print when it dies."""
        hits = [(node, hit) for node in self.nodes for hit in node.parser.errors if hit.fatal]
        if not hits:
            return None
        node, hit = min(hits, key=lambda nh: (CAUSE_RANK.get(nh[1].cls, 3), nh[0].target.rank, nh[1].line))
        error = {
            "name": hit.name,
            "cls": hit.cls,
            "host": node.target.host,
            "rank": node.target.rank,
            "line": hit.line,
            "text": hit.text,
            "hint": hit.hint,
        }
        others = sorted({f"{h.name} on {n.target.host}" for n, h in hits if n is not node})
        node.state = "failed"
        self._emit(node, note=hit.name)
        reason = f"{hit.name} on node {node.target.host} (log line {hit.line}): {self.redactor(hit.text).strip()[:200]}"
        if others:
            reason += f" [then: {', '.join(others[:3])}]"
        return WatchOutcome(
            status="failed",
            reason=reason,
            nodes=self.nodes,
            reporting_rank=self._reporting_rank(),
            elapsed_s=self.clock() - self._start,
            error=error,
            tail=_tail_of(node),
        )

    def _config_mismatch(self, start: float, *, final: bool = False) -> WatchOutcome | None:
        """Check each node's arguments dump once it is complete (``final``: whatever was read);
        the first node whose trainer does not run what was asked fails the job there and then."""
        if self.config_check is None:
            return None
        for index in sorted(self._unchecked):
            node = self.nodes[index]
            parser = node.parser
            if node.config_check is not None or not parser.arguments:
                continue
            if not (final or parser.arguments_complete):
                continue
            node.config_check = self.config_check(parser)
            self._unchecked.discard(index)
            if node.config_check is not None and not node.config_check.ok:
                node.state = "failed"
                self._emit(node, note="config mismatch")
                reason = f"node {node.target.host}: {node.config_check.reason}"
                return WatchOutcome("mismatch", reason, self.nodes, self._reporting_rank(),
                                    self.clock() - start, tail=_tail_of(node))
        return None

    def _reporting_rank(self) -> int:
        """The node whose log carries the iteration lines (the last rank on multi-node Megatron)."""
        best = max(self.nodes, key=lambda n: (n.last_step or -1, n.target.rank))
        return best.target.rank if best.last_step is not None else self.nodes[-1].target.rank

    def _best_step(self) -> int | None:
        steps = [n.last_step for n in self.nodes if n.last_step is not None]
        return max(steps) if steps else None

    def _completed(self) -> bool:
        return self._any_completed

    def _progress_text(self) -> str:
        rep = self.nodes[self._reporting_rank()]
        return f"{rep.last_step if rep.last_step is not None else 0}/{rep.planned or self.iterations}"

    def _finish_completed(self, start: float, note: str = "") -> WatchOutcome:
        mismatch = self._config_mismatch(start, final=True)
        if mismatch is not None:
            return mismatch
        for n in self.nodes:
            if n.state != "failed":
                n.state = "done"
                self._emit(n)
        bad = [n for n in self.nodes if n.exit_code not in (None, 0)]
        reason = note or "completed"
        if bad:
            reason = f"completed; job exited with status {bad[0].exit_code} on node {bad[0].target.host}"
        out = WatchOutcome("completed", reason, self.nodes, self._reporting_rank(), self.clock() - start)
        if self.config_check is not None and all(not n.parser.arguments for n in self.nodes):
            out.warnings.append("no node's log holds an arguments dump (an older log format?): what the "
                                "trainer ran could not be checked against the config")
        return out

    def _outcome(self, status: str, reason: str, start: float, rank: int | None = None) -> WatchOutcome:
        rank = self._reporting_rank() if rank is None else rank
        for n in self.nodes:
            if n.state not in ("done", "failed"):
                n.state = "stalled" if status in ("stalled", "timeout") else "failed"
                self._emit(n, note=status)
        node = next(n for n in self.nodes if n.target.rank == rank)
        return WatchOutcome(status, reason, self.nodes, self._reporting_rank(), self.clock() - start,
                            tail=_tail_of(node))

    # -- plumbing -----------------------------------------------------------------------------
    def _emit(self, node: NodeState, note: str = "") -> None:
        last = node.parser.iterations.get(node.last_step) if node.last_step is not None else None
        self.listener(
            NodeProgress(
                stage=self.stage,
                combo=self.combo,
                host=node.target.host,
                rank=node.target.rank,
                state=node.state,
                step=node.last_step,
                total=node.planned or self.iterations,
                loss=_finite(getattr(last, "loss", None)),
                tflops=_finite(getattr(last, "tflops", None)),
                elapsed_s=self.clock() - self._start,
                note=note,
            )
        )

    def _open_sinks(self) -> None:
        self._sinks = []
        for n in self.nodes:
            path = n.target.local_copy
            if path is None:
                self._sinks.append(None)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            self._sinks.append(RedactingWriter(open_for_write(path), self.redactor))  # closed in run()


def _finite(x: float | None) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _tail_of(node: NodeState, lines: int = 40) -> list[str]:
    path = node.target.local_copy
    if path is None or not path.exists():
        return []
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        text = fh.read().decode("utf-8", "replace")
    return text.splitlines()[-lines:]
