"""Neo4j through the official driver: a thin adapter for a server given by NEO4J_URI / NEO4J_USER /
NEO4J_PASSWORD (any Neo4j-protocol server; the tests use ArcadeDB's, see core.backends.graph_server).

Where the graph goes: into a dedicated database ``planrag-<content key>`` when the server can create one
(Enterprise, with the privilege); otherwise (any failure of CREATE DATABASE) into the server's default
database, cleared and reloaded when another content is needed. The server itself says which graph a database
holds: one marker node ``(:PlanRAGGraph {id: 1})`` with the content ``key``, a ``state`` (loading, ready,
failed), a ``generation`` raised by every load, the loading client's ``owner`` token and its heartbeat
``beat``. A database is cleared only if it is empty or has that marker.

- A load claims the marker in a write transaction (waiting while another client's load is alive), then
  deletes and creates in batches, each batch in a transaction that first checks the claim is still its own,
  and marks the marker ready at the end.
- Every agent query runs in a read transaction that reads the marker before and after the query: it must name
  the query's content, be ready, and keep its generation (a load that started meanwhile changes it), else the
  rows are thrown away, the graph is loaded again and the query runs once more. Within one process a
  readers/writer gate keeps loads and reads of one database apart (a reload and the read after it hold it
  alone). So a process never answers from another question's graph, even when another process loaded one into
  the same database meanwhile.
- Agent transactions are always rolled back (never committed), run in READ_ACCESS sessions with the
  server-side timeout, and are also bounded on the client: past the deadline the task is cancelled and the
  driver kills the connection (a server may ignore the transaction timeout). CALL is limited to known read
  procedures (cypher_dialect.check_neo4j).

The async driver runs on one background event loop thread; the public functions are synchronous.
"""
from __future__ import annotations

import asyncio
import atexit
import threading
import time
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING

import neo4j
import neo4j.graph
import neo4j.time
from neo4j.exceptions import ConstraintError, DriverError, Neo4jError, TransientError

from core.backends import arcadedb
from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, MAX_CELL_CHARS, MAX_RESULT_CHARS,
                                BackendUnavailable, QueryError, QueryResult, QuerySyntaxError, QueryTimeout,
                                RefusedWrite, RowKeeper)
from core.backends.cypher_dialect import check_neo4j, prepare, schema_text
from core.model.graph import GraphData
from core.config.settings import DatabaseSettings

if TYPE_CHECKING:
    from core.model.question import Database

CONNECT_TIMEOUT_S = 2.0
BATCH_ROWS = 5000
CLIENT_GRACE_S = 1.0  # the client-side deadline is the server-side timeout plus this
STALE_S = 120.0  # a load whose heartbeat is older than this is taken to be dead, and may be taken over
LOAD_WAIT_S = 900.0  # how long to wait for another client's live load before giving up
POLL_S = 0.25
ATTEMPTS = 3  # reloads for one query when other processes keep replacing its graph
MARKER = "PlanRAGGraph"
_MARKER_READ = (f"OPTIONAL MATCH (m:{MARKER} {{id: 1}}) "
                "RETURN m.key AS key, m.state AS state, m.generation AS generation")

_lock = threading.Lock()  # guards the module state below
_drivers: dict[tuple[str, str, str], neo4j.AsyncDriver] = {}
_gates: dict[tuple[str, str | None], _Gate] = {}
_reload: set[str] = set()  # content keys to load again even if the server has them (see forget)
_single: set[str] = set()  # URIs of servers that cannot create a database for us (Community, or no privilege)
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


class _Stale(Exception):
    """The database does not hold (or no longer held, during the read) the query's graph."""


class _LostClaim(Exception):
    """Another client took over this load (it took ours for dead)."""


