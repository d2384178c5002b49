"""What a LogParser can tell about the log so far: sizes, dialect, progress, run metrics, summary.

Kept apart from ``parser`` (which consumes text) so each file holds one concern; ``LogParser``
inherits these read-only views.
"""

from __future__ import annotations

import math

from cvs_tasks.metrics import flops, runstats
from cvs_tasks.metrics.iteration import (
    COL,
    Iteration,
    IterationMap,
    iteration_from_row,
    prefix_stamp,
    timestamp_seconds,
)
from cvs_tasks.metrics.signatures import ErrorHit, root_cause

PRIMUS_FEATURES = frozenset({"pairs", "tok_harmonic", "tok_per_gpu", "tf_compute", "hip", "rank_prefix"})


class ParserViews:
    """Read-only views over a parser's state (``stats``, ``curve``, ``facts``, ``errors``)."""

    @property
    def seq_length(self) -> int | None:
        """What the trainer says it used (arguments dump, else Primus' ``seq_len:`` line), else the
        value given: metrics follow the run that happened, not the one that was asked for."""
        return self.facts.arg_int("seq_length") or self.facts.primus_seq or self._seq

    @property
    def world_size(self) -> int | None:
        return self.facts.arg_int("world_size") or self.facts.primus_world or self._world

    @property
    def global_batch_size(self) -> int | None:
        """The arguments dump, else the value given (each iteration line also prints its own GBS)."""
        return self.facts.arg_int("global_batch_size") or self._gbs

    @property
    def arguments_complete(self) -> bool:
        """The whole dump has been read (its end line, or an iteration after dump lines without one)."""
        return self.facts.dump_done or bool(self.facts.args and self.last_step is not None)

    @property
    def arguments(self) -> dict[str, str]:
        """The whole arguments dump, name -> value as printed (Megatron-LM, DeepSpeed, Primus)."""
        return dict(self.facts.args)

    @property
    def dialect(self) -> str | None:
        """``megatron`` or ``primus`` (the flag given, or detected); None before any evidence."""
        if self._dialect != "auto":
            return self._dialect
        if self.facts.primus_evidence or self._features & PRIMUS_FEATURES:
            return "primus"
        if "iterations" in self._features or self.facts.args or self.facts.launcher_summary:
            return "megatron"
        return None

    @property
    def flavour(self) -> str | None:
        """Which generation printed the lines (docs/log_formats.md#the-iteration-line): upstream, rocm-fork,
        megatron-deepspeed, primus-legacy, primus-b1, primus-b2, primus-b3 or primus."""
        f, dialect = self._features, self.dialect
        if dialect == "primus":
            if "tok_harmonic" in f:
                return "primus-b3" if f & {"tf_avg_form", "tf_compute"} else "primus-b2"
            if "tok_per_gpu" in f:
                return "primus-b1" if f & {"ts_us", "ts_s"} else "primus-legacy"
            return "primus"
        if dialect == "megatron":
            if "deepspeed" in f:
                return "megatron-deepspeed"
            return "rocm-fork" if "mem_usages" in f or self.facts.launcher_summary else "upstream"
        return None

    @property
    def timestamps(self) -> str | None:
        f = self._features
        return "microseconds" if "ts_us" in f else "seconds" if "ts_s" in f else None

    @property
    def iterations(self) -> IterationMap:
        """step -> Iteration, sorted by step (thinned evenly past 20 000 steps, see ``iteration.Curve``)."""
        return IterationMap(self.curve, self._materialize)

    @property
    def last_step(self) -> int | None:
        return self.stats.last

    @property
    def planned(self) -> int | None:
        """Planned iteration count: the ``/T`` of the latest step, else ``train_iters``."""
        return self._planned or self.facts.arg_int("train_iters")

    @property
    def completed(self) -> bool:
        """``iteration N/N`` seen, or Primus ``Training completed.`` / ``torchrun finished successfully``."""
        if self.facts.completion_marker:
            return True
        planned = self.planned
        return bool(planned and self.last_step is not None and self.last_step >= planned)

    @property
    def warmup_cutoff(self) -> int:
        if self.stats.cutoff is not None:
            return self.stats.cutoff
        return runstats.warmup_cutoff(self.planned, self.last_step)

    @property
    def fatal_errors(self) -> list[ErrorHit]:
        return [e for e in self.errors if e.fatal]

    @property
    def root_cause(self) -> ErrorHit | None:
        """The fatal hit that explains a failure (``signatures.root_cause``)."""
        return root_cause(self.errors)

    def new_errors(self) -> list[ErrorHit]:
        """Hits found since the previous call (for a watch loop)."""
        fresh = self.errors[self._error_cursor:]
        self._error_cursor = len(self.errors)
        return fresh

    def _materialize(self, row: tuple) -> Iteration:
        """A stored row (its last item: the text before ``iteration``) as an ``Iteration``."""
        prefix = row[-1]
        stamp = prefix_stamp(prefix.decode("utf-8", "replace")) if isinstance(prefix, bytes) else None
        row = row[:-1] + (timestamp_seconds(stamp),)
        derived = None
        if row[COL["tokens_per_gpu"]] != row[COL["tokens_per_gpu"]]:
            printed = row[COL["global_batch_size"]]
            gbs = printed if printed == printed and printed else self.global_batch_size
            derived = runstats.derived_tokens(gbs, row[COL["elapsed_ms"]], self.seq_length,
                                               self.world_size)
        return iteration_from_row(row, derived)

    def metrics(self) -> dict[str, float | None]:
        """The ``training.*`` run metrics (None when unknown); ``metrics_steps`` says which steps."""
        found = self.stats.metrics(self.seq_length, self.world_size)
        return runstats.fill_from_summary(found, self.facts.launcher_summary)

    @property
    def iterations_parsed(self) -> int:
        """Distinct iteration steps counted in the run metrics (all attempts)."""
        return self.stats.counted

    def model_dims(self) -> flops.ModelDims | None:
        """Model shape: the ``model`` name given, refined by the arguments dump when it has one."""
        return flops.dims_from_args(self.facts.args, flops.model_dims(self.model))

    def tflops_recomputed(self, metrics: dict[str, float | None] | None = None) -> float | None:
        """TFLOP/s/GPU from steady tokens/s with the current formula (flops.py); None if unknown."""
        tokens = (metrics or self.metrics()).get("training.tokens_per_gpu")
        return flops.recompute_tflops(tokens, self.model_dims(), self.seq_length)

    def loss_points(self) -> tuple[tuple[int, float] | None, tuple[int, float] | None]:
        """(step, loss) of the first and the last iteration that printed a finite loss."""
        return self._fields.first_loss, self._fields.last_loss

    def summary(self) -> dict:
        """The ``logs.parse --json`` object."""
        metrics = self.metrics()
        first, last = self.loss_points()
        cause = self.root_cause
        return {
            "dialect": self.dialect,
            "flavour": self.flavour,
            "timestamps": self.timestamps,
            "iterations": self.last_step,
            "iterations_parsed": self.iterations_parsed,
            "iterations_kept": len(self.curve.rows),
            "metrics_exact": True,
            "planned_iterations": self.planned,
            "completed": self.completed,
            "warmup_cutoff": self.warmup_cutoff,
            "metrics": metrics,
            "metrics_steps": self.stats.describe(),
            "tflops_recomputed": self.tflops_recomputed(metrics),
            "loss": {"first": first[1] if first else None, "first_step": first[0] if first else None,
                     "last": last[1] if last else None, "last_step": last[0] if last else None},
            "eval_losses": [[s, v] for s, v in sorted(self.facts.eval_losses.items())],
            "seq_length": self.seq_length,
            "world_size": self.world_size,
            "global_batch_size": self.global_batch_size,
            "arguments": self.arguments,
            "launcher_summary": {k: v if math.isfinite(v) else None
                                 for k, v in self.facts.launcher_summary.items()},
            "lines": self.lines,
            "lines_skipped": self.lines_skipped,
            "errors": [e.to_dict() for e in self.errors],
            "errors_dropped": self.errors_dropped,
            "root_cause": cause.to_dict() if cause else None,
            "fatal": self.fatal_seen,
        }
