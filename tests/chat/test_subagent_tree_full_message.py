"""A refused batch says what was wrong: the batch is larger than what the tree may
still start, not "already ran 0 of at most 3" (seed 004 §8.7)."""

from __future__ import annotations

import pytest

from skald_host.core.agent.subagents.runs import RunStore, TreeFull

from . import test_subagent_runs
from .test_subagent_runs import accept, new_run

db = test_subagent_runs.db  # the fixture: a real member file


async def test_a_batch_larger_than_the_tree_may_still_start_says_so(db):
    store = RunStore(db, "gen-1")
    with pytest.raises(TreeFull) as refused:
        await accept(store, *(new_run("foreground") for _ in range(5)), max_runs=3)
    assert str(refused.value) == (
        "this batch of 5 runs is more than the 3 this delegation tree may still start (0 of at most 3 already ran); ask for at most 3 at once"
    )
    await accept(store, new_run("foreground"), max_runs=3)
    with pytest.raises(TreeFull) as refused:
        await accept(store, new_run("foreground"), new_run("foreground"), new_run("foreground"), max_runs=3)
    assert "batch of 3 runs is more than the 2" in str(refused.value) and "(1 of at most 3 already ran)" in str(refused.value)


async def test_a_single_run_over_the_bound_says_how_many_ran(db):
    store = RunStore(db, "gen-1")
    await accept(store, new_run("foreground"), max_runs=1)
    with pytest.raises(TreeFull) as refused:
        await accept(store, new_run("foreground"), max_runs=1)
    assert str(refused.value) == "this delegation tree already ran 1 of at most 1 runs"
