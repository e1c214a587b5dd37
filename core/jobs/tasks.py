"""The job queue's tasks (core.jobs.queue), as a worker runs them: drive a run, run a benchmark item. Each is
safe to run again (a job put back in the queue after its worker was lost): a run goes on from its last
checkpoint, an item with a result is not run twice."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import fields

from core.agents.runtime import AgentRuntime, RunNotPaused
from core.benchmark.items import Item
from core.benchmark.results import ResultStore
from core.benchmark.runner import Bench, BenchConfig, bench_home
from core.config import settings as config
from core.config.secrets import scrub
from core.jobs.code import code_version, process_name
from core.jobs.opening import open_runtime, open_store
from core.model.events import ErrorEvent, Event
from core.model.run_settings import Limits, RunSettings
from core.store import database
from core.store.runs import HEARTBEAT_S, STALE_S, PauseTaken


class StoreLost(Exception):
    """The team store went away while a job ran (the infrastructure's failure, not the work's): the job is tried
    again once the store is back (core.jobs.queue.RETRIES)."""


class OtherCode(Exception):
    """A job queued by other code than this worker's."""


_runtimes: dict[str, AgentRuntime] = {}
_lock = threading.Lock()


def warm_up() -> None:
    """Load what the first job would otherwise wait for (the model client, the question catalog): a worker does it
    before it says it is ready."""
    import langchain_openai  # noqa: F401 heavy: the model client, about 1 s to import
    from core.scenarios import catalog  # noqa: F401 heavy: numpy and pandas


def _same_code(code: str) -> None:
    if code and code != code_version():
        raise OtherCode(f"this worker runs other code ({code_version()}) than the app that queued the job ({code}): "
                        "update the worker's checkout (or the app's) so they match, then resume")


def _runtime(llm: dict | None) -> AgentRuntime:
    """This worker's runtime for runs asked with the LLM settings ``llm`` (its own key, DQA folder and home)."""
    key = json.dumps(llm, sort_keys=True)
    with _lock:
        found = _runtimes.get(key)
        if found is None:
            found = _runtimes[key] = open_runtime(llm=config.LLMSettings(**(llm or {})))
    return found


def _begin(runtime: AgentRuntime, action: str, run_id: str, branch: dict | None) -> Iterator[Event] | None:
    """The run's events from where it is; None when there is nothing to drive (stopped while queued, ended, or
    driven by another worker). A run whose old owner may still be alive on another machine is waited for until
    its heartbeat is stale."""
    store = runtime.store
    deadline = time.monotonic() + STALE_S + 2 * HEARTBEAT_S
    while (record := store.get(run_id, events=False)).status == "running" and time.monotonic() < deadline:
        time.sleep(HEARTBEAT_S)
    if record.status not in ("queued", "interrupted"):
        return None
    try:
        if action in ("start", "branch") and not runtime.checkpointed(run_id):
            store.claim_run(run_id, ("queued", "interrupted"))
            if action == "start":
                return runtime.iter_start(RunSettings.from_dict(record.settings), run_id)
            return runtime.iter_branch(branch["parent"], branch["step"], new_id=run_id, **branch["changes"])
        return runtime.iter_continue(run_id, ("queued", "interrupted"))
    except (PauseTaken, RunNotPaused):  # another worker took it first
        return None


