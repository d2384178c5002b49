"""What a LogParser can tell about the log so far: sizes, dialect, progress, run metrics, summary.

Kept apart from ``parser`` (which consumes text) so each file holds one concern; ``LogParser``
inherits these read-only views.
"""

from __future__ import annotations

import math
from array import array

from cvs_tasks.metrics import aggregate, flops
from cvs_tasks.metrics import columns as columns_mod
from cvs_tasks.metrics.iteration import COL, Iteration, iteration_from_row
from cvs_tasks.metrics.signatures import ErrorHit
from cvs_tasks.metrics.store import IterationMap


class ParserQueries:
    """Read-only views over a parser's state (``_store``, ``facts``, ``errors`` and friends)."""

    @property
    def seq_length(self) -> int | None:
        """Explicit value, else the arguments dump, else Primus' ``seq_len:`` set-up line."""
        return self._seq or self.facts.arg_int("seq_length") or self.facts.primus_seq

    @property
    def world_size(self) -> int | None:
        return self._world or self.facts.arg_int("world_size") or self.facts.primus_world

    @property
    def global_batch_size(self) -> int | None:
        """Explicit value, else the arguments dump (each line also prints its own GBS)."""
        return self._gbs or self.facts.arg_int("global_batch_size")

    @property
    def dialect(self) -> str | None:
        """``megatron`` or ``primus`` (the flag given, or detected); None before any evidence."""
        if self._dialect != "auto":
            return self._dialect
        return columns_mod.detect_dialect(self._features, self.facts)

    @property
    def flavour(self) -> str | None:
        """Which generation printed the lines (log_formats.md): upstream, rocm-fork, primus-*."""
        return columns_mod.flavour_of(self.dialect, self._features, self.facts)

    @property
    def timestamps(self) -> str | None:
        f = self._features
        return "microseconds" if "ts_us" in f else "seconds" if "ts_s" in f else None

    @property
    def iterations(self) -> IterationMap:
        """step -> Iteration, sorted by step; a repeated step keeps its last line."""
        return IterationMap(self._store, self._materialize)

    @property
    def last_step(self) -> int | None:
        return self._store.last_step

    @property
    def planned(self) -> int | None:
        """Planned iteration count: the ``/T`` of the latest step, else ``train_iters``."""
        if self._store.steps:
            total = self._store.cols[COL["total"]][-1]
            if total == total:
                return int(total)
        return self.facts.arg_int("train_iters")

    @property
    def completed(self) -> bool:
        """``iteration N/N`` seen, or Primus ``Training completed.`` / ``torchrun finished successfully``."""
        if self.facts.completion_marker:
            return True
        planned = self.planned
        return bool(planned and self.last_step is not None and self.last_step >= planned)

    @property
    def warmup_cutoff(self) -> int:
        return aggregate.warmup_cutoff(self.planned, self.last_step)

    @property
    def fatal_errors(self) -> list[ErrorHit]:
        return [e for e in self.errors if e.fatal]

    def new_errors(self) -> list[ErrorHit]:
        """Hits found since the previous call (for a watch loop)."""
        fresh = self.errors[self._error_cursor:]
        self._error_cursor = len(self.errors)
        return fresh

    def _materialize(self, row: tuple) -> Iteration:
        derived = None
        if row[COL["tokens_per_gpu"]] != row[COL["tokens_per_gpu"]]:
            gbs = self._gbs or row[COL["global_batch_size"]]
            derived = aggregate.derived_tokens(gbs, row[COL["elapsed_ms"]], self.seq_length,
                                               self.world_size)
        return iteration_from_row(row, derived)

    def _steady_tokens(self, start: int) -> list[float]:
        cols = self._store.cols
        logged = cols[COL["tokens_per_gpu"]][start:]
        elapsed = cols[COL["elapsed_ms"]][start:]
        gbs = cols[COL["global_batch_size"]][start:]
        if self._gbs:
            gbs = array("d", [float(self._gbs)]) * len(elapsed)
        return aggregate.tokens_column(logged, gbs, elapsed, self.seq_length, self.world_size)

    def metrics(self) -> dict[str, float | None]:
        """The ``training.*`` run metrics over steady state (None when unknown)."""
        start = self._store.first_after(self.warmup_cutoff)
        cols = self._store.cols
        steady = (cols[COL["elapsed_ms"]][start:], cols[COL["tflops"]][start:],
                  self._steady_tokens(start), cols[COL["mem_ratio"]][start:])
        if self._folded.rows:
            seq, world = self.seq_length, self.world_size
            scale = world / (seq * 1000.0) if seq and world else None
            found = aggregate.merged_run_metrics(*steady, self._folded, scale)
        else:
            found = aggregate.run_metrics(*steady)
        return aggregate.fill_from_summary(found, self.facts.launcher_summary)

    @property
    def metrics_exact(self) -> bool:
        """False only when folded rows may be counted differently than a full recount would."""
        return self._folded.exact(self.warmup_cutoff)

    @property
    def iterations_parsed(self) -> int:
        """Distinct iteration steps parsed, kept or folded."""
        return len(self._store) + self._folded.rows

    def model_dims(self) -> flops.ModelDims | None:
        """Model shape: the ``model`` name given, refined by the arguments dump when it has one."""
        return flops.dims_from_args(self.facts.args, flops.model_dims(self.model))

    def tflops_recomputed(self, metrics: dict[str, float | None] | None = None) -> float | None:
        """TFLOP/s/GPU from steady tokens/s with the current formula (flops.py); None if unknown."""
        tokens = (metrics or self.metrics()).get("training.tokens_per_gpu")
        return flops.recompute_tflops(tokens, self.model_dims(), self.seq_length)

    def loss_points(self) -> tuple[tuple[int, float] | None, tuple[int, float] | None]:
        """(step, loss) of the first and the last iteration that printed a finite loss."""
        steps, losses = self._store.steps, self._store.cols[COL["loss"]]
        finite = [i for i, v in enumerate(losses) if -math.inf < v < math.inf]
        first = (steps[finite[0]], losses[finite[0]]) if finite else None
        last = (steps[finite[-1]], losses[finite[-1]]) if finite else None
        folded_first, folded_last = self._folded.first_loss, self._folded.last_loss
        if folded_first is not None and (first is None or folded_first[0] < first[0]):
            first = folded_first
        if folded_last is not None and (last is None or folded_last[0] > last[0]):
            last = folded_last
        return first, last

    def summary(self) -> dict:
        """The ``logs.parse --json`` object."""
        metrics = self.metrics()
        first, last = self.loss_points()
        return {
            "dialect": self.dialect,
            "flavour": self.flavour,
            "timestamps": self.timestamps,
            "iterations": self.last_step,
            "iterations_parsed": self.iterations_parsed,
            "iterations_kept": len(self._store),
            "metrics_exact": self.metrics_exact,
            "planned_iterations": self.planned,
            "completed": self.completed,
            "warmup_cutoff": self.warmup_cutoff,
            "metrics": metrics,
            "tflops_recomputed": self.tflops_recomputed(metrics),
            "loss": {"first": first[1] if first else None, "first_step": first[0] if first else None,
                     "last": last[1] if last else None, "last_step": last[0] if last else None},
            "eval_losses": [[s, v] for s, v in sorted(self.facts.eval_losses.items())],
            "seq_length": self.seq_length,
            "world_size": self.world_size,
            "global_batch_size": self.global_batch_size,
            "launcher_summary": dict(self.facts.launcher_summary),
            "lines": self.lines,
            "lines_skipped": self.lines_skipped,
            "errors": [e.to_dict() for e in self.errors],
            "fatal": any(e.fatal for e in self.errors),
        }

