"""Processes spending from one benchmark budget (for the cross-process budget tests): ``spend`` imports the result
store and the budget only, so that it starts fast; ``bench`` runs part of a benchmark as a worker would. A worker
that fails puts ("error", its traceback) on ``results`` and breaks the barrier, so the test says why at once."""
from __future__ import annotations

import traceback

from core.benchmark.budget import Budget, BudgetReached
from core.benchmark.results import ResultStore
from core.llm.client import Completion


def spend(directory: str, budget_ids: list[str], attempts: int, tokens: int, barrier, results) -> None:
    """For each budget in turn (released with the other workers by ``barrier``): reserve up to ``attempts`` calls
    until refused, settling each with ``tokens`` tokens but releasing every fifth (a call that failed); put
    (budget id, calls settled, calls released, the refusal or None) on ``results``."""
    try:
        store = ResultStore(directory)
        for budget_id in budget_ids:
            budget, settled, released, refusal = Budget(store, budget_id), 0, 0, None
            barrier.wait()
            for n in range(attempts):
                try:
                    budget.reserve()
                except BudgetReached as e:
                    refusal = str(e)
                    break
                if n % 5 == 4:
                    budget.release()
                    released += 1
                else:
                    budget.settle(Completion("x", tokens - tokens // 3, tokens // 3, 0.0, False))
                    settled += 1
            results.put((budget_id, settled, released, refusal))
    except Exception:  # noqa: BLE001 - said to the test
        barrier.abort()
        results.put(("error", traceback.format_exc()))


def bench(config, questions: list[int], barrier, results) -> None:
    """Run the items of ``questions`` of the benchmark ``config`` describes (its budget id given) without claiming
    its directory, started with the other worker by ``barrier``; put (items done, why it stopped) on ``results``."""
    try:
        from core.benchmark.runner import Bench  # heavy: LangGraph, only for this worker

        bench = Bench(config)
        items = [i for i in bench.pending if i.question in questions]
        barrier.wait()
        progress = bench.run_items(items)
        results.put((progress.done, progress.stopped))
    except Exception:  # noqa: BLE001 - said to the test
        barrier.abort()
        results.put(("error", traceback.format_exc()))
