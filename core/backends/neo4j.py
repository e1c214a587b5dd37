"""Neo4j through the official driver: a thin adapter for a server given by NEO4J_URI / NEO4J_USER /
NEO4J_PASSWORD.

Where the graph goes: into a dedicated database ``planrag-<content key>`` when the server can create one
(Enterprise, with the privilege); otherwise into the server's default database, cleared and reloaded when
another content is needed. The default database is cleared only if it is empty or holds a graph this adapter
loaded, which it recognises by its uniqueness constraints, named ``planrag_<key>_<label>`` and created after
the data (so they also mark a complete load). With one shared default database, one content is served at a
time: a backend whose graph was replaced by a later open raises BackendUnavailable.

Agent queries run in READ_ACCESS sessions, in a transaction with the server-side timeout; the server refuses
writes. The driver's retries are bounded by CONNECT_TIMEOUT_S so an unreachable server is reported quickly.
"""
from __future__ import annotations

import atexit
import threading
import time
from typing import TYPE_CHECKING

import neo4j
import neo4j.graph
import neo4j.time
from neo4j.exceptions import DriverError, Neo4jError

from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, BackendUnavailable, QueryError, QueryResult,
                                QuerySyntaxError, QueryTimeout, RefusedWrite)
from core.backends.cypher_dialect import prepare, schema_text
from core.graphdata import GraphData
from core.settings import DatabaseSettings

if TYPE_CHECKING:
    from core.scenario import Database

CONNECT_TIMEOUT_S = 2.0
BATCH_ROWS = 5000

_lock = threading.Lock()  # guards the module state below and serialises loads
_drivers: dict[tuple[str, str, str], neo4j.Driver] = {}
_loaded: dict[tuple[str, str | None], str] = {}  # (uri, database or None for the default) -> content key
_reload: set[str] = set()  # content keys to load again even if the server has them (see forget)
_single: set[str] = set()  # URIs of servers that cannot create a database for us (Community, or no privilege)


def _driver(settings: DatabaseSettings) -> neo4j.Driver:
    key = (settings.neo4j_uri, settings.neo4j_user, settings.neo4j_password)
    with _lock:
        if key not in _drivers:
            _drivers[key] = neo4j.GraphDatabase.driver(
                settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password),
                connection_timeout=CONNECT_TIMEOUT_S, connection_acquisition_timeout=CONNECT_TIMEOUT_S,
                max_transaction_retry_time=CONNECT_TIMEOUT_S)
        return _drivers[key]


@atexit.register
def _close_drivers() -> None:
    for driver in _drivers.values():
        driver.close()


def unavailable(settings: DatabaseSettings) -> str | None:
    """Why Neo4j cannot be used (NEO4J_URI unset, server unreachable, bad credentials), or None."""
    if not settings.neo4j_uri:
        return "Neo4j: NEO4J_URI is not set (e.g. bolt://localhost:7687, with NEO4J_USER and NEO4J_PASSWORD)"
    try:
        _driver(settings).verify_connectivity()
    except (DriverError, Neo4jError, ValueError, OSError) as e:
        return f"Neo4j at {settings.neo4j_uri} cannot be used: {e}"
    return None


def open_database(database: Database, settings: DatabaseSettings) -> Neo4jBackend:
    """The question's graph on the Neo4j server (loaded unless already there), for read-only queries."""
    driver = _driver(settings)
    try:
        target = _target_database(driver, settings.neo4j_uri, database.key)
        _ensure_loaded(driver, settings.neo4j_uri, target, database)
    except (DriverError, Neo4jError) as e:
        raise BackendUnavailable(f"cannot load the graph into Neo4j at {settings.neo4j_uri}: {e}") from None
    return Neo4jBackend(driver, settings.neo4j_uri, target, database)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _target_database(driver: neo4j.Driver, uri: str, key: str) -> str | None:
    """A dedicated database for the content when the server allows it, else None (the default database)."""
    if uri in _single:
        return None
    name = f"planrag-{key}"
    try:
        with driver.session(database="system") as session:
            session.run(f"CREATE DATABASE {_q(name)} IF NOT EXISTS WAIT").consume()
    except Neo4jError as e:
        if (e.code or "").startswith("Neo.ClientError."):  # Community edition, or no privilege
            _single.add(uri)
            return None
        raise
    return name


def _ensure_loaded(driver: neo4j.Driver, uri: str, database: str | None, data: Database) -> None:
    """Make the database hold ``data``'s graph unless it already does (all its constraints are there)."""
    prefix = f"planrag_{data.key}_"
    with _lock:
        if _loaded.get((uri, database)) == data.key:
            return
        with driver.session(database=database) as session:
            names = session.run("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names").single()["names"]
            if data.key in _reload or not all(prefix + label in names for label in data.graph.nodes):
                ours = [n for n in names if n.startswith("planrag_")]
                if not ours and session.run("MATCH (n) RETURN n LIMIT 1").peek() is not None:
                    raise BackendUnavailable(f"the Neo4j database {database or '(default)'} at {uri} holds data "
                                             "PlanRAG did not load; refusing to clear it (use an empty database)")
                for name in ours:
                    session.run(f"DROP CONSTRAINT {_q(name)} IF EXISTS").consume()
                session.run("MATCH (n) DETACH DELETE n").consume()
                _load(session, data.graph, prefix)
        _loaded[(uri, database)] = data.key
        _reload.discard(data.key)


