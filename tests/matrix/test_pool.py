"""The process pool's own bookkeeping, with an executor that breaks on cue: a worker that dies
between two waits fails only its own pair, whatever the order the pool learns it in."""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

from driftcheck.matrix import pool
from driftcheck.matrix.tasks import PairOutcome, PairRow, PairTask


def _task(name: str) -> PairTask:
    return PairTask(name, name, "1", name, "digest", "host", "1.0", f"key-{name}")


class _Executor:
    """Runs each task at submit. The task named ``killer`` dies: its future breaks, and every
    later submit is refused as a broken pool refuses it, before any wait has seen the death."""

    def __init__(self, **_: object) -> None:
        self.dead = False

    def submit(self, runner, task):  # noqa: ANN001, ANN201 - the executor's own signature
        if self.dead:
            raise BrokenProcessPool("A child process terminated abruptly")
        future: Future = Future()
        if task.client == "killer":
            self.dead = True
            future.set_exception(BrokenProcessPool("A child process terminated abruptly"))
        else:
            future.set_result(runner(task))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_a_pool_that_breaks_before_a_wait_sees_it_fails_only_the_dead_pair(monkeypatch):
    monkeypatch.setattr(pool, "ProcessPoolExecutor", _Executor)
    tasks = [_task("killer"), _task("a"), _task("b"), _task("c")]

    def runner(task: PairTask) -> PairOutcome:
        return PairOutcome(PairRow({"client_spec": task.client_spec, "status": "clean"}))

    outcomes = list(pool.run_in_pool(tasks, 2, runner=runner))
    rows = {o.row.pair["client_spec"]: o.row.pair for o in outcomes}
    assert sorted(rows) == ["a", "b", "c", "killer"]
    assert rows["killer"]["status"] == "failed" and "died" in rows["killer"]["why"]
    assert all(rows[name]["status"] == "clean" for name in "abc")