class _Gate:
    """Within this process: reads of one database share it; a load has it alone (and waiting loads go first)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = self._waiting = 0
        self._writing = False

    @contextmanager
    def read(self):
        with self._cond:
            self._cond.wait_for(lambda: not (self._writing or self._waiting))
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not (self._writing or self._readers))
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


def _gate(uri: str, database: str | None) -> _Gate:
    with _lock:
        return _gates.setdefault((uri, database), _Gate())


# --- the event loop and the drivers --------------------------------------------------------------------
def _event_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="planrag-neo4j", daemon=True).start()
        return _loop


def _call(coro):
    """Run a coroutine on the driver's event loop and wait for its result (from any thread but that loop's)."""
    return asyncio.run_coroutine_threadsafe(coro, _event_loop()).result()


async def _new_driver(settings: DatabaseSettings) -> neo4j.AsyncDriver:
    return neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password),
        connection_timeout=CONNECT_TIMEOUT_S, connection_acquisition_timeout=CONNECT_TIMEOUT_S,
        max_transaction_retry_time=CONNECT_TIMEOUT_S)


def _driver(settings: DatabaseSettings) -> neo4j.AsyncDriver:
    key = (settings.neo4j_uri, settings.neo4j_user, settings.neo4j_password)
    with _lock:
        driver = _drivers.get(key)
    if driver is None:
        new = _call(_new_driver(settings))
        with _lock:
            driver = _drivers.setdefault(key, new)
        if driver is not new:  # another thread made one meanwhile
            _call(new.close())
    return driver


@atexit.register
def _close_drivers() -> None:
    if _loop is None:
        return
    for driver in list(_drivers.values()):
        try:
            asyncio.run_coroutine_threadsafe(driver.close(), _loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def unavailable(settings: DatabaseSettings) -> str | None:
    """Why Neo4j cannot be used (NEO4J_URI unset, server unreachable, bad credentials), or None."""
    if not settings.neo4j_uri:
        return "Neo4j: NEO4J_URI is not set (e.g. bolt://localhost:7687, with NEO4J_USER and NEO4J_PASSWORD)"
    try:
        _call(_driver(settings).verify_connectivity())
    except (DriverError, Neo4jError, ValueError, OSError) as e:
        return f"Neo4j at {settings.neo4j_uri} cannot be used: {e}"
    return None


# --- loading ------------------------------------------------------------------------------------------
def open_database(database: Database, settings: DatabaseSettings) -> Neo4jBackend:
    """The question's graph on the Neo4j server (loaded unless the server already holds it), for read-only
    queries."""
    driver, uri = _driver(settings), settings.neo4j_uri
    try:
        target = _call(_target_database(driver, uri, database.key))
        _ensure(driver, settings, target, database)
    except (DriverError, Neo4jError, _LostClaim) as e:
        raise BackendUnavailable(f"cannot load the graph into Neo4j at {uri}: {e}") from None
    return Neo4jBackend(driver, settings, target, database)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


async def _target_database(driver: neo4j.AsyncDriver, uri: str, key: str) -> str | None:
    """A dedicated database for the content when the server allows it, else None (the default database)."""
    if uri in _single:
        return None
    name = f"planrag-{key}"
    try:
        async with driver.session(database="system") as session:
            await (await session.run(f"CREATE DATABASE {_q(name)} IF NOT EXISTS WAIT")).consume()
    except (Neo4jError, DriverError):  # Community, no privilege, a server without CREATE DATABASE or hanging up on it
        _single.add(uri)
        return None
    return name


def _ensure(driver: neo4j.AsyncDriver, settings: DatabaseSettings, database: str | None, data: Database) -> bool:
    """Make the database hold ``data``'s graph unless it already does; whether it loaded it."""
    gate = _gate(settings.neo4j_uri, database)
    force = data.key in _reload
    if not force:
        with gate.read():
            if _call(_holds(driver, database, data.key)):
                return False
    with gate.write():
        loaded = _call(_load_unless_held(driver, database, data, force, settings))
    _reload.discard(data.key)
    return loaded


async def _holds(driver: neo4j.AsyncDriver, database: str | None, key: str) -> bool:
    async with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS) as session:
        record = await (await session.run(_MARKER_READ)).single()
    return record["key"] == key and record["state"] == "ready"


