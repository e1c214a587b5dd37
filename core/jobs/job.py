"""One job mechanism for the work the app drives in the background: agent runs (core.jobs.runs) and benchmarks
(core.jobs.benchmarks) are both a ``Job`` in one registry, with one interface:

- ``start`` (the kind's module makes the job and ``launch``es it: a thread, in the session's scenarios folder),
- ``status()``, ``done``, ``error`` (what stopped it outside its own work),
- ``events(after)``: what it produced after a cursor (how many the reader has), read from where the work keeps it
  (a run's events from the run store, a benchmark's results from its result store), so a page follows a job
  driven by another process exactly as one driven by its own thread,
- ``wait(after, timeout)``: the same, waiting for the next one,
- ``stop(by)``; a run also resumes (core.jobs.runs),
- ``note(status)``: where the work goes on, for a page ("" for work this process drives),
- ``interrupt(reason)``: the process is stopping (``shutdown``, when its main thread ends: after SIGTERM or
  SIGINT): the work ends at once, kept to go on later (a run: ``interrupted``, resumed from its last checkpoint).

A job of this process is ``launch``ed: its work runs in a thread. A job may also follow work another process drives
(core.jobs.runs.RunFollower: a run of a worker or a command line), read from the store with the same interface; it
has no thread and is not registered. Jobs live as long as the process (their work stays in the stores).
"""
from __future__ import annotations

import threading
import time
from typing import ClassVar

from core import scenarios

KEEP_JOBS = 50  # ended jobs kept in memory (their work stays in the stores)
SERVER_STOPPED = "the server stopped"  # why the work of a process that stops is interrupted
GRACE_S = 8.0  # how long a stopping process waits for its jobs to record where they stand


class JobBusy(Exception):
    """A job already drives this work."""


class Job:
    """Work driven in a thread (once ``launch``ed). Subclasses give ``kind``, ``_work`` (the work itself, in the
    thread), ``events(after)`` and ``stop``; ``key`` names the work (a run id, a results folder): one job per key at
    a time."""

    kind: ClassVar[str] = "job"

    def __init__(self, key: str):
        self.key = key
        self.started = time.time()
        self.ended: float | None = None  # when the job ended
        self.error: Exception | None = None
        self._ended = threading.Event()
        self._changed = threading.Condition()

    @property
    def done(self) -> bool:
        return self._ended.is_set()

    def status(self) -> str:
        """``running``, ``failed`` (``error`` says why) or ``ended``."""
        return "running" if not self.done else "failed" if self.error else "ended"

    def _work(self) -> None:
        raise NotImplementedError

    def _drive(self) -> None:
        try:
            self._work()
        except Exception as e:  # noqa: BLE001 - shown to the analyst by the page following the job
            self.error = e
        finally:
            with self._changed:
                self.ended = time.time()
                self._ended.set()
                self._changed.notify_all()

    def changed(self) -> None:
        """Wake whoever waits for this job's next event (called by the work as it goes)."""
        with self._changed:
            self._changed.notify_all()

    def events(self, after: int = 0) -> list:
        """What the job produced after the first ``after``, in order."""
        raise NotImplementedError

    def wait(self, after: int, timeout: float) -> list:
        """``events(after)``, waiting up to ``timeout`` seconds for one when there is none yet and the job goes on."""
        deadline = time.monotonic() + timeout
        while True:
            new = self.events(after)
            left = deadline - time.monotonic()
            if new or self.done or left <= 0:
                return new
            with self._changed:
                self._changed.wait(min(left, 0.25))  # woken by ``changed``; the store is read again meanwhile

    def stop(self, by: str = "") -> str:
        raise NotImplementedError

    def note(self, status: str) -> str:
        """Where the work goes on, given its ``status`` as a page read it: "" for work this process drives."""
        return ""

    def interrupt(self, reason: str) -> None:
        """End the work at once, kept to go on later, as the process stops (default: ``stop``)."""
        self.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the job to end; whether it has."""
        return self._ended.wait(timeout)


_jobs: dict[tuple[str, str], Job] = {}
_lock = threading.Lock()
_stopping = threading.Event()  # the process stops: no job is launched any more
_hooked = False  # ``shutdown`` is registered to run as the main thread ends


class Stopping(JobBusy):
    """The process is stopping: it takes no new work."""


def shutdown(reason: str = SERVER_STOPPED, grace_s: float = GRACE_S) -> list[Job]:
    """Stop taking work and interrupt every running job (``Job.interrupt(reason)``), waiting up to ``grace_s``
    seconds for them to end; the jobs that were running."""
    _stopping.set()
    running = [j for j in all_jobs() if not j.done]
    for job in running:
        try:
            job.interrupt(reason)
        except Exception:  # noqa: BLE001 - best effort: the others are interrupted all the same
            pass
    deadline = time.monotonic() + grace_s
    for job in running:
        job.join(max(0.0, deadline - time.monotonic()))
    return running


def _hook_shutdown() -> None:
    """Run ``shutdown`` when the main thread ends (a server stopped by SIGTERM or SIGINT ends it), before the
    interpreter's thread pools refuse new work: threading's exit hooks run last-registered first, and the one of
    concurrent.futures (which LangGraph's steps run on) is registered as it is imported, before this."""
    global _hooked
    if _hooked:
        return
    import concurrent.futures.thread  # noqa: F401 - its exit hook first, so that this one runs before it

    threading._register_atexit(shutdown)  # the hook concurrent.futures itself uses (no public one runs before it)
    _hooked = True


def launch(job: Job) -> Job:
    """Register ``job`` (JobBusy when a job of its kind drives its key already; Stopping once the process stops)
    and start its thread."""
    with _lock:
        if _stopping.is_set():
            raise Stopping(f"{job.kind} {job.key} was not started: {SERVER_STOPPED}")
        _hook_shutdown()
        running = _jobs.get((job.kind, job.key))
        if running is not None and not running.done:
            raise JobBusy(f"{job.kind} {job.key} is already running")
        _jobs.pop((job.kind, job.key), None)
        ended = [k for k, j in _jobs.items() if j.done]
        for k in ended[:max(0, len(ended) - KEEP_JOBS)]:
            del _jobs[k]
        _jobs[(job.kind, job.key)] = job
        threading.Thread(target=scenarios.in_context(job._drive), name=f"{job.kind}-{job.key}", daemon=True).start()
    return job


def get(kind: str, key: str) -> Job | None:
    """The latest job of ``kind`` on ``key`` in this process, running or ended."""
    with _lock:
        return _jobs.get((kind, key))


def all_jobs(kind: str | None = None) -> list[Job]:
    """This process's jobs (of ``kind``), oldest first."""
    with _lock:
        return [j for (k, _), j in _jobs.items() if kind in (None, k)]
