"""Megatron-LM: the ROCm images' family launchers (train_llama3.sh, ...), the fallback for any image.

The wrapper builder is ``jobs.megatron``, the family table ``cvs_tasks.families``, the launch contracts
``jobs.contracts``; this object says which of them a Megatron-LM run uses and what only it does:
a local tokenizer for the families whose launcher needs the file, the Broadcom NIC library copy
on distributed runs, and the reference suite's aggregation from the launcher's summary lines.
"""

from __future__ import annotations

from typing import Any

from cvs_tasks.backends import Backend, register


class Megatron(Backend):
    name = "megatron"
    label = "Megatron-LM"
    dialect = "megatron"
    fallback = True
    local_tokenizer = True
    broadcom_nic_setup = True

    def matches(self, image: str) -> bool:
        return True  # the fallback: an image no other backend claims

    def build_launch(self, job, experiment):
        from cvs_tasks.jobs.megatron import build_megatron_launch

        return build_megatron_launch(job)

    def size_problem(self, what: str, size) -> str | None:
        if not size.megatron:  # no Megatron-LM family launcher trains it (Llama 3.1 405B)
            return f"{what} runs only on Primus; use a Primus image (its name contains 'primus')"
        return None

    def contract_problems(self, suite, *, distributed):
        from cvs_tasks.jobs.contracts import family_contract_problems

        return family_contract_problems(suite, distributed=distributed)

    def launcher_needs(self, suite, *, distributed):
        from cvs_tasks.jobs.contracts import family_launcher_needs

        return family_launcher_needs(suite, distributed=distributed)

    def asked(self, job) -> dict[str, Any]:
        """The family launcher (or the user's own script), the tokenizer it was given, MOCK_DATA=1."""
        from cvs_tasks.families import megatron_family

        family = megatron_family(job.param("tokenizer_model"))
        override = job.param("training_script")
        return {
            "launcher": family.name if family and not override else "generic",
            "script": (override or (family.script if family else "the launcher")).rsplit("/", 1)[-1],
            "tokenizers": tuple(t for t in (job.tokenizer_path, job.param("tokenizer_model")) if t),
            "mock_data": True,  # the wrapper exports MOCK_DATA=1
        }

    def reference_numbers(self, iterations, summary):
        from cvs_tasks.judge.reference import megatron_numbers

        return megatron_numbers(iterations, summary)


MEGATRON = register(Megatron())
