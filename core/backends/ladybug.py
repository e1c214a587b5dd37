"""Ladybug (the maintained Kùzu fork), the embedded graph backend and the default one for Cypher.

A question's graph is built once per process and content (``Database.key``) into a database file in a
temporary folder: node and relationship tables declared from the GraphData, then bulk-loaded with COPY from
Arrow tables (doubles arrive bit-exact). Every ``open_database`` opens that file read-only, so the engine
itself refuses writes; the keyword pre-check in cypher_dialect only gives the nicer message, and also stops
the statements a read-only Ladybug still runs (CHECKPOINT, EXPORT DATABASE, LOAD FROM files, CALL settings).

Threads: building is serialised by a module lock; each backend serialises its own queries with a lock, so
one backend may be shared by threads, and backends on the same content run in parallel.
"""
from __future__ import annotations

import atexit
import datetime
import decimal
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import ladybug
import pyarrow as pa

from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, BackendUnavailable, QueryError, QueryResult,
                                QuerySyntaxError, QueryTimeout, RefusedWrite)
from core.backends.cypher_dialect import column_names, prepare, schema_text, to_ladybug
from core.graphdata import GraphData
from core.settings import DatabaseSettings

if TYPE_CHECKING:
    from core.scenario import Database

BUFFER_POOL = 256 << 20  # bytes of page cache per open database (the default is 80% of the machine's memory)
MAX_DB_SIZE = 1 << 30  # address space each open reserves; the default 8 TB runs out after ~15 open databases
_ARROW_TYPES = {"STRING": pa.string(), "INT64": pa.int64(), "DOUBLE": pa.float64(), "BOOL": pa.bool_()}

_build_lock = threading.Lock()
_built: dict[str, Path] = {}
_folder: Path | None = None


def unavailable(settings: DatabaseSettings) -> str | None:
    """Ladybug is embedded: usable whenever its package imports (the registry checks that)."""
    return None


def open_database(database: Database, settings: DatabaseSettings) -> LadybugBackend:
    """The question's graph in Ladybug, opened read-only (built on first use in this process)."""
    return LadybugBackend(database, database_file(database))


def database_file(database: Database) -> Path:
    """The Ladybug file holding ``database``'s graph, built once per process and content key."""
    global _folder
    with _build_lock:
        if database.key not in _built:
            if _folder is None:
                _folder = Path(tempfile.mkdtemp(prefix="planrag-ladybug-"))
                atexit.register(shutil.rmtree, _folder, True)
            path = _folder / f"{database.key}-{uuid.uuid4().hex[:8]}.lbug"
            try:
                build(database.graph, path)
            except RuntimeError as e:
                for leftover in _folder.glob(f"{path.name}*"):
                    leftover.unlink()
                raise BackendUnavailable(f"cannot load the graph into Ladybug: {e}") from None
            _built[database.key] = path
        return _built[database.key]


def forget(key: str) -> None:
    """Drop a content's built file from the cache, so the next open builds it again (backends already open
    keep reading the old file, which goes away when they close)."""
    with _build_lock:
        path = _built.pop(key, None)
    if path is not None:
        try:
            path.unlink()
        except OSError:  # still open on a platform that cannot delete open files; removed at exit
            pass


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _arrow(names: list[str], types: list[str], rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows)) if rows else [()] * len(names)
    return pa.table({n: pa.array(list(c), _ARROW_TYPES[t]) for n, t, c in zip(names, types, columns)})


def build(graph: GraphData, path: Path) -> None:
    """Create a Ladybug database at ``path``: one node table per label (its key the primary key), one
    relationship table per type, each filled by one COPY."""
    db = ladybug.Database(str(path), buffer_pool_size=BUFFER_POOL, max_db_size=MAX_DB_SIZE)
    try:
        with ladybug.Connection(db) as conn:
            for t in graph.nodes.values():
                columns = ", ".join(f"{_q(p)} {t.types[p]}" for p in t.properties)
                conn.execute(f"CREATE NODE TABLE {_q(t.label)}({columns}, PRIMARY KEY ({_q(t.key)}))")
            for r in graph.rels.values():
                columns = "".join(f", {_q(p)} {r.types[p]}" for p in r.properties)
                conn.execute(f"CREATE REL TABLE {_q(r.type)}(FROM {_q(r.src)} TO {_q(r.dst)}{columns})")
            for t in graph.nodes.values():
                table = _arrow(t.properties, [t.types[p] for p in t.properties], t.rows)
                conn.execute(f"COPY {_q(t.label)} FROM $rows", {"rows": table})
            for r in graph.rels.values():
                src, dst = graph.nodes[r.src], graph.nodes[r.dst]
                types = [src.types[src.key], dst.types[dst.key]] + [r.types[p] for p in r.properties]
                table = _arrow(["_from", "_to", *r.properties], types, r.rows)
                conn.execute(f"COPY {_q(r.type)} FROM $rows", {"rows": table})
    finally:
        db.close()


