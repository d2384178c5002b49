"""Pre-tasks receive the caller's run-context flags (never --force)."""

from invoke import Call, Collection, Config, task

from cvs_tasks.tasks.lifecycle import ForwardingExecutor


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


def test_the_run_context_flows_down_a_chain_through_a_task_without_the_flag():
    """train -> smoke (no --combo) -> tokenizer: tokenizer still gets train's --combo."""
    @task
    def tokenizer(c, config=None, combo=None):
        pass

    @task(pre=[tokenizer])
    def smoke(c, config=None):
        pass

    @task(pre=[smoke])
    def train2(c, config=None, combo=None, force=False):
        pass

    train2.cvs_stage = "training"
    ex = ForwardingExecutor(Collection(tokenizer, smoke, train2), config=Config())
    tok, smk, main = ex.expand_calls([Call(train2, kwargs={"config": "x.json", "combo": ["A"], "force": True})])
    assert tok.kwargs == {"config": "x.json", "combo": ["A"]} and smk.kwargs == {"config": "x.json"}
    assert tok.needed_by == smk.needed_by == ("training", True)  # whom they serve, and it was forced
    context = tok.make_context(Config())
    assert context.cvs_needed_by == ("training", True)
    assert not hasattr(main.make_context(Config()), "cvs_needed_by")  # the named task serves itself


def test_the_collection_builds_the_lifecycle_graph():
    """The pre-task graph Invoke builds from the real collection mirrors the lifecycle."""
    from cvs_tasks.tasks import namespace

    ns = namespace()

    def pre(name: str) -> list[str]:
        return [getattr(p, "task", p).cvs_stage for p in ns[name].pre]

    assert pre("train") == ["smoke"] and pre("smoke") == ["download_tokenizer"]
    assert pre("tokenizer") == ["launch_container"] and pre("container") == []
    assert pre("metric") == pre("loss") == ["training"] and pre("checkpoint") == ["launch_container"]
    assert pre("teardown") == []
