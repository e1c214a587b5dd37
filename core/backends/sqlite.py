"""The embedded SQLite backend (the default). Each database content is written once per process into a file in
a temporary directory; every Backend opens it read-only and runs the agent's MySQL translated by sqlglot.

String columns are ``COLLATE NOCASE`` so comparisons, grouping and ordering on them ignore ASCII case as
MySQL's default collations do; FLOAT is REAL (a double) and BOOLEAN is INTEGER 0/1, as MySQL stores them.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
from contextlib import closing
from pathlib import Path

from core.backends import sql_dialect
from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, BackendUnavailable, QueryError, QueryResult,
                                QuerySyntaxError)
from core.backends import worker
from core.model.question import Database
from core.config.settings import DatabaseSettings
from sims.tables import Tables

_TYPES = {"VARCHAR": "TEXT COLLATE NOCASE", "INT": "INTEGER", "FLOAT": "REAL", "BOOLEAN": "INTEGER"}

_lock = threading.Lock()
_files: dict[str, Path] = {}  # Database.key -> loaded file
_dir: Path | None = None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def build_file(tables: Tables, path: Path, typed: bool = True) -> None:
    """Write ``tables`` into a new SQLite file at ``path``, in one transaction (``typed``: columns with the
    MySQL-like types above and the primary keys; else columns without a type, values kept as given)."""
    part = path.with_name(path.name + ".part")
    part.unlink(missing_ok=True)
    try:
        with closing(sqlite3.connect(part, isolation_level=None)) as con:
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute("BEGIN")
            for t in tables:
                columns = [f"{_quote(c.name)} {_TYPES[c.type]}" if typed else _quote(c.name) for c in t.columns]
                if t.primary_key and typed:
                    columns.append(f"PRIMARY KEY ({', '.join(map(_quote, t.primary_key))})")
                con.execute(f"CREATE TABLE {_quote(t.name)} ({', '.join(columns)})")
                con.executemany(f"INSERT INTO {_quote(t.name)} VALUES ({', '.join('?' * len(t.columns))})",
                                t.rows)
            con.execute("COMMIT")
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def database_file(database: Database, typed: bool = True) -> Path:
    """The SQLite file holding ``database`` (``typed``: see build_file), written on first use in this process and
    reused afterwards."""
    global _dir
    key = database.key if typed else f"{database.key}.untyped"
    with _lock:
        path = _files.get(key)
        if path is None:
            if _dir is None:
                _dir = Path(tempfile.mkdtemp(prefix="planrag-sqlite-"))
                atexit.register(shutil.rmtree, _dir, True)
            path = _dir / f"{key}.sqlite"
            build_file(database.tables, path, typed)
            _files[key] = path
        return path


def query_file(path: Path, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
    """Run SQLite ``sql`` on the file at ``path`` with an agent query's guards: in a worker process, read-only,
    within ``timeout_s``, ``row_cap`` rows, SQLite's length and heap limits and the result's character caps."""
    runner = worker.worker_for("sqlite", path)
    try:
        return runner.run(sql, timeout_s, row_cap)
    finally:
        worker.release(runner)


def forget(key: str) -> None:
    """Drop a content's file from the cache, so the next open writes it again (open backends keep theirs)."""
    with _lock:
        path = _files.pop(key, None)
    if path is not None:
        worker.discard(path)
        path.unlink(missing_ok=True)


class SQLiteBackend:
    """A read-only database file, queried in a worker process (core.backends.worker). Queries are serialized;
    any thread may call them."""

    name = "sqlite"
    language = "sql"

    def __init__(self, database: Database, path: Path):
        self.database = database
        self._worker = worker.worker_for("sqlite", path)

    def schema_text(self) -> str:
        return sql_dialect.schema_text(self.database.tables)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
              row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one MySQL query (translated to SQLite). ``total_rows`` counts every row, read within the limit. A
        query that cannot be translated raises QuerySyntaxError with, as its ``engine_message``, what SQLite itself
        says of the query as given (None when SQLite would compile it)."""
        sql = sql_dialect.one_statement(text)
        sql_dialect.check_read_only(sql, metadata=False)
        try:
            translated = sql_dialect.mysql_to_sqlite(sql)
        except QuerySyntaxError as e:
            e.engine_message = self._engine_says(sql, timeout_s)
            raise
        return self._run(translated, timeout_s, row_cap)

    def _engine_says(self, sql: str, timeout_s: float) -> str | None:
        """SQLite's own message on compiling ``sql`` untranslated (``EXPLAIN``: nothing runs), None when it
        compiles."""
        try:
            self._run(f"EXPLAIN {sql}", timeout_s, 1)
        except BackendUnavailable:
            return None
        except QueryError as e:
            return str(e)
        return None

    def _run(self, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
        """Run SQLite ``sql`` as given; the worker's connection itself refuses writes and stops it at the limit."""
        return self._worker.run(sql, timeout_s, row_cap)

    def cancel(self) -> None:
        """Stop the query running now (any thread may call this)."""
        self._worker.cancel()

    def close(self) -> None:
        """Hand the worker back (kept idle for the next open of this file); the file stays cached for later opens
        until the process exits."""
        worker.release(self._worker)


def unavailable(settings: DatabaseSettings) -> str | None:
    """SQLite is part of Python: always available."""
    return None


def open_database(database: Database, settings: DatabaseSettings) -> SQLiteBackend:
    """Load ``database`` (once per process) and open it read-only."""
    return SQLiteBackend(database, database_file(database))
