"""Print how long Stop takes to end a run (issue "Analyst control"): a run whose model call hangs (a silent server)
and a run whose query hangs (a backend with a cancel hook), stopped from this process (``AgentRuntime.stop``) and
from another one (``RunStore.request_stop``, as ``python -m core stop`` does: the owner polls the store).

Target: a second or two from the request to the run stored as ``stopped``. Figures: median and max over N runs.

Usage: python bench/bench_stop.py [N]
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.agents.runtime import AgentRuntime
from core.agents.workspace import Workspace
from core.model.run_settings import RunSettings  # noqa: E402
from core.backends.base import QueryResult  # noqa: E402
from core.llm.client import open_llm  # noqa: E402
from core.store.runs import RunStore  # noqa: E402

TARGET_S = 2.0
ACT = "Thought: look\nAction: Relational DB\nAction input: SELECT 1"
FINAL = "Thought: done\nFinal answer: krakow"


class Question:
    text, scenario, answer = "Where should I allocate my merchant?", "locating", "krakow"


class HangingBackend:
    """A database whose queries hang until cancelled."""

    name, language = "hanging", "sql"

    def __init__(self):
        self._cancel = threading.Event()

    def schema_text(self):
        return "CREATE TABLE t (x INT);"

    def query(self, text, *, timeout_s=10.0, row_cap=200):
        self._cancel.wait(60)
        return QueryResult(["x"], [[1]], 1, 0.0, text)

    def cancel(self):
        self._cancel.set()

    def close(self):
        pass


def hanging_llm(spec, settings, skip=0):
    """A model that answers an action, then hangs on the next call."""
    llm = open_llm(spec, settings, skip=skip)
    complete, calls = llm.complete, []

    def hang_second(messages, stop, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            threading.Event().wait(60)
        return complete(messages, stop, **kwargs)

    llm.complete = hang_second
    return llm


def one(home: Path, replay: str, hang: str, remote: bool) -> float:
    """Seconds from the stop request to the run stored as stopped."""
    backend = HangingBackend() if hang == "query" else _Instant()
    runtime = AgentRuntime(home, workspace=lambda s: Workspace(Question(), backend, ["krakow"]),
                           llm_opener=hanging_llm if hang == "model" else None)
    run_id = f"{hang}-{remote}-{time.time_ns()}"
    worker = threading.Thread(target=runtime.start, args=(RunSettings("locating", 1, "sqlite", "iterrag", replay),),
                              kwargs={"run_id": run_id})
    worker.start()
    store = RunStore(home / "runs.sqlite")
    want = "observation" if hang == "model" else "action"  # the hanging call has begun after it
    while not any(e.kind == want for e in _events(store, run_id)):
        if not worker.is_alive():  # it ended before the hang: a defect, not a figure
            raise RuntimeError(f"run {run_id} ended before its {hang} hung: {store.get(run_id).events[-1:]}")
        time.sleep(0.01)
    time.sleep(0.2)  # well into the hanging call
    start = time.perf_counter()
    store.request_stop(run_id) if remote else runtime.stop(run_id)
    while store.get(run_id, events=False).status == "running":
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    worker.join(10)
    runtime.close()
    return elapsed


def _events(store: RunStore, run_id: str) -> list:
    try:
        return store.get(run_id).events
    except KeyError:  # not stored yet
        return []


class _Instant(HangingBackend):
    def query(self, text, *, timeout_s=10.0, row_cap=200):
        return QueryResult(["x"], [[1]], 1, 0.0, text)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        path = home / "replay.json"
        path.write_text(__import__("json").dumps([ACT, ACT, FINAL]))
        for hang in ("model", "query"):
            for remote in (False, True):
                times = [one(home, f"replay:{path}", hang, remote) for _ in range(n)]
                where = "the run store (as another process asks)" if remote else "this process"
                flag = "" if max(times) <= TARGET_S else f"  MISSED (target {TARGET_S} s)"
                missed |= bool(flag)
                print(f"stop while the {hang} hangs, from {where}: median {statistics.median(times):.3f} s, "
                      f"max {max(times):.3f} s over {n} runs{flag}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