def drive_run(action: str, run_id: str, llm: dict | None = None, branch: dict | None = None,
              code: str = "") -> str:
    """Drive run ``run_id`` (recorded ``queued`` by the app) until it pauses or ends: ``start`` it, ``continue``
    it from its checkpoint (a review or a resume claimed by the app), or start it as a ``branch`` (parent, step,
    changes). A failure outside the agent's own loop (no data here, a broken model configuration, other code)
    ends the run as failed with the reason, and fails the job. Returns the run's status."""
    runtime = None
    try:
        _same_code(code)
        runtime = _runtime(llm)
        runtime.store.hand_over(run_id)  # held by this process when the store went away: a retried job's
        events = _begin(runtime, action, run_id, branch)
        if events is None:
            return "not driven: " + runtime.store.get(run_id, events=False).status
        for _ in events:  # each event is stored as it comes
            pass
        return runtime.store.get(run_id, events=False).status
    except Exception as e:
        if database.is_lost(e):  # the run is not ended by it: it goes on from its checkpoint when the job is retried
            if runtime is not None:
                try:  # queued again, for whichever worker takes the retried job (this one hands it over at start)
                    runtime.store.hand_over(run_id)
                except Exception:  # noqa: BLE001, S110 - the store still away: the next try of this job does it
                    pass
            raise StoreLost(scrub(f"the team store was lost while run {run_id} ran: {e}")) from e
        message = scrub(f"worker {process_name()} could not drive the run: {e}")
        store = runtime.store if runtime is not None else open_store()
        store.fail_undriven(run_id, ErrorEvent(message=message, error_kind="worker"))
        raise


_benches: dict[str, Bench] = {}


def _config_from(values: dict) -> BenchConfig:
    """The BenchConfig a worker runs a job's items with (its own home, DQA folder and key)."""
    known = {f.name for f in fields(BenchConfig)}
    kept = {k: v for k, v in values.items() if k in known}
    return BenchConfig(**{**kept, "limits": Limits.from_dict(values["limits"]),
                          "llm_settings": config.LLMSettings.unattended(**values["llm_settings"])})


def _bench(values: dict) -> Bench:
    """This worker's Bench for a job's benchmark (made once per process and benchmark)."""
    key = json.dumps(values, sort_keys=True, default=str)
    with _lock:
        found = _benches.get(key)
        if found is None:
            found = _benches[key] = Bench(_config_from(values))
    return found


def _not_run_here(values: dict, key: str, error: Exception) -> None:
    """Keep item ``key`` as not run on this worker, with why (its benchmark could not be opened here)."""
    store = ResultStore(bench_home() / values["name"])
    try:
        store.put_not_run(Item.from_key(key), "worker", scrub(f"worker {process_name()}: {error}"))
    finally:
        store.close()


def _run_item(values: dict, key: str, check: Callable[[], None]) -> str:
    """Run item ``key`` of the benchmark ``values`` describe (spending from its budget, ``budget_id``), unless it
    has a result: ``done``, ``not run: ...`` (kept as the item's not-run record) or ``had a result``. The team
    store lost on the way raises StoreLost (the job is tried once more)."""
    try:
        bench = _bench(values)
    except Exception as e:  # noqa: BLE001 - no data here, a broken model configuration: kept, the rest goes on
        if database.is_lost(e):
            raise StoreLost(f"the team store was lost while item {key} was opened: {e}") from e
        _not_run_here(values, key, e)
        return f"not run: {e}"
    item = next((i for i in bench.work.items if i.key == key), None)
    if item is None:
        _not_run_here(values, key, ValueError("this worker's question set has no such item"))
        return "not run: no such item here"
    try:
        if key in bench.store.done():
            return "had a result"
        try:
            check()
        except Exception as e:  # noqa: BLE001 - kept as the item's not-run record, the rest goes on
            bench.store.put_not_run(item, "worker", scrub(str(e)))
            return f"not run: {e}"
        result, error = bench.run_one(item)
    except Exception as e:
        if database.is_lost(e):
            raise StoreLost(f"the team store was lost while item {item.name} ran: {e}") from e
        raise
    return "done" if result is not None else f"not run: {error}"


def bench_item(config: dict, key: str, code: str = "") -> str:
    """Run the benchmark item ``key`` of the benchmark ``config`` describes, unless it has a result; what came of
    it. A failure is kept as the item's not-run record, with the reason."""
    return _run_item(config, key, check=lambda: _same_code(code))
