"""Ladybug (the maintained Kùzu fork), the embedded graph backend and the default one for Cypher.

A question's graph is built once per process and content (``Database.key``) into a database file in a
temporary folder: node and relationship tables declared from the GraphData, then bulk-loaded with COPY from
Arrow tables (doubles arrive bit-exact). Each open backend queries that file in its own worker process
(core.backends.worker), which opens it read-only, so the engine itself refuses writes, and cannot open, create or
write any file or reach the network (Landlock): the statements a read-only Ladybug still runs (COPY ... TO,
EXPORT DATABASE, LOAD FROM files, INSTALL) fail there. cypher_dialect's checks give the nicer message first and
allow only read statements (MATCH, UNWIND, WITH, RETURN, CALL of a few schema functions).

Threads: building is serialised by a module lock; each backend serialises its own queries, so one backend may
be shared by threads, and backends on the same content run in parallel.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import ladybug
import pyarrow as pa

from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, MAX_CELL_CHARS, MAX_ERROR_CHARS,
                                BackendUnavailable, QueryError, QueryResult, QueryTimeout, cap_text)
from core.backends.cypher_dialect import column_names, prepare, schema_text, to_ladybug
from core.backends.engines import BUFFER_POOL, MAX_DB_SIZE
from core.backends import worker
from core.model.graph import GraphData
from core.config.settings import DatabaseSettings

if TYPE_CHECKING:
    from core.model.question import Database

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
        worker.discard(path)
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


class LadybugBackend:
    """One read-only Ladybug database, queried in a worker process (core.backends.worker); ``query`` may be
    called from any thread."""

    name = "ladybug"
    language = "cypher"

    def __init__(self, database: Database, path: Path):
        self._graph = database.graph
        self._worker = worker.worker_for("ladybug", path)

    def schema_text(self) -> str:
        return schema_text(self._graph)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one read-only Cypher query (Neo4j-only constructs rewritten, see ``QueryResult.notes``)."""
        original = prepare(text)
        executed, notes = to_ladybug(original)
        try:
            result = self._worker.run(executed, timeout_s, row_cap)
        except QueryError as e:
            if notes and not isinstance(e, QueryTimeout):
                e.args = (cap_text(f"{e}\n(Ladybug ran the query rewritten: " + "; ".join(notes) + ")",
                                   2 * MAX_ERROR_CHARS),)
            raise
        columns = column_names(original, len(result.columns)) or result.columns
        return QueryResult(columns, result.rows, result.total_rows, result.elapsed_s, executed,
                           notes + result.notes).capped(MAX_CELL_CHARS)

    def cancel(self) -> None:
        """Stop the query running now (any thread may call this)."""
        self._worker.cancel()

    def close(self) -> None:
        """Hand the worker back (kept idle for the next open of this file, which stays cached)."""
        worker.release(self._worker)