def plain(value):
    """A Ladybug value as plain JSON-able Python: a node or relationship as a dict of its (non-null)
    properties plus ``_label``, a path as ``{"nodes": [...], "relationships": [...]}``, an internal id as
    ``"table:offset"``, INT128 sums as int, dates and times as ISO strings."""
    if isinstance(value, dict):
        if "_NODES" in value and "_RELS" in value:
            return {"nodes": plain(value["_NODES"]), "relationships": plain(value["_RELS"])}
        if "_LABEL" in value and "_ID" in value:
            return {"_label": value["_LABEL"],
                    **{k: plain(v) for k, v in value.items() if not k.startswith("_") and v is not None}}
        if value.keys() == {"offset", "table"}:
            return f"{value['table']}:{value['offset']}"
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (datetime.timedelta, uuid.UUID)):
        return str(value)
    return value


def _error(message: str, timeout_s: float, notes: list[str]) -> QueryError:
    if notes:
        message += "\n(Ladybug ran the query rewritten: " + "; ".join(notes) + ")"
    if message.startswith("Interrupted"):
        return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it "
                            "(bound variable-length patterns, avoid cartesian products, aggregate early)")
    if message.startswith(("Parser exception", "Binder exception", "Catalog exception")):
        return QuerySyntaxError(message)
    if "Cannot execute write operations in a read-only database" in message:
        return RefusedWrite(f"refused: the database is read-only ({message})")
    if message.startswith("Buffer manager exception"):
        return QueryError(f"the query needs more than the {BUFFER_POOL >> 20} MB memory limit; narrow it ({message})")
    return QueryError(message)


class LadybugBackend:
    """One read-only Ladybug database and connection; ``query`` may be called from any thread."""

    name = "ladybug"
    language = "cypher"

    def __init__(self, database: Database, path: Path):
        self._graph = database.graph
        self._lock = threading.Lock()
        try:
            self._db = ladybug.Database(str(path), read_only=True, buffer_pool_size=BUFFER_POOL,
                                        max_db_size=MAX_DB_SIZE)
        except RuntimeError as e:
            raise BackendUnavailable(f"cannot open the Ladybug database {path}: {e}") from None
        self._conn = ladybug.Connection(self._db)

    def schema_text(self) -> str:
        return schema_text(self._graph)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one read-only Cypher query (Neo4j-only constructs rewritten, see ``QueryResult.notes``)."""
        original = prepare(text)
        executed, notes = to_ladybug(original)
        with self._lock:
            if self._conn is None:
                raise BackendUnavailable("this Ladybug connection is closed")
            self._conn.set_query_timeout(max(1, round(timeout_s * 1000)))
            start = time.perf_counter()
            try:
                result = self._conn.execute(executed)
            except RuntimeError as e:
                raise _error(str(e), timeout_s, notes) from None
            try:
                total = result.get_num_tuples()
                rows = [plain(result.get_next()) for _ in range(min(total, row_cap))]
                columns = result.get_column_names()
            finally:
                result.close()
            elapsed = time.perf_counter() - start
        columns = column_names(original, len(columns)) or columns
        return QueryResult(columns, rows, total, elapsed, executed, notes)

    def cancel(self) -> None:
        """Stop the query running now (any thread may call this)."""
        conn = self._conn
        if conn is not None:
            conn.interrupt()

    def close(self) -> None:
        """Close the connection and the database (the built file stays cached for later opens)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._db.close()
                self._conn = None
