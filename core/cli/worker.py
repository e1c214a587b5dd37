"""``python -m core worker``: take runs and benchmark items from the team's job queue (docs/deploy.md).

    python -m core worker [--concurrency N] [--queues runs,bench] [--name NAME]
    python -m core worker --sweep      # put back the jobs of workers gone, once, and exit
    python -m core worker --status     # each worker, the jobs per queue and status, waiting and failed jobs
    python -m core worker --health NAME  # exit 0 when the worker NAME beats, 1 otherwise

A worker runs on any machine that reaches the team store (PLANRAG_DATABASE_URL): it drives runs with its own model
key (OPENAI_API_KEY, or the server's endpoints) and its own DQA folder (DQA_DIR), and writes everything to the
team store. Stop it with Ctrl-C or SIGTERM: it takes no more jobs, its runs in hand end interrupted at once (to
be resumed from their last checkpoint) and its benchmark items in hand finish first.
"""
from __future__ import annotations

import argparse
import sys

from core.analysis.format import number, timestamp
from core.cli.args import bounded
from core.config import settings as core_settings
from core.jobs.code import process_name
from core.store import database

DESCRIPTION = __doc__.split("\n\n", 1)[0].replace("``", "")


def main(args) -> int:
    from core.jobs import queue, routing  # heavy: procrastinate, and the runtime its tasks drive

    if not core_settings.database_url():
        print(f"error: a worker takes its jobs from the team store: set {core_settings.DATABASE_URL_ENV} "
              "(docs/deploy.md)", file=sys.stderr)
        return 2
    if args.status:
        _print_status(queue.status(), queue.LEASE_S)
        return 0
    if args.health:
        return _health(queue, args.health)
    if args.sweep:
        back, orphans = queue.sweep()
        print(f"put back in the queue: {len(back)} job(s) of workers gone" + (f" ({back})" if back else ""))
        if orphans:
            print(f"queued: {len(orphans)} run(s) recorded without a job ({', '.join(orphans)})")
        return 0
    if args.concurrency < 1:
        print("error: --concurrency must be at least 1", file=sys.stderr)
        return 2
    queues = [q.strip() for q in args.queues.split(",") if q.strip()] if args.queues else None
    unknown = sorted(set(queues or ()) - {queue.RUNS, queue.BENCH})
    if unknown:
        print(f"error: unknown queue(s) {', '.join(unknown)}: choose among {queue.RUNS}, {queue.BENCH}",
              file=sys.stderr)
        return 2
    name = args.name or process_name()
    try:
        queue.retention_days()
    except queue.QueueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    queues, left = routing.worker_queues(queues)
    queue.run_worker(args.concurrency, queues, name,
                     on_ready=lambda: print(f"worker {name} ready: {args.concurrency} at once from "
                                            f"{', '.join(queues)} (code {queue.code_version()})"
                                            + (f"; {left}" if left else ""), flush=True))
    return 0


def _ago(seconds: float | None) -> str:
    return "-" if seconds is None else f"{number(seconds, decimals=0)} s ago" if seconds < 120 else f"{number(seconds / 60, decimals=0)} min ago"


def _print_status(state: dict, lease: float) -> None:
    """``--status``: the workers up and each worker, the jobs per queue and status, the waiting and failed jobs."""
    up = [w for w in state["workers"] if w["heartbeat_s"] <= lease]
    print(f"workers up: {len(up)}")
    for w in state["workers"]:
        since = timestamp(w["since"]) if w["since"] else "-"
        print(f"  worker {w['name'] or '(unnamed)'}: host {w['host'] or '-'}, pid {w['pid'] or '-'}, "
              f"queues {w['queues'] or 'all'}, since {since}, {w['running']} job(s) running, "
              f"last heartbeat {_ago(w['heartbeat_s'])}" + ("" if w["heartbeat_s"] <= lease else " (gone)"))
    print("jobs:")
    for name, states in sorted(state["counts"].items()):
        print(f"  {name}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    print(f"waiting: {state['waiting']} job(s)" + (f", the oldest queued {_ago(state['oldest_waiting_s'])}"
                                                   if state["waiting"] else ""))
    if state["failed"]:
        print(f"failed (the last {len(state['failed'])}):")
        for job in state["failed"]:
            at = timestamp(job["at"]) if job["at"] else "-"
            print(f"  job {job['id']} {job['task']} {job['subject']} ({job['queue']}) at {at}")


def _health(queue, name: str) -> int:
    """``--health NAME``: 0 when the worker NAME beat within the lease, 1 (and why) otherwise."""
    try:
        found = [w for w in queue.status(failed=0)["workers"] if w["name"] == name]
    except Exception as e:  # noqa: BLE001 - the store away: unhealthy, said in one line
        print(f"unhealthy: the team store cannot be read: {database.lost_reason(e)}")
        return 1
    beating = [w for w in found if w["heartbeat_s"] <= queue.LEASE_S]
    if beating:
        w = beating[0]
        print(f"healthy: worker {name} (pid {w['pid']} on {w['host']}) beat {_ago(w['heartbeat_s'])}, "
              f"{w['running']} job(s) running")
        return 0
    print(f"unhealthy: worker {name} " + (f"last beat {_ago(min(w['heartbeat_s'] for w in found))}" if found
                                         else "is not registered"))
    return 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="take runs and benchmark items from the team's job queue",
                       description=DESCRIPTION)
    p.add_argument("--concurrency", type=bounded("concurrency"), default=1, help="jobs at once (default 1)")
    p.add_argument("--queues", help="comma-separated queues to take jobs from: runs, bench (default both)")
    p.add_argument("--name", help="the worker's name in logs (default host:pid)")
    p.add_argument("--sweep", action="store_true", help="put back in the queue the jobs of workers gone, and exit")
    p.add_argument("--status", action="store_true",
                   help="print each worker, the jobs per queue, the waiting and the failed jobs, and exit")
    p.add_argument("--health", metavar="NAME", help="exit 0 when the worker NAME beats (for a supervisor or a "
                   "load balancer), 1 otherwise")
    p.set_defaults(func=main)
