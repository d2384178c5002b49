"""`invoke tokenizer`: fetch tokenizer.model where the model family needs a local file."""

from invoke import Collection

from cvs_tasks.tasks import container
from cvs_tasks.tasks._lifecycle import HELP, lifecycle_task, request, stage_task


@lifecycle_task("download_tokenizer", pre=[container.launch], default=True, help=HELP, iterable=["combo"])
def download(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False, reports_dir=None):
    """Download tokenizer.model for DeepSeek/Mixtral on Megatron-LM (test_download_tokenizer)."""
    stage_task(c, "download_tokenizer", request(c, config, cluster, run, suite, dry_run, force, reports_dir), combos=combo)


ns = Collection("tokenizer", download)
