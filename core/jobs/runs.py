"""Agent runs driven in background threads, so that a run goes on while the page that started it reruns or is
left, and any page can follow its events as they arrive. The run store (under DATA_HOME) keeps every run; a
job only lives as long as the process, and a paused run is resumed by a new job.

    job = start(settings, lambda: open_runtime(dqa_root, llm_settings))
    seen = 0
    while not (job.done and seen == len(job.events)):
        new = job.wait(seen, timeout=0.25)   # the events as they come
        seen += len(new)
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from core.config import home
from core import scenarios
from core.config import settings as config
from core.model.run_settings import Review, RunSettings
from core.model.events import Event
from core.agents.workspace import open_catalog_workspace
from core.llm.client import LLMSettings
from core.store.runs import RunRecord, RunStore

KEEP_JOBS = 50  # finished jobs kept in memory (their runs stay in the store)


def open_store() -> RunStore:
    """The run store under DATA_HOME (the app's fallback home when DATA_HOME cannot be used: core.config.home)."""
    home.use_fallback()
    return RunStore(config.DATA_HOME / "runs.sqlite")


def open_runtime(dqa_root: str | Path | None = None, llm: LLMSettings | None = None,
                 db: config.DatabaseSettings | None = None):
    """An AgentRuntime under DATA_HOME reading DQA questions from ``dqa_root``, opening models with ``llm`` (server,
    key) and database servers with ``db`` (defaults: the environment)."""
    from core.agents.runtime import AgentRuntime  # heavy: loads langgraph

    home.use_fallback()
    return AgentRuntime(config.DATA_HOME, workspace=partial(open_catalog_workspace, root=dqa_root, db_settings=db),
                        llm_settings=llm)


class RunBusy(Exception):
    """The run is already being driven by a job."""


class RunJob:
    """One start or resume of a run, driven in a thread. ``events`` is the run's whole trace so far, typed (a
    resumed run's stored events first); ``error`` is what stopped the job before or outside the agent loop (no
    model configured, a broken replay, a database that cannot be opened, ...): the run's own failures are events."""

    def __init__(self, run_id: str, settings: RunSettings, events: list[Event]):
        self.run_id = run_id
        self.settings = settings
        self.started = time.time()
        self.events = list(events)
        self.error: Exception | None = None
        self.done = False
        self.runtime = None  # the AgentRuntime driving it, once opened (Stop goes through it)
        self._stop_asked = False
        self._stopped_by = ""  # who asked for the stop
        self._changed = threading.Condition()

    def stop(self, by: str = "") -> str:
        """Stop the run, also before it is stored (Stop right after Start): it stops as soon as it is driven.
        ``by``: who stopped it, recorded once the run is stored. Its status after the request."""
        with self._changed:
            self._stop_asked, self._stopped_by = True, by
            runtime = self.runtime
        return runtime.stop(self.run_id, starting=True, by=by) if runtime is not None else "running"

    def _drive(self, make_runtime: Callable, iterate: Callable[..., Iterator[Event]]) -> None:
        runtime = None
        try:
            runtime = make_runtime()
            with self._changed:
                self.runtime, asked, by = runtime, self._stop_asked, self._stopped_by
            if asked:  # Stop came while the runtime opened
                runtime.stop(self.run_id, starting=True, by=by)
            for event in iterate(runtime):
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        except Exception as e:  # shown to the analyst by the page following the job
            self.error = e
        finally:
            if runtime is not None:
                runtime.close()
            with self._changed:
                self.done = True
                self._changed.notify_all()

    def wait(self, seen: int, timeout: float) -> list[Event]:
        """The events after the first ``seen``, waiting up to ``timeout`` seconds for one if there is none yet."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.events) > seen or self.done, timeout)
            return self.events[seen:]


_jobs: dict[str, RunJob] = {}
_lock = threading.Lock()


def _launch(job: RunJob, make_runtime: Callable, iterate: Callable[..., Iterator[Event]]) -> RunJob:
    with _lock:
        running = _jobs.get(job.run_id)
        if running and not running.done:
            raise RunBusy(f"run {job.run_id} is already running")
        _jobs.pop(job.run_id, None)
        finished = [run_id for run_id, j in _jobs.items() if j.done]
        for run_id in finished[:max(0, len(finished) - KEEP_JOBS)]:
            del _jobs[run_id]
        _jobs[job.run_id] = job
    threading.Thread(target=scenarios.in_context(job._drive), args=(make_runtime, iterate), name=f"run-{job.run_id}",
                     daemon=True).start()
    return job


def start(settings: RunSettings, make_runtime: Callable) -> RunJob:
    """Start a run in the background; ``make_runtime()`` gives the AgentRuntime to drive it (closed after)."""
    from core.agents.runtime import new_run_id  # heavy: loads langgraph

    job = RunJob(new_run_id(), settings, [])
    return _launch(job, make_runtime, lambda runtime: runtime.iter_start(settings, job.run_id))


def _not_running(run_id: str) -> None:
    """RunBusy when a job of this process drives the run now."""
    if running(run_id):
        raise RunBusy(f"run {run_id} is already running")


def _prepared(make_runtime: Callable, begin: Callable) -> tuple[object, Iterator[Event]]:
    """A runtime and the events ``begin(runtime)`` gives, its checks and claims made now (their errors raised
    here, for the page to show), the run itself driven later in the job's thread."""
    runtime = make_runtime()
    try:
        return runtime, begin(runtime)
    except BaseException:
        runtime.close()
        raise


def resume(record: RunRecord, review: Review, make_runtime: Callable, pause_id: str | None = None) -> RunJob:
    """Resume a paused run (its stored record) with the analyst's review of pause ``pause_id``, in the background.
    The pause is claimed now: RunNotPaused (core.agents.runtime) when it is no longer current."""
    _not_running(record.id)
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_resume(record.id, review, pause_id))
    job = RunJob(record.id, RunSettings.from_dict(record.settings), record.events)
    return _launch(job, lambda: runtime, lambda _: events)


def proceed(record: RunRecord, make_runtime: Callable) -> RunJob:
    """Resume an interrupted or stopped run from its last checkpoint, in the background (claimed now)."""
    _not_running(record.id)
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_continue(record.id))
    job = RunJob(record.id, RunSettings.from_dict(record.settings), record.events)
    return _launch(job, lambda: runtime, lambda _: events)


def branch(record: RunRecord, step: int, make_runtime: Callable, **changes) -> RunJob:
    """Start a branch of a run at ``step`` (``changes``: plan, query, note, reviewer) in the background; its job
    (``run_id``: the new run). ValueError now when the run has no such step or the change does not fit."""
    from core.agents.runtime import new_run_id  # heavy: loads langgraph

    new_id = new_run_id()
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_branch(record.id, step, new_id=new_id, **changes))
    job = RunJob(new_id, RunSettings.from_dict(record.settings), [])
    return _launch(job, lambda: runtime, lambda _: events)


def stop(run_id: str, by: str = "") -> str:
    """Stop a run: at once when a job of this process drives it, else through the run store (another process's
    run stops within a poll; a paused or interrupted run is closed); ``by``: who stopped it, as recorded. Its
    status after the request."""
    current = job(run_id)
    if current is not None and not current.done:
        return current.stop(by)
    return open_store().request_stop(run_id, by)


def job(run_id: str) -> RunJob | None:
    """The latest job of a run in this process, running or done; None if there is none."""
    with _lock:
        return _jobs.get(run_id)


def running(run_id: str) -> bool:
    """Whether a job of this process is driving the run now."""
    current = job(run_id)
    return current is not None and not current.done
