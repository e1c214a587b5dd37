"""The result store of a benchmark: one row per finished item (question, database, technique, model), written
as the item finishes, in ``results.sqlite`` under the benchmark's directory (or in the team store, by the
directory's name); and the parameters the results
were made with, so a rerun with other parameters does not mix with them."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from pathlib import Path

from core.benchmark.items import BenchError, Item
from core.store.database import Database, is_url, location, upsert
from core.store.sqlite import open_sqlite
from core.scenarios.dqa.source import DQA_SET
from core.config.secrets import scrub
from core.store.overrides import OverrideStore, apply

FILE = "results.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, scenario TEXT, question INTEGER, db TEXT,
    technique TEXT, model TEXT, status TEXT, correct INTEGER, finished REAL, data TEXT);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS not_run (key TEXT PRIMARY KEY, scenario TEXT, question INTEGER, db TEXT,
    technique TEXT, model TEXT, error_kind TEXT, error TEXT, attempts TEXT, at REAL);
CREATE TABLE IF NOT EXISTS budgets (id TEXT PRIMARY KEY, max_tokens INTEGER, max_cost_usd REAL, max_calls INTEGER,
    price_prompt REAL, price_completion REAL, calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    in_flight INTEGER NOT NULL DEFAULT 0);
"""
RUNNING = "running"  # the meta row of the process running the benchmark now (ResultStore.mark_running)
#: The fields of an item that could not run (ResultStore.not_run, read_not_run).
NOT_RUN_FIELDS = ("scenario", "question", "db", "technique", "model", "error_kind", "error", "attempts", "at")


def _set_up(con: sqlite3.Connection) -> None:
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = NORMAL")
    con.executescript(_SCHEMA)


class Scope:
    """One benchmark's rows: a SQLite file of its own (tables ``results``, ``meta``, ``not_run``, ``budgets``), or in
    the team store the rows of ``bench_results``, ``bench_meta``, ``bench_not_run``, ``bench_budgets`` whose
    ``benchmark`` is its folder's name."""

    def __init__(self, db: Database, directory: Path):
        self.db, self.name = db, directory.name

    def table(self, name: str) -> str:
        return f"bench_{name}" if self.db.team else name

    def where(self, condition: str = "1 = 1") -> str:
        """A WHERE clause for this benchmark's rows (its parameters: ``params``)."""
        return f" WHERE benchmark = ? AND {condition}" if self.db.team else f" WHERE {condition}"

    @property
    def params(self) -> tuple:
        return (self.name,) if self.db.team else ()

    def upsert(self, name: str, columns: tuple[str, ...], key: tuple[str, ...], replace: bool = True) -> str:
        if self.db.team:
            columns, key = ("benchmark", *columns), ("benchmark", *key)
        return upsert(self.table(name), columns, key, replace)


_RESULT_COLUMNS = ("key", "scenario", "question", "db", "technique", "model", "status", "correct", "finished", "data")
_NOT_RUN_COLUMNS = ("key", "scenario", "question", "db", "technique", "model", "error_kind", "error", "attempts", "at")


