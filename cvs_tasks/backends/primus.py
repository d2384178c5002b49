"""Primus: ``primus-cli direct -- train pretrain`` with an experiment YAML from the image.

The wrapper builder and the YAML helpers are ``jobs.primus``; the YAML is looked up on node 0
before the first job (``lifecycle.jobrun.primus_experiment``, once per run). Primus takes its
tokenizer by repo id from the YAML, saves and resumes checkpoints (the checkpoint test), and its
memory figure (hip ``usage_ratio``) is recorded rather than gated by the shipped optional spec.
"""

from __future__ import annotations

from typing import Any

from cvs_tasks.backends import Backend, register


class Primus(Backend):
    name = "primus"
    label = "Primus"
    dialect = "primus"
    tokenizer_note = "takes the HF repo id from its YAML"
    checkpoint_test = True
    memory_record_only = True

    def matches(self, image: str) -> bool:
        return "primus" in image.lower()

    def build_launch(self, job, experiment):
        from cvs_tasks.jobs.primus import build_primus_launch

        return build_primus_launch(job, experiment)

    def experiment(self, session, job) -> str | None:
        from cvs_tasks.lifecycle.jobrun import primus_experiment

        return primus_experiment(session, job)[0]

    def asked(self, job) -> dict[str, Any]:
        return {"launcher": "primus", "script": "primus-cli"}  # tokenizer and mock data come from the YAML

    def reference_numbers(self, iterations, summary):
        from cvs_tasks.judge.reference import primus_numbers

        return primus_numbers(iterations)


PRIMUS = register(Primus())
