"""``python -m core db copy``: a single analyst's project home (its SQLite files and learned plan files) copied
into the team store. Idempotent: a row the team store has already is kept (a run or override is replaced only by
a newer one: its ``updated`` or ``at`` later), so a copy repeated, or interrupted and run again, loses nothing and
doubles nothing. Returns what it copied, table by table (rows new in the team store, and rows read)."""
from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

from core.store.checkpoints import open_checkpointer
from core.store.database import Database, upsert
from core.store.sqlite import open_read_only

RUN_COLUMNS = ("id", "created", "updated", "status", "scenario", "question", "db", "technique", "llm", "hitl",
               "settings", "pause", "outcome", "decision", "correct", "pause_id", "pauses", "owner_pid",
               "owner_host", "heartbeat", "stop_requested", "parent_id", "branch_step")
_BENCH_TABLES = {"results": ("key", "scenario", "question", "db", "technique", "model", "status", "correct",
                             "finished", "data"),
                 "meta": ("name", "value"),
                 "not_run": ("key", "scenario", "question", "db", "technique", "model", "error_kind", "error",
                             "attempts", "at")}
_BENCH_KEYS = {"results": ("key",), "meta": ("name",), "not_run": ("key",)}


class Counts(defaultdict):
    """Per table: [rows new in the team store, rows read from the home]."""

    def __init__(self):
        super().__init__(lambda: [0, 0])

    def add(self, table: str, new: int, read: int = 1) -> None:
        self[table][0] += new
        self[table][1] += read


def _read(path: Path, sql: str) -> list[tuple]:
    """The rows of ``sql`` in the SQLite file at ``path`` ([] without the file or its table), read as it is."""
    if not path.is_file():
        return []
    con = open_read_only(path)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError as e:
        if "no such" in str(e):
            return []
        raise
    finally:
        con.close()


def _columns(path: Path, table: str, wanted: tuple[str, ...]) -> str:
    """``wanted`` as a select list, NULL for a column an older file lacks."""
    have = {r[1] for r in _read(path, f"PRAGMA table_info({table})")}
    return ", ".join(c if c in have else "NULL" for c in wanted)


def _copy_runs(home: Path, db: Database, counts: Counts) -> None:
    path = home / "runs.sqlite"
    rows = _read(path, f"SELECT {_columns(path, 'runs', RUN_COLUMNS)} FROM runs")
    sql = (upsert("runs", RUN_COLUMNS, ("id",)) + " WHERE runs.updated IS NULL OR runs.updated < excluded.updated")
    with db.transaction() as con:
        for row in rows:
            counts.add("runs", con.execute(sql, row).rowcount)
        for row in _read(path, "SELECT run_id, seq, kind, data FROM events"):
            counts.add("events", con.execute(upsert("events", ("run_id", "seq", "kind", "data"), ("run_id", "seq"),
                                                    replace=False), row).rowcount)
        for row in _read(path, "SELECT run_id, pause_id, kind, action, reviewer, at, review FROM reviews"):
            # a stop has no pause (NULL, which a unique key does not match): matched on run, action and time
            counts.add("reviews", con.execute(
                "INSERT INTO reviews (run_id, pause_id, kind, action, reviewer, at, review) "
                "SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM reviews WHERE run_id = ? AND "
                "pause_id IS NOT DISTINCT FROM ? AND (pause_id IS NOT NULL OR (action = ? AND at = ?)))",
                (*row, row[0], row[1], row[3], row[5])).rowcount)


def _copy_overrides(home: Path, db: Database, counts: Counts) -> None:
    columns = ("run_id", "decision", "correct", "by", "at", "note", "placement")
    path = home / "overrides.sqlite"
    sql = upsert("overrides", columns, ("run_id",)) + " WHERE overrides.at < excluded.at"
    with db.transaction() as con:
        for row in _read(path, f"SELECT {_columns(path, 'overrides', columns)} FROM overrides"):
            counts.add("overrides", con.execute(sql, row).rowcount)


def _copy_plans(home: Path, db: Database, counts: Counts) -> None:
    with db.transaction() as con:
        for file in sorted((home / "plans").glob("*/v*.json")):
            if not file.stem[1:].isdigit():
                continue
            data = json.loads(file.read_text(encoding="utf-8"))
            counts.add("learned_plans", con.execute(
                upsert("learned_plans", ("scenario", "version", "created", "data"), ("scenario", "version"),
                       replace=False),
                (file.parent.name, int(file.stem[1:]), data.get("created"), json.dumps(data))).rowcount)


def _copy_benchmarks(bench: Path, db: Database, counts: Counts) -> None:
    rows = _read(bench / "llm-cache.sqlite", "SELECT key, model, created, data FROM replies")
    with db.transaction() as con:
        for row in rows:
            counts.add("replies", con.execute(upsert("replies", ("key", "model", "created", "data"), ("key",),
                                                     replace=False), row).rowcount)
        for path in sorted(bench.glob("*/results.sqlite")):
            for table, columns in _BENCH_TABLES.items():
                for row in _read(path, f"SELECT {', '.join(columns)} FROM {table}"):
                    sql = upsert(f"bench_{table}", ("benchmark", *columns), ("benchmark", *_BENCH_KEYS[table]),
                                 replace=False)
                    counts.add(f"bench_{table}", con.execute(sql, (path.parent.name, *row)).rowcount)


def _copy_checkpoints(home: Path, url: str, counts: Counts) -> None:
    """LangGraph's checkpoints (so that a paused or interrupted run goes on from the team store), through the
    savers' own interface: every checkpoint with its parent, channel values and pending writes."""
    path = home / "checkpoints.sqlite"
    if not path.is_file():
        return
    from langgraph.checkpoint.sqlite import SqliteSaver  # heavy: LangGraph's savers

    source = open_read_only(path, check_same_thread=False)
    target, close = open_checkpointer(url)
    try:
        have = {r[0] for r in Database(url, "checkpoint store").rows("SELECT checkpoint_id FROM checkpoints")}
        for item in SqliteSaver(source).list(None):
            config = item.parent_config or {"configurable": {k: v for k, v in item.config["configurable"].items()
                                                             if k != "checkpoint_id"}}
            saved = target.put(config, item.checkpoint, item.metadata, item.checkpoint.get("channel_versions", {}))
            by_task = defaultdict(list)
            for task_id, channel, value in item.pending_writes or []:
                by_task[task_id].append((channel, value))
            for task_id, writes in by_task.items():
                target.put_writes(saved, writes, task_id)
            counts.add("checkpoints", item.checkpoint["id"] not in have)
    finally:
        source.close()
        close()


def copy_home(home: str | Path, url: str, bench: str | Path | None = None) -> Counts:
    """Copy the project home ``home`` (its benchmarks under ``bench``, default ``home``/bench) into the team store
    at ``url``; the counts, table by table."""
    home = Path(home)
    if not home.is_dir():
        raise FileNotFoundError(f"no project home at {home}")
    db = Database(url, "team store")
    counts = Counts()
    _copy_runs(home, db, counts)
    _copy_overrides(home, db, counts)
    _copy_plans(home, db, counts)
    _copy_benchmarks(Path(bench) if bench else home / "bench", db, counts)
    _copy_checkpoints(home, url, counts)
    return counts
