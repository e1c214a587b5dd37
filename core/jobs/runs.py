"""Agent runs as jobs (core.jobs.job): a run goes on while the page that started it reruns or is left, and any
page follows its events as they arrive, read from the run store by cursor (so a run driven by another process is
followed the same way: ``follower``). The run store (under DATA_HOME) keeps every run; a job only lives as long as
the process, and a paused run is resumed by a new job. Every function that acts takes the acting identity
(``who``) and asks the gate (core.auth.gate.authorize) first; the run store records who started, reviewed,
stopped and branched. Where a run goes: a worker of the team's job queue (core.jobs.queue), the local run
process (core.jobs.local: the embedded default, out of the app server's process), or a thread of this process
(``PLANRAG_JOBS=threads``, and callers whose runtime is not an Opener).

    job = start(settings, lambda: open_runtime(dqa_root, llm_settings), who=identity)
    seen = 0
    while not (job.done and not job.events(seen)):
        seen += len(job.wait(seen, timeout=0.25))   # the events as they come
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from core.auth.gate import Action, asked_by, authorize
from core.auth.roles import Identity
from core.config import settings as config
from core.model.run_settings import Review, RunSettings
from core.model.events import AnyEvent, Event
from core.llm.client import LLMSettings
from core.store import database
from core.store.runs import DRIVEN, RunRecord, RunStore, new_run_id
from core import scenarios
from core.jobs import local, queue
from core.jobs.job import Job, JobBusy, get, launch
from core.jobs.opening import open_runtime, open_store

RunBusy = JobBusy  # the run is already being driven by a job


@dataclass(frozen=True)
class Opener:
    """How a page's runs open their runtime (``open_runtime`` with these); with the job queue a worker opens its
    own, with ``llm`` sent without the key, and its own DQA folder and database servers."""

    dqa_root: str | Path | None = None
    llm: LLMSettings | None = None
    db: config.DatabaseSettings | None = None

    def __call__(self):
        return open_runtime(self.dqa_root, self.llm, self.db)


def _llm_of(make_runtime: Callable) -> LLMSettings | None:
    return make_runtime.llm if isinstance(make_runtime, Opener) else None


class RunJob(Job):
    """One start or resume of a run, driven in a thread. ``events(after)`` are the run's stored events (a resumed
    run's earlier ones first); ``partial`` the text so far of the model's reply in flight (empty when none is
    streaming); ``error`` is what stopped the job before or outside the agent loop (no model configured, a
    database that cannot be opened, ...): the run's own failures are events."""

    kind = "run"

    def __init__(self, run_id: str, settings: RunSettings, make_runtime: Callable,
                 iterate: Callable[..., Iterator[Event]]):
        super().__init__(run_id)
        self.settings = settings
        self.runtime = None  # the AgentRuntime driving it, once opened (Stop goes through it)
        self._pieces: list[str] = []  # the reply in flight, as it came (joined when read)
        self.calling: dict | None = None  # the LLM call in flight: call, attempt, of, timeout_s (its limit), streams
        self.streams: bool | None = None  # whether the model streams its replies (None: no call made yet)
        self._make_runtime, self._iterate = make_runtime, iterate
        self._store: RunStore | None = None
        self._stop_asked = False
        self._stopped_by = ""  # who asked for the stop
        self._interrupted = ""  # why the process interrupts it (it stops), once so

    @property
    def run_id(self) -> str:
        return self.key

    def status(self) -> str:
        """The run's stored status (``running`` until it is stored)."""
        try:
            return self.store().get(self.run_id, events=False).status
        except KeyError:
            return "failed" if self.error else "running"

    def store(self) -> RunStore:
        """The run store the run is kept in (its runtime's, once opened)."""
        if self.runtime is not None:
            return self.runtime.store
        if self._store is None:
            self._store = open_store()
        return self._store

    def events(self, after: int = 0) -> list[AnyEvent]:
        return self.store().events(self.run_id, after)

    def stop(self, by: str = "") -> str:
        """Stop the run, also before it is stored (Stop right after Start): it stops as soon as it is driven.
        ``by``: who stopped it, recorded once the run is stored. Its status after the request."""
        with self._changed:
            self._stop_asked, self._stopped_by = True, by
            runtime = self.runtime
        return runtime.stop(self.run_id, starting=True, by=by) if runtime is not None else "running"

    @property
    def partial(self) -> str:
        return "".join(self._pieces)

    @property
    def opening(self) -> bool:
        """Whether its runtime is still being opened (a process's first run loads the agent's libraries then)."""
        return self.runtime is None and not self.done

    def interrupt(self, reason: str) -> None:
        """The process stops: the run ends at once, kept ``interrupted`` (``reason`` in its trace), to be resumed
        from its last checkpoint; also before its runtime is open."""
        with self._changed:
            self._interrupted, runtime = reason, self.runtime
        if runtime is not None:
            runtime.interrupt_all(reason)

    def _calling(self, attempt: dict) -> None:
        """The LLM call in flight: its number, attempt (of how many), time limits and whether it streams; its text
        starts anew."""
        self.calling, self.streams, self._pieces = attempt, attempt.get("streams", False), []
        self.changed()

    def _writing(self, piece: str) -> None:
        """The next piece of the reply in flight (a view: the finished reply comes as the run's events; the model
        client reads no more than the reply cap)."""
        self._pieces.append(piece)
        self.changed()

    def _work(self) -> None:
        runtime = None
        try:
            runtime = self._make_runtime()
            runtime.on_text = self._writing  # the model's reply as it streams, for a page to show
            runtime.on_attempt = self._calling
            with self._changed:
                self.runtime, asked, by, interrupted = runtime, self._stop_asked, self._stopped_by, self._interrupted
            if interrupted:  # the process began to stop while the runtime opened
                runtime.interrupt_all(interrupted)
            if asked:  # Stop came while the runtime opened
                runtime.stop(self.run_id, starting=True, by=by)
            events = self._iterate(runtime)
            while True:
                try:
                    for _ in events:  # each event is stored before it comes here
                        self._pieces = []
                        self.changed()
                    break
                except Exception as e:  # the team store away: not the run's end
                    if not database.is_lost(e) or not database.wait_until_back(runtime.store.db.url):
                        raise
                    # back: the run goes on from its last checkpoint (the step the outage cut is run again)
                    runtime.store.interrupt(self.run_id)
                    if self._interrupted:  # the process stops meanwhile: kept interrupted, to be resumed
                        break
                    events = runtime.iter_continue(self.run_id, ("interrupted",))
        finally:
            if runtime is not None:
                runtime.close()


