"""Pre-tasks receive the caller's run-context flags (never --force)."""

from invoke import Call, Collection, Config, task

from cvs_tasks.tasks.executor import ForwardingExecutor


@task
def launch(c, config=None, run=None, force=False):
    pass


@task(pre=[launch])
def train(c, config=None, run=None, combo=None, force=False):
    pass


def test_pre_tasks_get_the_flags_they_declare_but_not_force():
    ex = ForwardingExecutor(Collection(launch, train), config=Config())
    calls = ex.expand_calls([Call(train, kwargs={"config": "x.json", "run": "r1", "combo": ["A"], "force": True})])
    pre, main = calls
    assert pre.task is launch and pre.kwargs == {"config": "x.json", "run": "r1"}
    assert main.kwargs["force"] is True


def test_nothing_is_forwarded_when_the_caller_gave_nothing():
    ex = ForwardingExecutor(Collection(launch, train), config=Config())
    pre, _ = ex.expand_calls([Call(train, kwargs={"config": None, "run": None})])
    assert pre.kwargs == {}