class ResultStore:
    """Results by item key, in the benchmark's ``results.sqlite`` or the team store. Each write is committed at
    once, so a killed process keeps every finished item; safe to share between threads."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.path = self.directory / FILE
        target = location(self.path)
        if not is_url(target):
            self.directory.mkdir(parents=True, exist_ok=True)
        self.scope = Scope(Database(target, "benchmark result store", _set_up), self.directory)

    def close(self) -> None:
        self.scope.db.close()

    def check_params(self, params: dict) -> None:
        """Record the run parameters (temperature, limits, ...) on first use; BenchError if the stored results
        were made with others."""
        text = json.dumps(params, sort_keys=True)
        sc = self.scope
        with sc.db.transaction() as con:
            con.execute(sc.upsert("meta", ("name", "value"), ("name",), replace=False), (*sc.params, "params", text))
            row = con.execute(f"SELECT value FROM {sc.table('meta')}" + sc.where("name = 'params'"),
                              sc.params).fetchone()
        stored = json.loads(row[0])
        if stored != json.loads(text):
            changed = ", ".join(f"{k} {stored.get(k)!r} -> {params.get(k)!r}" for k in sorted(set(stored) | set(params))
                                if stored.get(k) != params.get(k))
            raise BenchError(f"the results in {self.directory} were made with other parameters ({changed}); "
                             "use another --out (or --name) for these")

    def put(self, result: dict) -> None:
        """Store a finished item's result (see core.benchmark.runner for its fields)."""
        item = Item(result["scenario"], result["question"], result["db"], result["technique"], result["model"],
                    result.get("source", "dqa"), result.get("epoch", 1))
        correct = None if result.get("correct") is None else int(result["correct"])
        sc = self.scope
        with sc.db.transaction() as con:
            con.execute(sc.upsert("results", _RESULT_COLUMNS, ("key",)),
                        (*sc.params, item.key, item.scenario, item.question, item.db, item.technique, item.model,
                         result["status"], correct, result["finished"], scrub(json.dumps(result, default=str))))
            con.execute(f"DELETE FROM {sc.table('not_run')}" + sc.where("key = ?"), (*sc.params, item.key))

    def put_not_run(self, item: Item, error_kind: str, error: str, attempts: list[dict] | None = None) -> None:
        """Keep an item that could not run (a network, auth, rate-limit or server failure past its retries...):
        what happened (``error_kind``, the scrubbed ``error``) and the LLM call's attempts, so reports can list
        it. A rerun tries it again; its result then replaces this."""
        sc = self.scope
        with sc.db.transaction() as con:
            con.execute(sc.upsert("not_run", _NOT_RUN_COLUMNS, ("key",)),
                        (*sc.params, item.key, item.scenario, item.question, item.db, item.technique, item.model,
                         error_kind, scrub(error), scrub(json.dumps(attempts or [], default=str)), time.time()))

    def mark_running(self, total: int, by: str = "") -> None:
        """Record that this process runs the benchmark now (its ``total`` items, who started it, where), for the
        other apps of the team store to follow (core.jobs.benchmarks.elsewhere)."""
        sc = self.scope
        value = json.dumps({"total": total, "by": by, "host": socket.gethostname(), "pid": os.getpid(),
                            "at": time.time()})
        with sc.db.transaction() as con:
            con.execute(sc.upsert("meta", ("name", "value"), ("name",)), (*sc.params, RUNNING, value))

    def done(self) -> set[str]:
        """The keys of the stored items."""
        sc = self.scope
        return {k for (k,) in sc.db.rows(f"SELECT key FROM {sc.table('results')}" + sc.where(), sc.params)}


def _rows(directory: str | Path, table: str, columns: str, condition: str = "1 = 1", order: str = "") -> list[tuple]:
    """Rows of a benchmark directory's ``table`` (results, meta or not_run) matching ``condition`` (in which
    ``{results}`` names the results table and ``{scope}`` the benchmark's rows); [] when it has no such store or
    table (yet). The SQLite file is read as it is (another process may be writing it)."""
    directory = Path(directory)
    target = location(directory / FILE)
    if is_url(target):
        sc = Scope(Database(target, "benchmark result store"), directory)
        cond = condition.format(results=sc.table("results"), scope="benchmark = ?")
        return sc.db.rows(f"SELECT {columns} FROM {sc.table(table)}" + sc.where(cond) + order,
                          sc.params * (1 + condition.count("{scope}")))
    path = directory / FILE
    if not path.exists():
        return []
    con = open_sqlite(path, "benchmark result store", reader=True, timeout=30)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone():
            return []  # a store another process is creating right now
        cond = condition.format(results="results", scope="1 = 1")
        return con.execute(f"SELECT {columns} FROM {table} WHERE {cond}{order}").fetchall()
    finally:
        con.close()


def stored_benchmarks(home: str | Path) -> list[Path]:
    """The benchmarks that have a result store, as folders of ``home`` (core.benchmark.config.bench_home): with
    the team store every benchmark it holds (whichever app or worker ran it), else the folders holding a
    ``results.sqlite``."""
    home = Path(home)
    target = location(home / FILE)
    if is_url(target):
        rows = Database(target, "benchmark result store").rows(
            "SELECT benchmark FROM bench_meta UNION SELECT benchmark FROM bench_results")
        return sorted(home / name for (name,) in rows)
    return sorted(p.parent for p in home.glob(f"*/{FILE}"))


#: The benchmarks whose lock (core.benchmark.lock, the team store's advisory lock on ``bench:NAME``) a session of
#: this database holds now: run by a process in its own threads.
_HELD = """SELECT m.benchmark FROM bench_meta m WHERE m.name = 'lock' AND EXISTS (
    SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('bench:' || m.benchmark, 0))"""

