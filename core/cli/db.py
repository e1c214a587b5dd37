"""``python -m core db``: the team store (PostgreSQL, ``PLANRAG_DATABASE_URL``; docs/deploy.md).

    python -m core db upgrade [--url URL]
    python -m core db copy --from PLANRAG_HOME --to URL
    python -m core db check [--url URL]      # the app's health: 0 when the store answers at this schema
    python -m core db prune [--days N]       # the queue's jobs finished N days ago and more, with their events

``upgrade`` brings the store's schema to this version's (Alembic migrations, and LangGraph's checkpoint tables);
the app and every other command refuse to start on a schema that is behind. ``copy`` moves a single analyst's
history (runs with their events, reviews and checkpoints, grade overrides, learned plans, benchmark results and
the reply cache) into the team store: run again, it copies nothing twice; the counts are printed.
"""
from __future__ import annotations

import argparse
import sys

from core.config import settings as core_settings
from core.store import database
from core.analysis.format import number

DESCRIPTION = __doc__.split("\n\n", 1)[0].replace("``", "")


def _url(given: str | None) -> str:
    url = given or core_settings.database_url()
    if not url:
        raise SystemExit("error: no team store: give --url (or --to) postgresql://..., or set PLANRAG_DATABASE_URL")
    if not database.is_url(url):
        raise SystemExit(f"error: {database.shown(url)} is not a postgresql:// URL")
    return url


def upgrade(args) -> int:
    from core.store import schema  # heavy: Alembic, SQLAlchemy and LangGraph's Postgres saver

    url = _url(args.url)
    was, now = schema.upgrade(url)
    print(f"team store {database.shown(url)}: schema {was or 'none'} -> {now}"
          + (" (already current)" if was == now else ""))
    return 0


def copy(args) -> int:
    from core.store.copy import copy_home  # heavy: LangGraph's savers, for the checkpoints

    url = _url(args.to)
    try:
        counts = copy_home(args.source, url)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"copied {args.source} into {database.shown(url)}:")
    for table, (new, read) in sorted(counts.items()):
        print(f"  {table}: {new} new, {read - new} already there ({read} read)")
    if not counts:
        print("  nothing to copy (no runs, overrides, plans, benchmarks or checkpoints in that home)")
    return 0


def check(args) -> int:
    """``db check``: 0 when the team store answers at this code's schema (the app's health, for a supervisor or a
    load balancer), 1 and why otherwise."""
    url = _url(args.url)
    try:
        database.check_schema(url)
    except Exception as e:  # noqa: BLE001 - unreachable or behind: unhealthy, said in one line
        reason = str(e) if isinstance(e, database.SchemaBehind) else database.lost_reason(e)
        print(f"unhealthy: {reason}")
        return 1
    print(f"healthy: team store {database.shown(url)} at schema {database.SCHEMA_HEAD}")
    return 0


def prune(args) -> int:
    """``db prune``: delete the job queue's jobs (and their events) finished before the retention."""
    from core.jobs import queue  # heavy: procrastinate

    _url(None)
    try:
        days = args.days if args.days is not None else queue.retention_days()
        if days <= 0:
            raise queue.QueueError("--days must be more than 0")
        gone = queue.prune(days)
    except queue.QueueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"pruned {gone} job(s) of the queue finished more than {number(days)} days ago (with their events)")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``db`` group: ``upgrade``, ``copy``, ``check``, ``prune``."""
    p = sub.add_parser("db", help="the team store (PostgreSQL): upgrade its schema, copy a home into it",
                       description=DESCRIPTION)
    group = p.add_subparsers(dest="db_command", required=True)
    u = group.add_parser("upgrade", help="apply the schema migrations to the team store")
    u.add_argument("--url", help="the team store (default PLANRAG_DATABASE_URL)")
    u.set_defaults(func=upgrade)
    c = group.add_parser("copy", help="copy a project home's history into the team store (idempotent)")
    c.add_argument("--from", dest="source", required=True, metavar="PLANRAG_HOME", help="the project home to copy")
    c.add_argument("--to", required=True, metavar="URL", help="the team store, postgresql://...")
    c.set_defaults(func=copy)
    h = group.add_parser("check", help="exit 0 when the team store answers at this code's schema (the app's health)")
    h.add_argument("--url", help="the team store (default PLANRAG_DATABASE_URL)")
    h.set_defaults(func=check)
    r = group.add_parser("prune", help="delete the job queue's jobs finished before the retention, with their events")
    r.add_argument("--days", type=float, help="keep the jobs finished within this many days (default "
                   "PLANRAG_QUEUE_RETENTION_DAYS, 30)")
    r.set_defaults(func=prune)
