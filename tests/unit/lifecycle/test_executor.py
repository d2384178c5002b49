"""Pre-tasks receive the caller's run-context flags (never --force)."""

import pytest
from invoke import Call, Collection, Config, task
from invoke.exceptions import Exit

from cvs_tasks.tasks.chain import ForwardingExecutor


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


# -- one command line, one run -----------------------------------------------------------------
def parsed(*argv: str):
    """The calls Invoke's parser makes of a command line, and an executor over the real collection."""
    from invoke import Parser

    from cvs_tasks.tasks import namespace

    ns = namespace()
    contexts = Parser(contexts=ns.to_contexts()).parse_argv(list(argv))
    ex = ForwardingExecutor(ns, config=Config())
    return ex, ex.normalize(contexts)


def named(expanded):
    """The calls the user typed (not the pre-tasks), in order."""
    return [c for c in expanded if c.position >= 0]


def test_flags_on_the_last_task_apply_to_every_task_of_the_line():
    """The README's `invoke container smoke --config X --cluster Y`: container works on X too."""
    ex, calls = parsed("container", "smoke", "--config", "x.json", "--cluster", "y.json", "--dry-run")
    expanded = ex.expand_calls(calls)
    assert [c.task.cvs_stage for c in expanded] == ["launch_container", "launch_container", "download_tokenizer",
                                                    "smoke"]
    for call in expanded:
        assert (call.kwargs["config"], call.kwargs["cluster"], call.kwargs["dry_run"]) == ("x.json", "y.json", True)


def test_two_values_of_one_flag_are_refused_before_anything_runs():
    ex, calls = parsed("container", "--config", "a.json", "smoke", "--config", "b.json")
    with pytest.raises(Exit) as refused:
        ex.expand_calls(calls)
    assert refused.value.code == 2
    message = refused.value.message
    assert "`container.launch --config a.json`" in message and "`smoke.run --config b.json`" in message


def test_one_file_named_two_ways_is_one_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ex, calls = parsed("container", "--config", "x.json", "smoke", "--config", str(tmp_path / "x.json"))
    assert len(named(ex.expand_calls(calls))) == 2  # not refused


def test_a_flag_given_to_a_task_that_does_not_take_it_reaches_the_others():
    """`invoke report --run r1 metric`: metric judges r1; report (no --config) is unchanged by a config."""
    ex, calls = parsed("report", "--run", "r1", "metric", "--config", "x.json")
    report, metric = named(ex.expand_calls(calls))
    assert report.kwargs["run"] == "r1" and "config" not in report.kwargs
    assert (metric.kwargs["run"], metric.kwargs["config"]) == ("r1", "x.json")


def test_combo_and_force_stay_with_their_own_task():
    """`invoke metric --combo A loss --combo B --force`: metric judges A, loss B, and only loss is forced."""
    ex, calls = parsed("metric", "--combo", "A", "loss", "--combo", "B", "--force", "--run", "r1")
    got = [(c.kwargs["combo"], c.kwargs["force"], c.kwargs["run"]) for c in named(ex.expand_calls(calls))]
    assert got == [(["A"], False, "r1"), (["B"], True, "r1")]


def test_judging_runs_no_prerequisite_unless_asked():
    ex, calls = parsed("metric", "--combo", "A")
    assert [c.task.cvs_stage for c in ex.expand_calls(calls)] == ["metric"]
    ex, calls = parsed("metric", "--combo", "A", "--with-pre")
    expanded = ex.expand_calls(calls)
    assert [c.task.cvs_stage for c in expanded] == ["launch_container", "download_tokenizer", "smoke", "training",
                                                    "metric"]
    assert expanded[3].kwargs["combo"] == ["A"] and expanded[3].needed_by == ("metric", False)


def test_the_line_knows_whether_it_may_launch_and_which_stage_says_what_stays_up():
    def chain(*argv):
        ex, calls = parsed(*argv)
        expanded = ex.expand_calls(calls)
        return expanded[-1].chain, [c.make_context(Config()).cvs_last_stage for c in named(expanded)]

    assert chain("metric", "loss", "report")[0].launches is False
    assert chain("teardown")[0].launches is False
    assert chain("metric", "--with-pre")[0].launches is True
    assert chain("metric", "train")[0].launches is True  # the whole line: metric may not join a finished run
    assert chain("container", "smoke", "report")[1] == [False, True, False]