def follower(run_id: str) -> RunFollower:
    """A run's events and status read from the run store, for a run no job of this process drives (another
    process's, or one that ended): the same interface a page follows a RunJob by."""
    return RunFollower(run_id)


class RunFollower(Job):
    """A run another process drives (a worker, a command line), followed as a job of kind ``run`` through the run
    store: ``events(after)`` by cursor, ``status()`` and ``done`` as stored, ``stop`` asked through the store,
    ``note`` says where it runs (a queued run: waiting for a worker, and whether one is up). Never launched: the
    work is not this process's."""

    kind = "run"
    partial = ""  # another process's reply in flight is not seen here
    calling = None
    opening = False
    streams = False
    POLL_S = 0.25  # how often ``join`` reads the store

    def __init__(self, run_id: str):
        super().__init__(run_id)
        self._store = open_store()

    @property
    def run_id(self) -> str:
        return self.key

    def events(self, after: int = 0) -> list[AnyEvent]:
        return self._store.events(self.run_id, after)

    def status(self) -> str:
        return self._store.get(self.run_id, events=False).status

    @property
    def done(self) -> bool:
        return self.status() not in DRIVEN

    def stop(self, by: str = "") -> str:
        return self._store.request_stop(self.run_id, by)

    def interrupt(self, reason: str) -> None:
        """Nothing: the process that drives the run goes on with it."""

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(self.POLL_S)
        return True

    def note(self, status: str) -> str:
        """Where the run goes on, for a page, given its ``status`` as the page read it."""
        if status == "queued":
            gap = queue.describe_worker_gap()
            return "Queued: a worker of the team's job queue will take it up." + (f" {gap}" if gap else "")
        return "This run is running in another process (a worker, a command line or another app server)."


