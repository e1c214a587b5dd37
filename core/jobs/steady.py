"""A procrastinate worker that rides out an outage of the team store (core.jobs.queue.run_worker): while the
store cannot be reached it says so once, keeps its jobs' outcomes until it can store them, keeps beating and
listening, and says once when the store is back; a worker dropped from the store meanwhile registers again.

procrastinate's own Worker stops at the first failed heartbeat or fetch, and loses the outcome of a job that
ends while the store is away (the job then stays ``doing`` under a live worker: never swept)."""
from __future__ import annotations

import asyncio
import os
import socket
import time

from procrastinate import worker as procrastinate_worker
from psycopg.errors import RaiseException

from core.store import database

WAIT_S = 2.0  # how often a worker away from the store tries again


def _cause(error: BaseException | None, kind: type) -> BaseException | None:
    """The error of ``kind`` that ``error`` is or was caused by (procrastinate wraps the driver's: "Database
    error."); None when there is none."""
    while error is not None:
        if isinstance(error, kind):
            return error
        error = error.__cause__ or error.__context__
    return None


class Outage:
    """What a process knows of its store's reachability: it says once that the store is away and once that it is
    back; ``steady(s)``: reached without a break for ``s`` seconds (a sweep judges others' heartbeats only then)."""

    def __init__(self, name: str, say=print):
        self.name, self.say = name, say
        self.since: float | None = None
        self.back_at = time.monotonic()

    def lost(self, error: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.say(f"worker {self.name}: the team store cannot be reached ({database.lost_reason(error)}); waiting "
                     "for it (jobs in hand are retried once it is back)", flush=True)

    def reached(self) -> None:
        if self.since is not None:
            self.say(f"worker {self.name}: the team store is back after {time.monotonic() - self.since:.0f} s; "
                     "going on", flush=True)
            self.since, self.back_at = None, time.monotonic()

    def steady(self, seconds: float) -> bool:
        return self.since is None and time.monotonic() - self.back_at >= seconds


def _job_line(status, context, job_result, job_retry, error: BaseException | None) -> str:
    """A job's one log line: its id and task, the run or item it names, its outcome (the task's result, or the
    error's first line) and seconds."""
    job, kwargs = context.job, context.job.task_kwargs or {}
    subject = (f" run {kwargs['run_id']}" if kwargs.get("run_id") else f" item {kwargs['key']}" if kwargs.get("key")
               else "")
    seconds = (job_result.end_timestamp or 0) - (job_result.start_timestamp or 0) if job_result else 0.0
    said = str(error if error is not None else job_result.result if job_result else "") or ""
    said = (said.strip().splitlines() or [""])[0][:300]
    return (f"job {job.id} {job.task_name}{subject}: {status.value}{', to retry' if job_retry else ''}"
            + (f" ({said})" if said and said != "None" else "") + f" in {seconds:.1f} s")


class SteadyWorker(procrastinate_worker.Worker):
    """procrastinate's Worker, riding out a store outage (``outage`` tells and remembers it), describing itself
    in ``queue_workers`` (name, host, pid, queues, start) and saying one line per job, no traceback."""

    def __init__(self, *args, outage: Outage, **kwargs):
        super().__init__(*args, **kwargs)
        self.outage = outage
        self.since = time.time()

    async def _describe(self) -> None:
        """Its row in ``queue_workers`` (under its current worker id)."""
        await self.app.connector.execute_query_async(
            "INSERT INTO queue_workers (worker_id, name, host, pid, queues, since) VALUES (%(worker_id)s, %(name)s, "
            "%(host)s, %(pid)s, %(queues)s, %(since)s) ON CONFLICT (worker_id) DO NOTHING",
            worker_id=self.worker_id, name=self.worker_name, host=socket.gethostname(), pid=os.getpid(),
            queues=",".join(self.queues or []), since=self.since)

    async def _register_again(self) -> None:
        self.worker_id = await self.app.job_manager.register_worker()
        await self._describe()

    async def _run_loop(self):
        await self._describe()
        await super()._run_loop()

    def _log_job_outcome(self, status, context, job_result, job_retry, exc_info=False):
        error = exc_info if isinstance(exc_info, BaseException) else None
        self.outage.say(f"worker {self.worker_name}: {_job_line(status, context, job_result, job_retry, error)}",
                        flush=True)

    async def _registered(self) -> bool:
        row = await self.app.connector.execute_query_one_async(
            "SELECT count(*) AS n FROM procrastinate_workers WHERE id = %(worker_id)s", worker_id=self.worker_id)
        return bool(row["n"])

    async def _update_heartbeat(self):
        while True:
            await asyncio.sleep(self.update_heartbeat_interval)
            try:
                await self.app.job_manager.update_heartbeat(self.worker_id)
                if not await self._registered():  # dropped as gone while away: its jobs were put back
                    await self._register_again()
                self.outage.reached()
            except Exception as e:
                if not database.is_lost(e):
                    raise
                self.outage.lost(e)

    async def _fetch_and_process_jobs(self):
        import psycopg  # the driver procrastinate's connector runs on

        try:
            await super()._fetch_and_process_jobs()
            self.outage.reached()
        except Exception as e:
            if _cause(e, psycopg.errors.ForeignKeyViolation):  # dropped as gone: register again
                await self._register_again()
            elif database.is_lost(e):
                self.outage.lost(e)
                await asyncio.sleep(WAIT_S)
            else:
                raise

    async def _persist_job_status(self, **kwargs):
        while True:
            try:
                return await super()._persist_job_status(**kwargs)
            except Exception as e:
                if "invalid status" in str(_cause(e, RaiseException) or ""):
                    # the job's status moved on while the store was away (an attempt lost on the way went through,
                    # or a sweep took the job back): nothing is left to store, and a traceback would tell no one
                    print(f"worker {self.outage.name}: job {getattr(kwargs.get('job'), 'id', '?')}: its outcome was "
                          "stored already or the job was taken back", flush=True)
                    return None
                if not database.is_lost(e):
                    raise
                self.outage.lost(e)
                await asyncio.sleep(WAIT_S)

    async def _poll_jobs_to_abort(self):
        while True:
            await asyncio.sleep(self.abort_job_polling_interval)
            if not self._running_jobs:
                continue
            try:
                self._handle_abort_jobs_requested(await self.app.job_manager.list_jobs_to_abort_async())
            except Exception as e:
                if not database.is_lost(e):
                    raise
                self.outage.lost(e)

    def _start_side_tasks(self):
        listen, self.listen_notify = self.listen_notify, False
        try:
            side = super()._start_side_tasks()
        finally:
            self.listen_notify = listen
        if listen:
            side.append(asyncio.create_task(self._listen(), name="listener"))
        return side

    async def _listen(self):
        while True:
            try:
                await self.app.job_manager.listen_for_jobs(on_notification=self._handle_notification,
                                                           queues=self.queues)
            except Exception as e:
                if not database.is_lost(e):
                    raise
                self.outage.lost(e)
                await asyncio.sleep(WAIT_S)
