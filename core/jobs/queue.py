"""The team's job queue (docs/deploy.md): agent runs and benchmark items as jobs of procrastinate on
the team store's PostgreSQL, taken by ``python -m core worker`` processes on any machine that reaches it.

The app (or ``core bench``) only enqueues and follows: a job names its run or item with a checked, versioned
payload (core.jobs.payload), never a key, a URL or a file of the machine that queued it; the worker checks it
again, drives it with its own model key (its environment or the server's endpoints by name), its own DQA folder
and home, and writes everything to the team store, where every page follows it by cursor.

- A run is recorded ``queued`` and its job queued in one transaction (``defer_run``'s connection; core.store.runs),
  so an app that dies on the way leaves neither; a worker claims it atomically (one conditional UPDATE), so no run
  is driven twice at once; a paused run has no job and holds no worker.
- Workers beat every HEARTBEAT_S seconds (procrastinate's ``procrastinate_workers``); a job whose worker has been
  silent for LEASE_S seconds goes back to the queue (``sweep``, run by every worker every SWEEP_S seconds and by
  ``python -m core worker --sweep``), and the next worker goes on from the run's last checkpoint once the run
  store sees its old owner gone (same machine: at once; another machine: its run heartbeat stale, STALE_S).
- A job queued by other code than the worker's (``code_version``) fails with a message saying so.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

from core.config import settings as config
from core.benchmark.items import Item
from core.config.secrets import scrub
from core.jobs import routing
from core.jobs.code import code_version
from core.model.events import ErrorEvent
from core.store import database

#: the queues (core.jobs.routing: an item of a DQA-format question set waits in its set's queue, BENCH_DQA for DQA's)
RUNS, BENCH, BENCH_DQA = routing.RUNS, routing.BENCH, routing.BENCH_DQA
HAND_BACK_S = 10  # an item handed back by a worker without its question set waits this long in its set's queue
HEARTBEAT_S = 2.0  # how often a worker beats
LEASE_S = 10.0  # a worker silent this long is gone; its jobs go back to the queue
SWEEP_S = 2.5  # how often a worker looks for jobs of workers gone
PRUNE_EVERY_S = 3600.0  # how often a worker prunes the jobs finished past the retention (retention_days)
RETENTION_ENV = "PLANRAG_QUEUE_RETENTION_DAYS"
RETRIES = 10  # how many times a job the store's loss interrupted is tried again
READ_TIMEOUT_S = 3.0  # how long a page waits for a connection to read the queue (a store away: said at once)

_apps: dict[tuple[str, int], object] = {}
_apps_lock = threading.Lock()


class QueueError(Exception):
    """The queue cannot be used: no team store is configured."""


def enabled() -> bool:
    """Whether runs and benchmark items go to the queue (``PLANRAG_JOBS``, core.config.settings.jobs_mode)."""
    return config.jobs_mode() == "queue"


def _url() -> str:
    url = config.database_url()
    if not url:
        raise QueueError(f"the job queue lives in the team store: set {config.DATABASE_URL_ENV}")
    return url


def new_app(url: str | None = None):
    """A procrastinate App on the team store with this project's tasks (not opened; its pools check each
    connection as they hand it out: after a server restart they reconnect)."""
    import procrastinate  # optional: the team deployment's queue

    from core.jobs import tasks  # heavy: the tasks load the agent runtime (langgraph), needed by workers

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=url or _url(), kwargs=database.connect_kwargs(), min_size=1, max_size=4,
        **database.pool_options()))
    # a job the store's loss interrupted (infrastructure, not the work) is tried again once the store is back
    again = procrastinate.RetryStrategy(max_attempts=RETRIES, wait=int(HEARTBEAT_S), retry_exceptions={tasks.StoreLost})
    app.task(name="drive_run", queue=RUNS, retry=again)(tasks.drive_run)

    def bench_item(context, **job) -> str:
        """tasks.bench_item; an item whose question set this worker lacks (a job in another set's queue) is handed
        back, not failed: queued again in its set's queue (HAND_BACK_S later, so no worker takes it in a loop)."""
        try:
            return tasks.bench_item(**job)
        except tasks.NotHere as e:
            lock = f"bench:{job['config']['name']}:{job['key']}"
            context.app.configure_task("bench_item", lock=lock, queueing_lock=lock, queue=e.queue,
                                       schedule_in={"seconds": HAND_BACK_S}).defer(**job)
            return f"handed back to the queue {e.queue}: {e}"

    app.task(name="bench_item", queue=BENCH, retry=again, pass_context=True)(bench_item)
    return app


def app():
    """This process's App on the team store, opened for deferring and reading (one per URL and process)."""
    url = _url()
    key = (url, os.getpid())
    with _apps_lock:
        found = _apps.get(key)
        if found is None:
            found = _apps[key] = new_app(url).open()
    return found


def close() -> None:
    """Close this process's Apps (tests, and a URL that changed)."""
    with _apps_lock:
        for key in [k for k in _apps if k[1] == os.getpid()]:
            _apps.pop(key).close()


def llm_fields(llm) -> dict:
    """What a job carries of an LLMSettings: its endpoint's name or model, sampling and limits; never a key or a
    URL (core.jobs.payload.Model)."""
    from core.jobs import payload  # heavy: pydantic and the payload's models (0.1 s), for a page that only follows

    return payload.model_of(llm)


def run_job(action: str, run_id: str, llm=None, branch: dict | None = None, *, asked: dict) -> dict:
    """The payload of a job driving run ``run_id`` (core.jobs.payload.RunPayload) that ``asked`` says who asked
    for (core.auth.gate.asked_by), checked: PayloadError (a ValueError) saying what does not fit, before anything
    is stored or queued."""
    from core.jobs import payload  # heavy: as above

    values = {"v": payload.VERSION, "action": action, "run_id": run_id,
              "llm": llm_fields(llm) if llm is not None else None, "branch": branch, "asked": asked,
              "code": code_version()}
    payload.run_payload(values)
    return values


def defer_run(job: dict, connection) -> int:
    """Queue a job made by ``run_job`` in the transaction of ``connection`` (a psycopg connection of the team store,
    committed by its owner with the run's record: both are stored or neither); its job id."""
    return app().configure_task("drive_run", lock=f"run:{job['run_id']}", connection=connection).defer(**job)


def enqueue_items(config_dict: dict, keys: list[str], benchmark: str) -> dict[str, int]:
    """Queue benchmark items (by key) of the benchmark named ``benchmark`` described by ``config_dict``; an item
    already waiting in the queue is not queued twice (procrastinate's queueing lock), so two commands on one
    benchmark share its items. Item key -> job id (of this call's jobs)."""
    from procrastinate.exceptions import AlreadyEnqueued  # optional: as above
    from core.jobs import payload  # heavy: as above

    queued, code = {}, code_version()
    for key in keys:
        payload.bench_payload({"v": payload.VERSION, "config": config_dict, "key": key, "code": code})
        lock = f"bench:{benchmark}:{key}"
        try:
            queued[key] = app().configure_task("bench_item", lock=lock, queueing_lock=lock,
                                               queue=routing.item_queue(Item.from_key(key).source,
                                                                        config_dict.get("question_set"))).defer(
                v=payload.VERSION, config=config_dict, key=key, code=code)
        except AlreadyEnqueued:
            pass
    return queued


def _sql(query: str, params: tuple = ()) -> list[tuple]:
    with database.pool(_url()).connection(timeout=READ_TIMEOUT_S) as con:
        return con.execute(query, params).fetchall()


def workers(within: float = LEASE_S) -> int:
    """How many workers have beaten within ``within`` seconds."""
    return _sql("SELECT count(*) FROM procrastinate_workers WHERE last_heartbeat > now() - make_interval(secs => %s)",
                (within,))[0][0]


def job_states(ids: list[int]) -> dict[int, str]:
    """The status of each job (todo, doing, succeeded, failed, cancelled, aborted)."""
    if not ids:
        return {}
    return dict(_sql("SELECT id, status::text FROM procrastinate_jobs WHERE id = ANY(%s)", (list(ids),)))


def bench_in_queue() -> dict[str, dict[str, int]]:
    """The benchmarks with items in the queue, by name (as their jobs carry it): ``waiting`` and ``in_flight``."""
    found: dict[str, dict[str, int]] = {}
    for name, state, n in _sql("SELECT args->'config'->>'name', status::text, count(*) FROM procrastinate_jobs "
                               "WHERE task_name = 'bench_item' AND status IN ('todo', 'doing') GROUP BY 1, 2"):
        found.setdefault(name, {"waiting": 0, "in_flight": 0})["waiting" if state == "todo" else "in_flight"] += n
    return found


def counts() -> dict[str, dict[str, int]]:
    """Jobs per queue and status."""
    found: dict[str, dict[str, int]] = {}
    for queue, status, n in _sql("SELECT queue_name, status::text, count(*) FROM procrastinate_jobs "
                                 "GROUP BY queue_name, status"):
        found.setdefault(queue, {})[status] = n
    return found


def status(failed: int = 10) -> dict:
    """The queue as an administrator sees it: ``workers`` (each: name, host, pid, queues, since, running,
    heartbeat_s: seconds since its last beat; None but the last two while it starts), ``counts`` (jobs per queue
    and status), ``failed`` (the last ``failed`` failed jobs: id, queue, task, subject, at), ``waiting`` (jobs to
    do) and ``oldest_waiting_s``."""
    rows = _sql("SELECT w.id, d.name, d.host, d.pid, d.queues, d.since, "
                "extract(epoch FROM now() - w.last_heartbeat), "
                "(SELECT count(*) FROM procrastinate_jobs j WHERE j.worker_id = w.id AND j.status = 'doing') "
                "FROM procrastinate_workers w LEFT JOIN queue_workers d ON d.worker_id = w.id ORDER BY d.name, w.id")
    workers_ = [{"id": i, "name": name, "host": host, "pid": pid, "queues": queues, "since": since,
                 "heartbeat_s": float(beat), "running": running}
                for i, name, host, pid, queues, since, beat, running in rows]
    failed_rows = _sql("SELECT j.id, j.queue_name, j.task_name, j.args, "
                       "(SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = j.id) AS at "
                       "FROM procrastinate_jobs j WHERE j.status = 'failed' ORDER BY at DESC NULLS LAST LIMIT %s",
                       (failed,))
    waiting, oldest = _sql("SELECT count(*), extract(epoch FROM now() - min(e.at)) FROM procrastinate_jobs j "
                           "LEFT JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred' "
                           "WHERE j.status = 'todo'")[0]
    return {"workers": workers_, "counts": counts(),
            "failed": [{"id": i, "queue": q, "task": t, "subject": _subject(args), "at": at}
                       for i, q, t, args, at in failed_rows],
            "waiting": waiting, "oldest_waiting_s": None if oldest is None else float(oldest)}


def _subject(args: dict | None) -> str:
    """The run or item a job names."""
    args = args or {}
    return f"run {args['run_id']}" if args.get("run_id") else f"item {args['key']}" if args.get("key") else ""


def retention_days() -> float:
    """How long the queue keeps finished jobs and their events (``PLANRAG_QUEUE_RETENTION_DAYS``, default 30)."""
    value = os.environ.get(RETENTION_ENV, "30")
    try:
        days = float(value)
    except ValueError:
        raise QueueError(f"{RETENTION_ENV}={value!r} is not a number of days") from None
    if days <= 0:
        raise QueueError(f"{RETENTION_ENV} must be more than 0 days")
    return days


async def _prune(app_, days: float) -> int:
    """Delete the jobs (with their events) finished more than ``days`` days ago; how many."""
    before = (await app_.connector.execute_query_one_async("SELECT count(*) AS n FROM procrastinate_jobs"))["n"]
    await app_.job_manager.delete_old_jobs(nb_hours=max(1, round(days * 24)), include_failed=True,
                                           include_cancelled=True, include_aborted=True)
    after = (await app_.connector.execute_query_one_async("SELECT count(*) AS n FROM procrastinate_jobs"))["n"]
    return before - after


def prune(days: float | None = None) -> int:
    """``_prune`` from synchronous code (``python -m core db prune``); ``days`` default retention_days()."""
    days = retention_days() if days is None else days

    async def once():
        async with new_app().open_async() as opened:
            return await _prune(opened, days)
    return asyncio.run(once())


def cancel(ids: list[int]) -> int:
    """Cancel the jobs among ``ids`` still waiting in the queue; how many."""
    return sum(bool(app().job_manager.cancel_job_by_id(i)) for i in ids)


#: Runs recorded ``queued`` LEASE_S seconds ago or more that no job waits for or drives (the app that recorded
#: one died before it queued its job): whether each has a checkpoint, and whether it is a branch.
_ORPHANS = """SELECT r.id, r.settings, r.branch_step IS NOT NULL AS branch,
    EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = r.id) AS checkpointed,
    (SELECT v.review FROM reviews v WHERE v.run_id = r.id AND v.pause_id = 'start') AS asked
  FROM runs r WHERE r.status = 'queued' AND r.updated < extract(epoch FROM now()) - %(lease)s
   AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.lock = 'run:' || r.id AND j.status IN ('todo', 'doing'))"""


async def _requeue_orphans(app_) -> list[str]:
    """Queue a job for each run recorded ``queued`` without one (_ORPHANS), carrying who asked for it as its start
    recorded it (the worker asks the gate again); a branch never started cannot be (its changes went with the job
    that was never queued), nor a run without that record: each is failed, saying so. The run ids queued."""
    from core.jobs.opening import open_store  # heavy: the agent workspace (a worker has it loaded already)
    from core.jobs import payload  # heavy: as above

    queued = []
    for row in await app_.connector.execute_query_all_async(_ORPHANS, lease=LEASE_S):
        settings = json.loads(row["settings"] or "{}")
        if row["branch"] and not row["checkpointed"]:
            await asyncio.to_thread(open_store().fail_undriven, row["id"], ErrorEvent(
                message="the app that branched this run stopped before it queued it: branch the run again",
                error_kind="worker"))
            continue
        # what a job may carry of the run's model (never a key or a URL), checked as any job is
        llm = {k: settings[k] for k in payload.Model.model_fields if settings.get(k) is not None} or None
        job = {"v": payload.VERSION, "action": "start", "run_id": row["id"], "llm": llm, "branch": None,
               "asked": json.loads(row["asked"]) if row["asked"] else None, "code": code_version()}
        try:
            if job["asked"] is None:
                raise ValueError("no one is recorded as having asked for it: start it again")
            payload.run_payload(job)
        except ValueError as e:
            await asyncio.to_thread(open_store().fail_undriven, row["id"], ErrorEvent(
                message=scrub(f"the run's settings do not fit a job: {e}"), error_kind="worker"))
            continue
        await app_.configure_task("drive_run", lock=f"run:{row['id']}").defer_async(**job)
        queued.append(row["id"])
    return queued


async def _sweep_once(app_) -> list[int]:
    """Put back in the queue the jobs of workers silent for LEASE_S seconds, and forget those workers."""
    from procrastinate import utils  # optional: as above

    back = []
    for job in await app_.job_manager.get_stalled_jobs(seconds_since_heartbeat=LEASE_S):
        try:
            await app_.job_manager.retry_job_by_id_async(job.id, retry_at=utils.utcnow())
            back.append(job.id)
        except Exception:  # noqa: BLE001 - another worker swept it first
            continue
    await app_.job_manager.prune_stalled_workers(LEASE_S)
    await app_.connector.execute_query_async(
        "DELETE FROM queue_workers WHERE worker_id NOT IN (SELECT id FROM procrastinate_workers)")
    return back


def sweep() -> tuple[list[int], list[str]]:
    """``_sweep_once`` and ``_requeue_orphans`` from synchronous code (``python -m core worker --sweep``): the job
    ids put back, the run ids queued."""
    async def once():
        async with new_app().open_async() as opened:
            return await _sweep_once(opened), await _requeue_orphans(opened)
    return asyncio.run(once())


def run_worker(concurrency: int = 1, queues: list[str] | None = None, name: str | None = None,
               on_ready=None) -> None:
    """Run a worker until SIGINT or SIGTERM (then it takes no more jobs and its runs in hand end at once,
    ``interrupted``): ``concurrency`` jobs at once from ``queues`` (default all), sweeping the jobs of workers gone
    every SWEEP_S seconds. ``on_ready()`` once it is registered. A store outage is said once and waited for
    (core.jobs.steady)."""
    the_app = new_app()
    from core.jobs import steady, tasks  # heavy: as new_app

    tasks.warm_up()
    outage = steady.Outage(name or "")

    days = retention_days()

    async def sweeper():
        pruned = time.monotonic() - PRUNE_EVERY_S + LEASE_S  # the first prune once steady
        while True:
            await asyncio.sleep(SWEEP_S)
            # other workers are judged only once this one has reached the store for LEASE_S seconds without a
            # break: right after an outage every heartbeat is old
            if not outage.steady(LEASE_S):
                continue
            try:
                back = await _sweep_once(the_app)
                if back:
                    print(f"worker {name}: put back in the queue the jobs {back} of workers gone", flush=True)
                orphans = await _requeue_orphans(the_app)
                if orphans:
                    print(f"worker {name}: queued the runs {orphans} recorded without a job", flush=True)
                if time.monotonic() - pruned >= PRUNE_EVERY_S:
                    pruned = time.monotonic()
                    gone = await _prune(the_app, days)
                    if gone:
                        print(f"worker {name}: pruned {gone} job(s) finished more than {days:g} days ago", flush=True)
            except Exception as e:  # noqa: BLE001 - the store away: said once, the next round tries again
                if not database.is_lost(e):
                    print(f"worker {name}: sweep failed: {scrub(str(e)).strip()}", flush=True)
                else:
                    outage.lost(e)

    async def main():
        async with the_app.open_async():
            the_app.perform_import_paths()
            worker = steady.SteadyWorker(
                app=the_app, outage=outage, concurrency=concurrency, queues=queues, name=name,
                update_heartbeat_interval=HEARTBEAT_S, fetch_job_polling_interval=1.0,
                abort_job_polling_interval=1.0, install_signal_handlers=False,
                stalled_worker_timeout=24 * 3600)  # its start prunes none: the sweep does, once steady
            side = asyncio.create_task(sweeper())
            working = asyncio.create_task(worker.run())

            def stopping() -> None:  # take no more jobs; the runs in hand end interrupted, their jobs then end
                tasks.interrupt_runs()
                working.cancel()

            loop = asyncio.get_running_loop()
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(number, stopping)
            if on_ready:
                on_ready()
            try:
                await working
            except asyncio.CancelledError:
                pass
            finally:
                side.cancel()

    asyncio.run(main())


def describe_worker_gap() -> str | None:
    """What a page says while a job waits and no worker is up; None when one is."""
    try:
        alive = workers()
    except Exception as e:  # noqa: BLE001 - said to the analyst; the page goes on
        return f"the job queue cannot be read: {scrub(str(e)).strip()}"
    if alive:
        return None
    return ("No worker is running: the job waits in the queue. Start one on any machine that reaches the team "
            "store: python -m core worker")