async def _load_unless_held(driver: neo4j.AsyncDriver, database: str | None, data: Database, force: bool,
                            settings: DatabaseSettings) -> bool:
    token, deadline = uuid.uuid4().hex, time.monotonic() + LOAD_WAIT_S
    async with driver.session(database=database) as session:
        await (await session.run(f"CREATE CONSTRAINT planrag_marker IF NOT EXISTS "
                                 f"FOR (m:{MARKER}) REQUIRE m.id IS UNIQUE")).consume()
        while True:
            try:
                verdict = await session.execute_write(_claim, data.key, token, force)
            except (TransientError, ConstraintError):  # another client's claim at the same moment (a server may
                verdict = "wait"  # report two MERGEs of the marker as a clash on its unique id)
            if verdict != "wait":
                break
            if time.monotonic() > deadline:
                raise BackendUnavailable(f"another client has been loading a graph into the Neo4j database "
                                         f"{database or '(default)'} for over {LOAD_WAIT_S:g} s")
            await asyncio.sleep(POLL_S)
        if verdict == "ready":
            return False
        try:
            await _load(session, data.graph, token, settings, database)
        except BaseException:
            try:  # let the next client load at once instead of waiting for this load to go stale
                await (await session.run(f"MATCH (m:{MARKER} {{id: 1}}) WHERE m.owner = $token "
                                         "SET m.state = 'failed'", token=token)).consume()
            except Exception:  # noqa: BLE001 - the load's own error is the one to report
                pass
            raise
    return True


async def _claim(tx: neo4j.AsyncManagedTransaction, key: str, token: str, force: bool) -> str:
    """``ready`` (the graph is there), ``wait`` (another client's live load) or ``claimed`` (ours to load)."""
    def verdict(record) -> str | None:
        if record["state"] == "ready" and record["key"] == key and not force:
            return "ready"
        if record["state"] == "loading" and time.time() - (record["beat"] or 0) < STALE_S:
            return "wait"
        return None

    marker = await (await tx.run(f"OPTIONAL MATCH (m:{MARKER} {{id: 1}}) RETURN m IS NOT NULL AS found, "
                                 "m.key AS key, m.state AS state, m.beat AS beat")).single()
    if not marker["found"] and await (await tx.run(f"MATCH (n) WHERE NOT n:{MARKER} RETURN n LIMIT 1")).peek():
        raise BackendUnavailable("the Neo4j database holds data PlanRAG did not load; refusing to clear it "
                                 "(use an empty database)")
    if verdict(marker):  # decided without writing (a waiting client must not slow the loading one down)
        return verdict(marker)
    # Setting a property first takes the marker's write lock, so what is read next is not stale.
    record = await (await tx.run(f"MERGE (m:{MARKER} {{id: 1}}) SET m.claim = $token "
                                 "RETURN m.key AS key, m.state AS state, m.beat AS beat", token=token)).single()
    if verdict(record):
        return verdict(record)
    await (await tx.run(f"MATCH (m:{MARKER} {{id: 1}}) SET m.key = $key, m.state = 'loading', m.owner = $token, "
                        "m.beat = $now, m.generation = coalesce(m.generation, 0) + 1",
                        key=key, token=token, now=time.time())).consume()
    return "claimed"


async def _step(tx: neo4j.AsyncManagedTransaction, token: str, query: str, rows: list | None) -> int:
    """One batch of a load, after checking (and refreshing) the claim; the count the query returns."""
    held = await (await tx.run(f"MATCH (m:{MARKER} {{id: 1}}) WHERE m.owner = $token AND m.state = 'loading' "
                               "SET m.beat = $now RETURN count(m) AS n", token=token, now=time.time())).single()
    if not held["n"]:
        raise _LostClaim("another client took over this load")
    record = await (await tx.run(query, rows=rows, token=token)).single()
    return record[0] if record else 0


def _batches(rows: list) -> list[list]:
    return [rows[i:i + BATCH_ROWS] for i in range(0, len(rows), BATCH_ROWS)]


async def _load(session: neo4j.AsyncSession, graph: GraphData, token: str, settings: DatabaseSettings,
                database: str | None) -> None:
    """Clear the database (but the marker) and free the names the graph needs, index each label's key, create the
    nodes and relationships with UNWIND batches, then mark the graph ready."""
    async def write(query: str, rows: list | None = None) -> int:
        return await session.execute_write(_step, token, query, rows)

    while await write(f"MATCH (n) WHERE NOT n:{MARKER} WITH n LIMIT {BATCH_ROWS} DETACH DELETE n "
                      "RETURN count(*)"):
        pass
    clashes = await _free_names(session, graph, settings, database)
    try:
        await _create(session, graph, write)
    except Neo4jError:
        if clashes:  # most likely the cause: say so and what to do
            raise BackendUnavailable(
                f"the graph database keeps {', '.join(clashes)} from a graph loaded before, as a label where this "
                "graph needs a relationship type or the reverse, and this server (ArcadeDB?) keeps both in one "
                "namespace: set ARCADEDB_COMMAND_URL to its HTTP command endpoint (e.g. "
                "http://localhost:2480/api/v1/command/DATABASE) for the workbench to drop them, give each scenario an "
                "empty database, or use the local graph server (python -m core graph-server start)") from None
        raise
    await write(f"MATCH (m:{MARKER} {{id: 1}}) WHERE m.owner = $token SET m.state = 'ready' RETURN count(m)")


