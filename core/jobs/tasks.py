"""The job queue's tasks (core.jobs.queue), as a worker runs them: drive a run, run a benchmark item. Each is
safe to run again (a job put back in the queue after its worker was lost): a run goes on from its last
checkpoint, an item with a result is not run twice. A job's payload is checked first (core.jobs.payload): one that
does not fit fails with the reason and touches nothing; then the gate is asked again with the identity the job
carries (core.auth.gate.authorize_job: the role the worker's configuration gives it now), and a refusal fails the
job (a run: failed, saying why; an item: not run, saying why). The model comes from the worker's own configuration
(its environment, or its endpoint of the job's name), every path from its own home."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

from core.agents.runtime import AgentRuntime, RunNotPaused, native_panic
from core.auth import endpoints
from core.auth.gate import Refused, authorize_job
from core.auth.roles import from_record
from core.benchmark.items import Item
from core.benchmark.results import ResultStore
from core.benchmark.runner import Bench, BenchConfig, bench_home
from core.config import settings as config
from core.config.secrets import scrub
from core.jobs import payload, routing
from core.jobs.code import code_version, process_name
from core.jobs.job import SERVER_STOPPED
from core.jobs.opening import open_runtime, open_store
from core.model.events import ErrorEvent, Event
from core.model.run_settings import Limits, RunSettings
from core.scenarios.dqa.source import DQA_SET
from core.store import database
from core.store.runs import HEARTBEAT_S, STALE_S, PauseTaken


class StoreLost(Exception):
    """The team store went away while a job ran (the infrastructure's failure, not the work's): the job is tried
    again once the store is back (core.jobs.queue.RETRIES)."""


class NotHere(Exception):
    """A benchmark item of a question set this worker lacks (a job in another set's queue): handed back to
    ``queue``, the queue of its set (core.jobs.queue), neither failed nor kept as not run."""

    def __init__(self, queue: str, message: str):
        super().__init__(message)
        self.queue = queue


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
    if code != code_version():
        raise OtherCode(f"this worker runs other code ({code_version()}) than the app that queued the job ({code}): "
                        "update the worker's checkout (or the app's) so they match, then resume")


def _still_allowed(asked: payload.Asked) -> None:
    """Refused (core.auth.gate) when the job's identity may no longer take the action it asked for."""
    authorize_job(from_record(asked.who.model_dump()), asked.action, asked.at)


def _llm_settings(model: payload.Model | None, unattended: bool = False) -> config.LLMSettings:
    """This worker's LLM settings for a job's ``model``: its own server and key (its environment), or its own
    endpoint of that name (UnknownEndpoint when it has none), with the job's model name, sampling and limits."""
    asked = {k: v for k, v in (model.model_dump() if model else {}).items() if v is not None}
    base = (config.LLMSettings.unattended if unattended else config.LLMSettings)(
        **{k: v for k, v in asked.items() if k != "endpoint"})
    return endpoints.get(asked["endpoint"]).llm_settings(base) if asked.get("endpoint") else base


def _runtime(model: payload.Model | None) -> AgentRuntime:
    """This worker's runtime for runs asked with ``model`` (its own key, DQA folder and home)."""
    key = json.dumps(model.model_dump() if model else None, sort_keys=True)
    with _lock:
        found = _runtimes.get(key)
        if found is None:
            found = _runtimes[key] = open_runtime(llm=_llm_settings(model))
    return found


def interrupt_runs(reason: str = SERVER_STOPPED) -> list[str]:
    """The worker stops: every run it drives ends at once, kept ``interrupted`` (``reason`` in its trace), to be
    resumed from its last checkpoint; and it starts no other. The ids of the runs it drove."""
    with _lock:
        runtimes = list(_runtimes.values())
    return [run_id for runtime in runtimes for run_id in runtime.interrupt_all(reason)]


def _record_settings(record) -> RunSettings:
    """A stored run's settings as this worker takes them: known fields, checked, a replay only of its own files."""
    try:
        settings = record.settings.validate()
    except TypeError as e:
        raise ValueError(f"the run's stored settings do not fit: {e}") from None
    payload.replay_here(settings.llm or "")
    return settings


def _begin(runtime: AgentRuntime, action: str, run_id: str, branch: payload.Branch | None) -> Iterator[Event] | None:
    """The run's events from where it is; None when there is nothing to drive (stopped while queued, ended, or
    driven by another worker). A run whose old owner may still be alive on another machine is waited for until
    its heartbeat is stale."""
    store = runtime.store
    deadline = time.monotonic() + STALE_S + 2 * HEARTBEAT_S
    while (record := store.get(run_id, events=False)).status == "running" and time.monotonic() < deadline:
        time.sleep(HEARTBEAT_S)
    if record.status not in ("queued", "interrupted"):
        return None
    settings = _record_settings(record)
    try:
        if action in ("start", "branch") and not runtime.checkpointed(run_id):
            store.claim_run(run_id, ("queued", "interrupted"))
            if action == "start":
                return runtime.iter_start(settings, run_id)
            return runtime.iter_branch(branch.parent, branch.step, new_id=run_id,
                                       **branch.changes.model_dump(exclude_none=True))
        return runtime.iter_continue(run_id, ("queued", "interrupted"))
    except (PauseTaken, RunNotPaused):  # another worker took it first
        return None


def drive_run(**job) -> str:
    """Drive the run a ``drive_run`` job names (core.jobs.payload.RunPayload) until it pauses or ends: start it,
    continue it from its checkpoint, or start it as a branch; returns its status. A payload that does not fit fails
    the job (PayloadError), touching nothing; a failure outside the agent's own loop ends the run as failed with
    the reason, and fails the job."""
    # the run was recorded queued by the app, a review or resume claimed by it; a failure outside the agent's loop:
    # no data here, a broken model configuration, other code, a native library's panic
    checked = payload.run_payload(job)
    runtime = None
    try:
        _same_code(checked.code)
        _still_allowed(checked.asked)
        runtime = _runtime(checked.llm)
        runtime.store.hand_over(checked.run_id)  # held by this process when the store went away: a retried job's
        events = _begin(runtime, checked.action, checked.run_id, checked.branch)
        if events is None:
            return "not driven: " + runtime.store.get(checked.run_id, events=False).status
        for _ in events:  # each event is stored as it comes
            pass
        return runtime.store.get(checked.run_id, events=False).status
    except BaseException as e:
        if not isinstance(e, Exception) and not native_panic(e):
            raise  # KeyboardInterrupt, SystemExit, a cancelled task: the worker's own, not the run's
        if isinstance(e, Exception) and database.is_lost(e):  # not the run's end: it goes on from its checkpoint
            run_id = checked.run_id
            if runtime is not None:
                try:  # queued again, for whichever worker takes the retried job (this one hands it over at start)
                    runtime.store.hand_over(run_id)
                except Exception:  # noqa: BLE001, S110 - the store still away: the next try of this job does it
                    pass
            raise StoreLost(scrub(f"the team store was lost while run {run_id} ran: {e}")) from e
        message = scrub(f"worker {process_name()} could not drive the run: {type(e).__name__}: {e}"
                        if not isinstance(e, Exception) else f"worker {process_name()} could not drive the run: {e}")
        store = runtime.store if runtime is not None else open_store()
        store.fail_undriven(checked.run_id, ErrorEvent(message=message, error_kind="worker"))
        if not isinstance(e, Exception):
            raise RuntimeError(message) from e
        raise


_benches: dict[str, Bench] = {}


def _config_from(spec: payload.BenchSpec) -> BenchConfig:
    """The BenchConfig a worker runs a job's items with (its own home, DQA folder, model server and key)."""
    values = spec.model_dump(exclude={"limits", "llm_settings", "question_set"})
    return BenchConfig(**values, limits=Limits.from_dict(spec.limits),
                       llm_settings=_llm_settings(spec.llm_settings, unattended=True))


def _bench(spec: payload.BenchSpec) -> Bench:
    """This worker's Bench for a job's benchmark (made once per process and benchmark)."""
    key = spec.model_dump_json()
    with _lock:
        found = _benches.get(key)
        if found is None:
            found = _benches[key] = Bench(_config_from(spec))
    return found


def _not_run_here(spec: payload.BenchSpec, key: str, error: Exception) -> None:
    """Keep item ``key`` as not run on this worker, with why (its benchmark could not be opened here)."""
    store = ResultStore(bench_home() / spec.name)
    try:
        store.put_not_run(Item.from_key(key), "worker", scrub(f"worker {process_name()}: {error}"))
    finally:
        store.close()


def _run_item(values: payload.BenchSpec, key: str, check: Callable[[], None]) -> str:
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


def bench_item(**job) -> str:
    """Run the benchmark item a ``bench_item`` job names (core.jobs.payload.BenchPayload), unless it has a result;
    returns what came of it. A payload that does not fit fails the job (PayloadError), an item of a question set
    this worker lacks raises NotHere, both touching nothing; a failure is kept as the item's not-run record (a
    refusal of the gate also fails the job)."""
    checked = payload.bench_payload(job)
    if checked.config.source == "dqa":
        wanted = checked.config.question_set or DQA_SET
        here, why = routing.set_here()
        if here != wanted:
            raise NotHere(routing.set_queue(wanted), f"this worker has {f'the question set {here}' if here else why}, "
                                                     f"not {wanted}")
    try:
        _still_allowed(checked.config.asked)
    except Refused as e:  # kept as the item's not-run record (the benchmark says why), and the job fails with it
        _not_run_here(checked.config, checked.key, e)
        raise
    return _run_item(checked.config, checked.key, check=lambda: _same_code(checked.code))
