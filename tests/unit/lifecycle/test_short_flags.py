"""One short-flag table for every task (cvs_tasks/tasks/_common.py: SHORT_FLAGS): a letter means the
same flag in every task of the collection, and a flag the table does not list has no short form."""

from __future__ import annotations

import pytest
from invoke import Collection

from cvs_tasks.tasks import namespace
from cvs_tasks.tasks._common import SHORT_FLAGS, FlagTableTask, task


def every_task() -> list[tuple[str, object]]:
    ns = namespace()
    return [(name, ns[name]) for name in sorted(ns.task_names)]


def test_the_table_gives_each_letter_one_flag():
    letters = list(SHORT_FLAGS.values())
    assert len(letters) == len(set(letters)), "a letter is given to two flags"
    assert all(len(letter) == 1 and letter.isalpha() for letter in letters)


@pytest.mark.parametrize("name, made", every_task(), ids=[name for name, _ in every_task()])
def test_every_flag_of_every_task_follows_the_table(name, made):
    assert isinstance(made, FlagTableTask), f"{name}: made with invoke's task, not cvs_tasks.tasks._common.task"
    for argument in made.get_arguments():
        long, *short = argument.names
        expected = SHORT_FLAGS.get(argument.attr_name or long)
        assert short == ([expected] if expected else []), \
            f"{name} --{long}: short flag {short}, the table says {expected!r}"


def test_c_is_config_and_l_is_cluster_in_every_task_that_takes_them():
    seen = {"c": set(), "l": set()}
    for _name, made in every_task():
        for argument in made.get_arguments():
            for letter in seen:
                if letter in argument.names:
                    seen[letter].add(argument.names[0])
    assert seen == {"c": {"config"}, "l": {"cluster"}}
    cleanup = dict(every_task())["cleanup.run"]
    assert {a.names[0]: a.names[1:] for a in cleanup.get_arguments()}["cluster"] == ("l",)  # was -c


def test_a_task_made_with_the_decorator_gets_the_tables_letters_and_no_others():
    @task
    def probe(c, config=None, output=None, combo=None):
        pass

    names = {a.names[0]: a.names[1:] for a in Collection(probe)["probe"].get_arguments()}
    assert names == {"config": ("c",), "output": (), "combo": ("o",)}


def test_a_task_keeps_its_help_once_its_flags_are_built():
    """Invoke pops each flag's help while building the flags: a second parse in one process lost it."""
    made = dict(every_task())["cluster.check"]
    first = {a.name: a.help for a in made.get_arguments()}
    assert first == {a.name: a.help for a in made.get_arguments()} and all(first.values())