async def _create(session: neo4j.AsyncSession, graph: GraphData, write) -> None:
    """Index each label's key, then create the nodes and relationships in UNWIND batches (``write`` runs one)."""
    for t in graph.nodes.values():
        try:  # only speeds up the relationship batches; an equivalent index or constraint may already exist
            await (await session.run(f"CREATE INDEX {_q(f'planrag_{t.label}_{t.key}')} IF NOT EXISTS "
                                     f"FOR (n:{_q(t.label)}) ON (n.{_q(t.key)})")).consume()
        except Neo4jError:
            pass
    for t in graph.nodes.values():
        for batch in _batches([dict(zip(t.properties, row)) for row in t.rows]):
            await write(f"UNWIND $rows AS row CREATE (n:{_q(t.label)}) SET n = row RETURN count(*)", batch)
    for r in graph.rels.values():
        src, dst = graph.nodes[r.src], graph.nodes[r.dst]
        rows = [{"s": row[0], "d": row[1], "p": dict(zip(r.properties, row[2:]))} for row in r.rows]
        for batch in _batches(rows):
            await write(f"UNWIND $rows AS row MATCH (a:{_q(src.label)} {{{_q(src.key)}: row.s}}), "
                        f"(b:{_q(dst.label)} {{{_q(dst.key)}: row.d}}) CREATE (a)-[e:{_q(r.type)}]->(b) "
                        "SET e = row.p RETURN count(*)", batch)


async def _free_names(session: neo4j.AsyncSession, graph: GraphData, settings: DatabaseSettings,
                      database: str | None) -> list[str]:
    """In the cleared database, drop the left-over relationship types named like one of the graph's labels and the
    node labels named like one of its relationship types, which a server with one namespace for both (ArcadeDB)
    needs to create the graph. Returns the names it could not drop (harmless on Neo4j, with labels and types
    apart)."""
    labels = {r[0] async for r in await session.run("CALL db.labels()")}
    types = {r[0] async for r in await session.run("CALL db.relationshipTypes()")}
    clashes = sorted((set(graph.nodes) & types) | (set(graph.rels) & (labels - {MARKER})))
    if not clashes:
        return []
    try:
        dropped = await asyncio.to_thread(arcadedb.drop_types, settings, database, clashes)
    except OSError as e:
        raise BackendUnavailable(f"cannot free the names {', '.join(clashes)} in the graph database: {e}") from None
    return [] if dropped else clashes


def forget(key: str) -> None:
    """Make the next open of this content load it into Neo4j again (for timing fresh loads)."""
    with _lock:
        _reload.add(key)


# --- queries ------------------------------------------------------------------------------------------
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


def _timeout(timeout_s: float) -> QueryTimeout:
    return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it")


def _error(e: Neo4jError, timeout_s: float) -> QueryError:
    code, message = e.code or "", e.message or str(e)
    if "TransactionTimedOut" in code:
        return _timeout(timeout_s)
    if code.endswith((".AccessMode", ".ForbiddenOnReadOnlyDatabase")) or code == "Neo.ClientError.Security.Forbidden":
        return RefusedWrite(f"refused: the database is read-only ({message})")
    if code.rsplit(".", 1)[-1] in ("SyntaxError", "SemanticError", "ParameterMissing"):
        return QuerySyntaxError(message)
    return QueryError(f"{message} [{code}]" if code else message)