#: Per benchmark named in the list: its running row, results, correct results, and not-run items without a result.
_STANDING = """SELECT b.name,
    (SELECT value FROM bench_meta m WHERE m.benchmark = b.name AND m.name = 'running'),
    (SELECT count(*) FROM bench_results r WHERE r.benchmark = b.name),
    (SELECT count(*) FROM bench_results r WHERE r.benchmark = b.name AND r.correct = 1),
    (SELECT count(*) FROM bench_not_run n WHERE n.benchmark = b.name
        AND n.key NOT IN (SELECT key FROM bench_results r WHERE r.benchmark = b.name))
  FROM unnest(?::text[]) AS b(name)"""


def held_benchmarks(url: str) -> list[str]:
    """The benchmarks of the team store at ``url`` a process runs in its own threads now (it holds their lock)."""
    return sorted(name for (name,) in Database(url, "benchmark result store").rows(_HELD))


def standing(url: str, names: list[str]) -> list[dict]:
    """Where each benchmark of ``names`` stands in the team store at ``url``: ``name``, ``total`` items of the run
    going on (None when it was not recorded), ``by``, ``host``, ``since``, ``stored`` results, ``correct`` among
    them, ``not_run`` items without a result."""
    found = []
    for name, running, stored, correct, not_run in Database(url, "benchmark result store").rows(_STANDING,
                                                                                                  (list(names),)):
        mark = json.loads(running) if running else {}
        found.append({"name": name, "total": mark.get("total"), "by": mark.get("by", ""),
                      "host": mark.get("host", ""), "since": mark.get("at"), "stored": stored, "correct": correct,
                      "not_run": not_run})
    return found


def read_results(directory: str | Path, keys: set[str] | None = None) -> list[dict]:
    """The stored results of a benchmark directory (all, or those of ``keys``), in scenario, question, database,
    technique order; [] when it has none."""
    rows = _rows(directory, "results", "key, data", order=" ORDER BY scenario, question, db, technique, model, key")
    return [json.loads(data) for key, data in rows if keys is None or key in keys]


def read_not_run(directory: str | Path, keys: set[str] | None = None) -> list[dict]:
    """The items of a benchmark directory that could not run and have no result yet (all, or those of ``keys``),
    each with ``source``, ``epoch`` and NOT_RUN_FIELDS (``attempts`` a list of the failed LLM call's attempts); [] when there
    are none."""
    rows = _rows(directory, "not_run", "key, " + ", ".join(NOT_RUN_FIELDS),
                 "key NOT IN (SELECT key FROM {results} WHERE {scope})",
                 " ORDER BY scenario, question, db, technique, model")
    found = [{"source": (item := Item.from_key(row[0])).source, **dict(zip(NOT_RUN_FIELDS, row[1:])),
              "epoch": item.epoch}
             for row in rows if keys is None or row[0] in keys]
    for item in found:
        item["attempts"] = json.loads(item["attempts"] or "[]")
    return found


def read_errors(directory: str | Path, keys: set[str] | None = None) -> list[dict]:
    """The items that could not run (read_not_run) as report rows: the item's fields, ``status`` "error",
    ``error_kind``, ``error`` and ``correct`` False (reports count them in n as not correct)."""
    generated = _params(directory).get("set")  # a generated question set's name (DQA's are not recorded)
    return [{"set": row["source"] if row["source"] != "dqa" else generated or DQA_SET,
             **{k: row[k] for k in ("source", "scenario", "question", "db", "technique", "model", "error_kind",
                                   "error")},
             "status": "error", "finished": row["at"], "correct": False, "epoch": row["epoch"]}
            for row in read_not_run(directory, keys)]


def _params(directory: str | Path) -> dict:
    """The run parameters a benchmark directory's results were made with ({} when none are stored)."""
    rows = _rows(directory, "meta", "value", "name = 'params'")
    return json.loads(rows[0][0]) if rows else {}


def read_all(directory: str | Path, keys: set[str] | None = None, home: str | Path | None = None) -> list[dict]:
    """What reports are made of: the stored results with the analysts' grade overrides (from the override store
    under ``home``, default DATA_HOME) applied, and the items that could not run (``status`` "error")."""

    results = read_results(directory, keys)
    return apply(results, OverrideStore(home).all()) + read_errors(directory, keys)
