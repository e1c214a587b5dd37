"""Benchmark items as jobs on the team's job queue (core.jobs.queue): ``drive`` runs a benchmark in this process
(threads, the embedded default) or queues its missing items for the workers and follows their results in the
store (a worker's side is core.jobs.tasks.bench_item). Two commands on one benchmark share its items (an item waits in the queue
once); a rerun after a stop or a crash queues only what has no result.

A job carries the benchmark as ``config_dict`` says it (core.jobs.payload.BenchSpec): never the key, a URL, nor a
folder of the machine that queued it (a worker reads its own DQA folder, uses its own model server, and writes to
the team store, where the benchmark is named by its folder's name)."""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, fields

from core.analysis.format import clock
from core.benchmark.items import Item
from core.benchmark.runner import Bench, Progress
from core.benchmark.results import read_not_run
from core.jobs import queue
from core.scenarios.dqa.source import DQA_SET
from core.store import database

FOLLOW_S = 0.5  # how often the follower reads the store
_LOCAL = ("out", "dqa_root", "home", "base_url", "llm_settings", "limits", "concurrency")  # not sent as they are

def config_dict(bench: Bench) -> dict:
    """What a job says of the benchmark: its settings, named by its folder's name, the LLM settings without the
    key or the server's URL, and the name of its generated question set if it runs one (not the set's folder: a
    worker reads its own)."""
    c = bench.config
    values = {f.name: getattr(c, f.name) for f in fields(c) if f.name not in _LOCAL}
    question_set = bench.set_name if c.source == "dqa" and bench.set_name != DQA_SET else None
    return {**values, "name": bench.directory.name, "limits": asdict(c.limits),
            "llm_settings": queue.llm_fields(c.llm_settings), "question_set": question_set}


def drive(bench: Bench, on_result=None, stop: threading.Event | None = None, on_note=None) -> Progress:
    """Run the benchmark's pending items: in this process (``Bench.run``), or with the job queue, by the workers
    (``follow``)."""
    if not queue.enabled():
        return bench.run(on_result=on_result, stop=stop, on_note=on_note)
    return follow(bench, on_result, stop or threading.Event(), on_note)


def _take(bench: Bench, waiting: dict[str, Item], jobs: dict[str, int], progress: Progress, started: float,
          stop: threading.Event, on_result) -> None:
    """Take the items of ``waiting`` that ended (a result, a not-run record, a job cancelled or failed) into
    ``progress``."""
    if stop.is_set() and jobs:
        queue.cancel([jobs[k] for k in waiting if k in jobs])
        progress.stopped = progress.stopped or "stopped"
    done = {k: r for r in bench.results() if (k := Item.of_row(r).key) in waiting}
    failed = {Item.of_row(r).key: r for r in read_not_run(bench.directory, set(waiting)) if r["at"] >= started}
    states = queue.job_states([jobs[k] for k in waiting if k in jobs])
    for key in list(waiting):
        item, state = waiting[key], states.get(jobs.get(key), "succeeded")
        if key in done:
            progress.finish(done[key])
            waiting.pop(key)
            if on_result:
                on_result(item, done[key], None, progress)
        elif key in failed or state == "failed":
            error = failed[key]["error"] if key in failed else "its job failed on a worker"
            if progress.fail(item.name, error, failed[key]["error_kind"] if key in failed else None):
                stop.set()
            waiting.pop(key)
            if on_result:
                on_result(item, None, error, progress)
        elif state in ("cancelled", "aborted"):
            waiting.pop(key)  # cancelled by a stop: it stays pending for a rerun


def follow(bench: Bench, on_result, stop: threading.Event, on_note) -> Progress:
    """Queue the benchmark's pending items and follow their results in the store until each has one or could not
    run; ``stop`` cancels the items still waiting (those in hand finish and are stored)."""
    bench.refresh()
    stored = bench.results()
    bench.budget_id = bench.config.budget_id or uuid.uuid4().hex
    progress = bench.progress = Progress(len(bench.work.items), len(stored),
                                         sum(bool(r.get("correct")) for r in stored),
                                         budget=bench.open_budget(bench.budget_id))
    started = time.time()
    bench.store.mark_running(len(bench.work.items), bench.config.started_by)
    values = {**config_dict(bench), "budget_id": bench.budget_id}
    jobs = queue.enqueue_items(values, [i.key for i in bench.pending], bench.directory.name)
    waiting = {i.key: i for i in bench.pending}

    def note(text: str) -> None:  # kept in the progress (the Benchmark page shows it) and told
        if text not in progress.notes:
            progress.notes.append(text)
            if on_note:
                on_note(text)

    if len(jobs) < len(waiting):
        note(f"{len(waiting) - len(jobs)} items were queued already (another command runs this benchmark): "
             "shared, not run twice")
    told, lost = False, None
    while waiting:
        try:
            _take(bench, waiting, jobs, progress, started, stop, on_result)
            if waiting and not told and time.time() - started > 5 and queue.workers() == 0:
                note(f"{clock(time.time())}: {queue.describe_worker_gap()}")
                told = True
            lost = None
        except Exception as e:  # the server restarting: the pools reconnect once it is back
            if not database.is_lost(e):
                raise
            if lost is None:
                note(f"{clock(time.time())}: the team store cannot be reached ({database.lost_reason(e)}); "
                     "waiting for it")
            lost = lost or time.monotonic()
            if time.monotonic() - lost > database.GRACE_S:
                raise
        if waiting:
            time.sleep(FOLLOW_S)
    bench.record_votes()
    return progress

