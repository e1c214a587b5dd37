"""``python -m core worker``: take runs and benchmark items from the team's job queue (docs/deploy.md).

    python -m core worker [--concurrency N] [--queues runs,bench] [--name NAME]
    python -m core worker --sweep      # put back the jobs of workers gone, once, and exit
    python -m core worker --status     # the queue: workers up, jobs per queue and status

A worker runs on any machine that reaches the team store (PLANRAG_DATABASE_URL): it drives runs with its own model
key (OPENAI_API_KEY, or the server's endpoints) and its own DQA folder (DQA_DIR), and writes everything to the
team store. Stop it with Ctrl-C or SIGTERM: the jobs in hand finish first.
"""
from __future__ import annotations

import argparse
import sys

from core.config import settings as core_settings
from core.jobs.code import process_name

DESCRIPTION = __doc__.split("\n\n", 1)[0].replace("``", "")


def main(args) -> int:
    from core.jobs import queue  # heavy: procrastinate, and the runtime its tasks drive

    if not core_settings.database_url():
        print(f"error: a worker takes its jobs from the team store: set {core_settings.DATABASE_URL_ENV} "
              "(docs/deploy.md)", file=sys.stderr)
        return 2
    if args.status:
        print(f"workers up: {queue.workers()}")
        for name, states in sorted(queue.counts().items()):
            print(f"  {name}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
        return 0
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
    queues, left = queue.worker_queues(queues)
    queue.run_worker(args.concurrency, queues, name,
                     on_ready=lambda: print(f"worker {name} ready: {args.concurrency} at once from "
                                            f"{', '.join(queues)} (code {queue.code_version()})"
                                            + (f"; {left}" if left else ""), flush=True))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="take runs and benchmark items from the team's job queue",
                       description=DESCRIPTION)
    p.add_argument("--concurrency", type=int, default=1, help="jobs at once (default 1)")
    p.add_argument("--queues", help="comma-separated queues to take jobs from: runs, bench (default both)")
    p.add_argument("--name", help="the worker's name in logs (default host:pid)")
    p.add_argument("--sweep", action="store_true", help="put back in the queue the jobs of workers gone, and exit")
    p.add_argument("--status", action="store_true", help="print the workers up and the jobs per queue, and exit")
    p.set_defaults(func=main)