def start(settings: RunSettings, make_runtime: Callable, *, who: Identity,
          action: Action = "start") -> RunJob | local.LocalRun | RunFollower:
    """Start a run in the background for ``who`` (recorded as who started it); ``make_runtime()`` gives the
    AgentRuntime to drive it (closed after). With the team's job queue (core.jobs.queue), the run is recorded queued
    and a worker drives it (with the Opener's LLM settings, sent without the key). ``action``: ``start`` or
    ``samples`` (one of several samples), as the gate checks it."""
    if action not in ("start", "samples"):
        raise ValueError(f"a run is started by the action start or samples, not {action!r}")
    authorize(who, action)
    run_id = new_run_id()
    store = open_store()
    asked = asked_by(who, action)
    store.record_start(run_id, who.name, asked if queue.enabled() else None)
    if queue.enabled():
        job = queue.run_job("start", run_id, _llm_of(make_runtime), asked=asked)  # checked before it is recorded
        store.create(run_id, settings.validate(), queued=True, then=lambda con: queue.defer_run(job, con))
        return follower(run_id)
    if _elsewhere(make_runtime):
        return _hand_to_local("start", run_id, settings, make_runtime)
    return launch(RunJob(run_id, settings, make_runtime, lambda runtime: runtime.iter_start(settings, run_id)))


def samples(settings: RunSettings, n: int, make_runtime: Callable, *, who: Identity) -> list[str]:
    """Start ``n`` samples of ``settings`` (each a run of its own) for ``who``; their run ids."""
    authorize(who, "samples")
    return [start(settings, make_runtime, who=who, action="samples").run_id for _ in range(n)]


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


@contextmanager
def _driven_elsewhere(runtime, events: Iterator[Event]) -> Iterator[RunStore]:
    """A run claimed or checked here (``_prepared``) for another process to drive: its events set aside unstarted,
    the runtime's run store for the block (to hand the run over), the runtime closed after it."""
    try:
        getattr(events, "close", lambda: None)()  # never started: nothing of it runs here
        yield runtime.store
    finally:
        runtime.close()


def _elsewhere(make_runtime: Callable) -> bool:
    """Whether the run goes to the local run process (core.jobs.local): in the ``process`` mode, for a page's runs
    (an Opener, which the run process can make again; other callers' runtimes stay in this process)."""
    return local.enabled() and isinstance(make_runtime, Opener)


def _hand_to_local(op: str, run_id: str, settings: RunSettings, opener: Opener, **fields) -> local.LocalRun:
    """Hand run ``run_id`` to the local run process (``op``: start, continue or branch); its job here."""
    request = {"op": op, "settings": settings.to_dict(), "opener": local.opener_fields(opener),
               "scenarios": str(scenarios.scenarios_dir()), **fields}
    return launch(local.LocalRun(run_id, settings, request))


def _passed_on(record: RunRecord, runtime, events, make_runtime: Callable) -> local.LocalRun | RunFollower:
    """A run this process claimed (a review, a resume), marked interrupted (its claimed review kept) for the local
    run process to go on with from its last checkpoint (if that process dies first, the run stays interrupted, to
    be resumed)."""
    with _driven_elsewhere(runtime, events) as store:
        handed = store.interrupt(record.id)  # not when the claim settled (paused again, ended)
    return _hand_to_local("continue", record.id, record.settings, make_runtime) if handed else follower(record.id)


def _handed_over(run_id: str, runtime, events, make_runtime: Callable, asked: dict) -> RunFollower:
    """A run this process claimed (a review, a resume: ``asked``), given to the job queue's workers to drive."""
    with _driven_elsewhere(runtime, events) as store:
        job = queue.run_job("continue", run_id, _llm_of(make_runtime), asked=asked)
        # queued with its job in one transaction, unless the claim settled (paused again, ended)
        store.hand_over(run_id, then=lambda con: queue.defer_run(job, con))
    return follower(run_id)


REVIEW_ACTIONS = ("review", "query_decision", "inbox_approve", "inbox_reject")