class Neo4jBackend:
    """Read-only queries on one content's graph in Neo4j; safe to share between threads."""

    name = "neo4j"
    language = "cypher"

    def __init__(self, driver: neo4j.AsyncDriver, settings: DatabaseSettings, database: str | None, data: Database):
        self._driver, self._settings, self._database, self._data = driver, settings, database, data
        self._uri = settings.neo4j_uri
        self._closed = False

    def schema_text(self) -> str:
        return schema_text(self._data.graph)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one Cypher query in a read transaction that is rolled back, bounded by ``timeout_s`` on the
        server and (plus CLIENT_GRACE_S) on the client. Reloads the graph first when the database no longer
        holds it."""
        text = prepare(text)
        check_neo4j(text)
        if self._closed:
            raise BackendUnavailable("this Neo4j backend is closed")
        gate, notes = _gate(self._uri, self._database), []
        try:
            with gate.read():
                try:
                    return _call(self._bounded(text, timeout_s, row_cap, notes))
                except _Stale:
                    pass
            notes.append("the database held another graph (loaded by another question meanwhile); "
                         "this question's graph was loaded again")
            for _ in range(ATTEMPTS):
                # Load and read with the gate held alone, so this process's other questions cannot take the
                # database back in between (two threads would otherwise reload it in turn for ever).
                with gate.write():
                    _call(_load_unless_held(self._driver, self._database, self._data, False, self._settings))
                    try:
                        return _call(self._bounded(text, timeout_s, row_cap, notes))
                    except _Stale:  # another process replaced it meanwhile
                        pass
        except Neo4jError as e:
            raise _error(e, timeout_s) from None
        except (DriverError, _LostClaim) as e:
            raise BackendUnavailable(f"Neo4j at {self._uri}: {e}") from None
        raise BackendUnavailable("another client keeps replacing the graph in this Neo4j database (one question's "
                                 "graph at a time fits in it); try again, or use a server of your own")

    async def _bounded(self, text: str, timeout_s: float, row_cap: int, notes: list[str]) -> QueryResult:
        start = time.perf_counter()
        try:
            columns, rows, total = await asyncio.wait_for(self._read(text, timeout_s, row_cap),
                                                          timeout_s + CLIENT_GRACE_S)
        except asyncio.TimeoutError:
            raise QueryTimeout(f"{_timeout(timeout_s)} (by the client: the server let it run past its "
                               "timeout)") from None
        return QueryResult(columns, rows, total, time.perf_counter() - start, text, list(notes)).capped(
            MAX_CELL_CHARS, MAX_RESULT_CHARS)

    async def _read(self, text: str, timeout_s: float, row_cap: int) -> tuple[list[str], list[list], int]:
        """The query's columns, first ``row_cap`` rows and row count, read between two checks of the marker,
        in a transaction that is always rolled back (on cancellation the driver drops the connection)."""
        async with self._driver.session(database=self._database,
                                        default_access_mode=neo4j.READ_ACCESS) as session:
            tx, before = await session.begin_transaction(timeout=timeout_s), None
            try:
                before = await (await tx.run(_MARKER_READ)).single()
                if before["key"] != self._data.key or before["state"] != "ready":
                    raise _Stale
                result = await tx.run(text)
                columns, kept = list(result.keys()), RowKeeper(row_cap, plain)
                async for record in result:
                    kept.add(record.values())
                after = await (await tx.run(_MARKER_READ)).single()
                if tuple(after.values()) != tuple(before.values()):
                    raise _Stale
            except asyncio.CancelledError:
                tx.cancel()
                raise
            except BaseException as e:
                if not tx.closed():
                    try:
                        await tx.rollback()
                    except (Neo4jError, DriverError):  # the query's own error is the one to report
                        pass
                if isinstance(e, Neo4jError) and before is not None and await self._replaced(before):
                    raise _Stale from None  # the query failed on a graph being replaced under it
                raise
            await tx.rollback()
        return columns, kept.rows, kept.total

    async def _replaced(self, before) -> bool:
        """Whether the marker differs from ``before`` (another client started a load since)."""
        try:
            async with self._driver.session(database=self._database,
                                            default_access_mode=neo4j.READ_ACCESS) as session:
                now = await (await session.run(_MARKER_READ)).single()
        except (Neo4jError, DriverError):
            return False
        return tuple(now.values()) != tuple(before.values())

    def close(self) -> None:
        """Nothing to release per backend: the driver is shared and closed at exit."""
        self._closed = True
