"""cvs-tasks: the invoke entry point. Only assembles the collection; every task lives in cvs_tasks.tasks."""

from cvs_tasks.tasks import namespace

ns = namespace()