def resume(record: RunRecord, review: Review, make_runtime: Callable, pause_id: str | None = None, *,
           who: Identity, action: Action = "review") -> RunJob | local.LocalRun | RunFollower:
    """Resume a paused run (its stored record) with ``who``'s review of pause ``pause_id`` (recorded under
    ``who``), in the background (with the job queue: by a worker). ``action``: how the review came, as the gate
    checks it (REVIEW_ACTIONS). The pause is claimed now: RunNotPaused (core.agents.runtime) when it is no longer
    current."""
    if action not in REVIEW_ACTIONS:
        raise ValueError(f"a review is one of {', '.join(REVIEW_ACTIONS)}, not {action!r}")
    if action == "review" and (record.pause or {}).get("kind") == "query":  # the form's review of a query
        action = "query_decision"
    authorize(who, action)
    review = replace(review, reviewer=who.name)
    _not_running(record.id)
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_resume(record.id, review, pause_id))
    if queue.enabled():
        return _handed_over(record.id, runtime, events, make_runtime, asked_by(who, action))
    if _elsewhere(make_runtime):
        return _passed_on(record, runtime, events, make_runtime)
    return launch(RunJob(record.id, record.settings, lambda: runtime, lambda _: events))


def proceed(record: RunRecord, make_runtime: Callable, *, who: Identity) -> RunJob | local.LocalRun | RunFollower:
    """Resume an interrupted or stopped run from its last checkpoint for ``who``, in the background (claimed now;
    with the job queue: by a worker)."""
    authorize(who, "resume")
    _not_running(record.id)
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_continue(record.id))
    if queue.enabled():
        return _handed_over(record.id, runtime, events, make_runtime, asked_by(who, "resume"))
    if _elsewhere(make_runtime):
        return _passed_on(record, runtime, events, make_runtime)
    return launch(RunJob(record.id, record.settings, lambda: runtime, lambda _: events))


def branch(record: RunRecord, step: int, make_runtime: Callable, *, who: Identity,
           **changes) -> RunJob | local.LocalRun | RunFollower:
    """Start a branch of a run at ``step`` for ``who`` (``changes``: plan, query, note) in the background (with the
    job queue: by a worker); its job (``run_id``: the new run). ValueError now when the run has no
    such step or the change does not fit."""
    authorize(who, "branch")
    changes["reviewer"] = who.name
    new_id = new_run_id()
    runtime, events = _prepared(make_runtime, lambda rt: rt.iter_branch(record.id, step, new_id=new_id, **changes))
    runtime.store.record_start(new_id, who.name)
    if queue.enabled():
        with _driven_elsewhere(runtime, events) as store:  # checked here, driven by a worker
            job = queue.run_job("branch", new_id, _llm_of(make_runtime), asked=asked_by(who, "branch"),
                                branch={"parent": record.id, "step": step, "changes": changes})
            store.create(new_id, record.settings, parent_id=record.id, branch_step=step, queued=True,
                         then=lambda con: queue.defer_run(job, con))
        return follower(new_id)
    if _elsewhere(make_runtime):
        with _driven_elsewhere(runtime, events):  # checked here, driven by the run process
            return _hand_to_local("branch", new_id, record.settings, make_runtime, parent=record.id, step=step,
                                  changes=changes)
    return launch(RunJob(new_id, record.settings, lambda: runtime, lambda _: events))


def stop(run_id: str, *, who: Identity, action: Action = "stop") -> str:
    """Stop a run for ``who`` (recorded as who stopped it): at once when a job of this process drives it, else
    through the run store (another process's run stops within a poll; a paused or interrupted run is closed).
    ``action``: ``stop``, or the inbox's ``inbox_close``. Its status after the request."""
    if action not in ("stop", "inbox_close"):
        raise ValueError(f"a run is stopped by the action stop or inbox_close, not {action!r}")
    authorize(who, action)
    current = job(run_id)
    if current is not None and not current.done:
        return current.stop(who.name)
    return open_store().request_stop(run_id, who.name)


def go_on_with_store(store: RunStore, *, who: Identity) -> None:
    """Take the run store as it is now (emptied, replaced or set aside outside the app: its ``notice``) for
    ``who``, as the gate's ``store_switch`` lets them: the notice is not shown again."""
    authorize(who, "store_switch")
    store.acknowledge()


def job(run_id: str) -> RunJob | local.LocalRun | None:
    """The latest job of a run in this process (one the local run process drives for it included), running or
    done; None if there is none."""
    return get(RunJob.kind, run_id)


def running(run_id: str) -> bool:
    """Whether a job of this process is driving the run now (with the job queue: whether the run is queued or
    driven by a worker)."""
    current = job(run_id)
    if current is not None and not current.done:
        return True
    if not run_id or not queue.enabled():
        return False
    try:
        return open_store().get(run_id, events=False).status in DRIVEN
    except KeyError:
        return False