def forget(key: str) -> None:
    """Make the next open of this content load it into Neo4j again (for timing fresh loads)."""
    with _lock:
        _reload.add(key)
        for where in [w for w, k in _loaded.items() if k == key]:
            del _loaded[where]


def _batches(rows: list) -> list[list]:
    return [rows[i:i + BATCH_ROWS] for i in range(0, len(rows), BATCH_ROWS)]


def _load(session: neo4j.Session, graph: GraphData, prefix: str) -> None:
    """Create the nodes and relationships with UNWIND batches, then the key constraints that mark the load."""
    def write(query: str, rows: list) -> None:
        for batch in _batches(rows):
            session.execute_write(lambda tx: tx.run(query, rows=batch).consume())

    for t in graph.nodes.values():
        write(f"UNWIND $rows AS row CREATE (n:{_q(t.label)}) SET n = row",
              [dict(zip(t.properties, row)) for row in t.rows])
    for r in graph.rels.values():
        src, dst = graph.nodes[r.src], graph.nodes[r.dst]
        write(f"UNWIND $rows AS row MATCH (a:{_q(src.label)} {{{_q(src.key)}: row.s}}), "
              f"(b:{_q(dst.label)} {{{_q(dst.key)}: row.d}}) CREATE (a)-[e:{_q(r.type)}]->(b) SET e = row.p",
              [{"s": row[0], "d": row[1], "p": dict(zip(r.properties, row[2:]))} for row in r.rows])
    for t in graph.nodes.values():
        session.run(f"CREATE CONSTRAINT {_q(prefix + t.label)} IF NOT EXISTS "
                    f"FOR (n:{_q(t.label)}) REQUIRE n.{_q(t.key)} IS UNIQUE").consume()


def plain(value):
    """A driver value as plain JSON-able Python: a node or relationship as a dict of its properties plus
    ``_label`` (labels joined by ':'; a relationship's type), a path as ``{"nodes": [...],
    "relationships": [...]}``, temporal values as ISO strings."""
    if isinstance(value, neo4j.graph.Node):
        return {"_label": ":".join(sorted(value.labels)), **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Relationship):
        return {"_label": value.type, **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Path):
        return {"nodes": plain(value.nodes), "relationships": plain(value.relationships)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (neo4j.time.Date, neo4j.time.DateTime, neo4j.time.Time, neo4j.time.Duration)):
        return value.iso_format()
    return value


def _error(e: Neo4jError, timeout_s: float) -> QueryError:
    code, message = e.code or "", e.message or str(e)
    if "TransactionTimedOut" in code:
        return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it")
    if code.endswith((".AccessMode", ".ForbiddenOnReadOnlyDatabase")) or code == "Neo.ClientError.Security.Forbidden":
        return RefusedWrite(f"refused: the database is read-only ({message})")
    if code.rsplit(".", 1)[-1] in ("SyntaxError", "SemanticError", "ParameterMissing"):
        return QuerySyntaxError(message)
    return QueryError(f"{message} [{code}]" if code else message)


class Neo4jBackend:
    """Read-only queries on one content's graph in Neo4j; safe to share between threads (the driver is)."""

    name = "neo4j"
    language = "cypher"

    def __init__(self, driver: neo4j.Driver, uri: str, database: str | None, data: Database):
        self._driver, self._uri, self._database = driver, uri, database
        self._key, self._graph = data.key, data.graph
        self._closed = False

    def schema_text(self) -> str:
        return schema_text(self._graph)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one Cypher query in a read transaction with the server-side timeout ``timeout_s``."""
        text = prepare(text)
        if self._closed:
            raise BackendUnavailable("this Neo4j backend is closed")
        if _loaded.get((self._uri, self._database)) != self._key:
            raise BackendUnavailable("the Neo4j database now holds another question's graph (opened later); "
                                     "open this question's database again")
        start = time.perf_counter()
        rows, total = [], 0
        try:
            with self._driver.session(database=self._database, default_access_mode=neo4j.READ_ACCESS) as session, \
                    session.begin_transaction(timeout=timeout_s) as tx:
                result = tx.run(text)
                columns = list(result.keys())
                for record in result:
                    if total < row_cap:
                        rows.append([plain(v) for v in record.values()])
                    total += 1
        except Neo4jError as e:
            raise _error(e, timeout_s) from None
        except DriverError as e:
            raise BackendUnavailable(f"Neo4j at {self._uri}: {e}") from None
        return QueryResult(columns, rows, total, time.perf_counter() - start, text)

    def close(self) -> None:
        """Nothing to release per backend: the driver is shared and closed at exit."""
        self._closed = True
