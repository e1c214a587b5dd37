"""The embedded engines' side of a query, as run inside a worker process (core.backends.worker): SQLite and
Ladybug opened read-only, each query bounded by its deadline, its memory and the cell cap, and answered as
plain JSON-able rows. Nothing here runs in the app's process but the error mapping.

SQLite: the authorizer allows reading and an allow-list of ordinary scalar, aggregate and window functions (no
``fts3_tokenizer``, ``load_extension``, ``zeroblob`` ...); a progress handler stops a statement at its deadline
between VM steps, and the length limit bounds what one step (one function call) can build.
Ladybug: opened read-only with a bounded buffer pool; its query timeout, then the worker's kill, bound time.
"""
from __future__ import annotations

import datetime
import decimal
import re
import sqlite3
import time
import uuid
from itertools import islice
from pathlib import Path

from core.backends.base import (MAX_CELL_CHARS, MAX_RESULT_CHARS, BackendUnavailable, QueryError, QueryResult,
                                QueryTimeout, RefusedWrite, QuerySyntaxError)

# --- SQLite -------------------------------------------------------------------------------------------------
#: Longest string or blob one SQLite value may be (SQLITE_LIMIT_LENGTH): bounds the work of one function call.
SQLITE_MAX_LENGTH = 1_000_000
#: SQLite's own heap limit in a worker (sorts and temporary b-trees are kept in memory, within it).
SQLITE_HEAP = 512 << 20
PROGRESS_STEPS = 1000  # VM steps between two checks of the deadline
#: Authorizer actions an agent query may take; everything else (writes, DDL, ATTACH, PRAGMA ...) is denied.
_ALLOWED = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
#: Functions an agent query may call (what sqlglot's MySQL translation and ordinary analysis use).
SQLITE_FUNCTIONS = frozenset("""
    abs avg count max min sum total group_concat string_agg
    coalesce ifnull iif nullif length octet_length lower upper ltrim rtrim trim substr substring replace instr
    round printf format char unicode hex unhex quote typeof like glob concat concat_ws likely unlikely likelihood
    random
    date time datetime julianday strftime unixepoch timediff
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log2 log10 mod pi pow
    power radians sign sin sinh sqrt tan tanh trunc
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
    json json_extract json_array json_object json_array_length json_type json_valid json_quote json_group_array
    json_group_object
    """.split())


def _authorize(action: int, arg1, arg2, *_args) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if (arg2 or "").lower() in SQLITE_FUNCTIONS else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


class SQLiteSession:
    """One read-only connection to a SQLite file, inside a worker; ``lock_down()`` is called once the file is
    open (and the worker may open no other file)."""

    def __init__(self, path: str, lock_down):
        con = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True, isolation_level=None)
        con.execute(f"PRAGMA hard_heap_limit = {SQLITE_HEAP}")
        con.execute("PRAGMA temp_store = MEMORY")
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_LENGTH)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the schema now, before the lock-down
        lock_down()
        con.set_authorizer(_authorize)
        self._con, self._deadline = con, 0.0
        con.set_progress_handler(self._progress, PROGRESS_STEPS)

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def run(self, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
        start = time.perf_counter()
        self._deadline = time.monotonic() + timeout_s
        try:
            cur = self._con.execute(sql)
            rows = [list(r) for r in islice(cur, row_cap)]
            total = len(rows) + sum(1 for _ in cur)
            columns = [d[0] for d in cur.description or ()]
        except sqlite3.Error as e:
            raise sqlite_error(e, sql, timeout_s) from None
        except MemoryError:  # SQLite's heap limit (SQLITE_NOMEM)
            raise QueryError(f"the query needs more than the {SQLITE_HEAP >> 20} MB memory limit; narrow it") from None
        return QueryResult(columns, rows, total, time.perf_counter() - start, executed=sql).capped(
            MAX_CELL_CHARS, MAX_RESULT_CHARS)


def sqlite_error(e: sqlite3.Error, sql: str, timeout_s: float) -> QueryError:
    """The QueryError for a SQLite error."""
    code = getattr(e, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_INTERRUPT:
        return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; make it cheaper "
                            "(fewer joins, filter early, aggregate)")
    if code == sqlite3.SQLITE_NOMEM:
        return QueryError(f"the query needs more than the {SQLITE_HEAP >> 20} MB memory limit; narrow it")
    if code == sqlite3.SQLITE_TOOBIG:
        return QueryError(f"a value would be longer than {SQLITE_MAX_LENGTH:,} bytes; narrow the query")
    function = re.search(r"not authorized to use function: (\w+)", str(e))
    if function:
        return RefusedWrite(f"refused: the function {function.group(1)} is not available here; use ordinary SQL "
                            "functions (aggregates, string, date and math functions)")
    if code in (sqlite3.SQLITE_AUTH, sqlite3.SQLITE_READONLY) or "not authorized" in str(e):
        return RefusedWrite(f"refused by the read-only connection ({e}); send one SELECT query using ordinary "
                            "functions")
    message = f"SQLite: {e}"  # the query as run goes to the analyst only (QueryError.executed)
    if "syntax error" in str(e) or "incomplete input" in str(e):
        return QuerySyntaxError(message)
    return QueryError(message)


# --- Ladybug ------------------------------------------------------------------------------------------------
BUFFER_POOL = 256 << 20  # bytes of page cache per open database (the default is 80% of the machine's memory)
MAX_DB_SIZE = 1 << 30  # address space each open reserves; the default 8 TB runs out after ~15 open databases


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


def ladybug_error(message: str, timeout_s: float) -> QueryError:
    """The QueryError for a Ladybug error message."""
    if message.startswith("Interrupted"):
        return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it "
                            "(bound variable-length patterns, avoid cartesian products, aggregate early)")
    if message.startswith(("Parser exception", "Binder exception", "Catalog exception")):
        return QuerySyntaxError(message)
    if "Cannot execute write operations in a read-only database" in message:
        return RefusedWrite(f"refused: the database is read-only ({message})")
    if message.startswith("Buffer manager exception"):
        return QueryError(f"the query needs more than the {BUFFER_POOL >> 20} MB memory limit; narrow it ({message})")
    if "bad_alloc" in message:
        return QueryError(f"the query needs more memory than its engine may use; narrow it ({message})")
    return QueryError(message)


class LadybugSession:
    """One read-only Ladybug database and connection, inside a worker; ``lock_down(folder)`` is called before
    the engine starts (the worker may then read only the files in the database's folder)."""

    def __init__(self, path: str, lock_down):
        import ladybug
        from ladybug import _backend

        _backend.get_pybind_module()  # imported lazily otherwise: now, before the lock-down
        # before the engine starts its threads, so that they are locked down too; it may read its own folder
        lock_down(str(Path(path).parent))
        try:
            self._db = ladybug.Database(path, read_only=True, buffer_pool_size=BUFFER_POOL, max_db_size=MAX_DB_SIZE)
        except RuntimeError as e:
            raise BackendUnavailable(f"cannot open the Ladybug database {path}: {e}") from None
        self._conn = ladybug.Connection(self._db)
        self._conn.execute("RETURN 1").close()

    def run(self, text: str, timeout_s: float, row_cap: int) -> QueryResult:
        self._conn.set_query_timeout(max(1, round(timeout_s * 1000)))
        start = time.perf_counter()
        try:
            result = self._conn.execute(text)
        except RuntimeError as e:
            raise ladybug_error(str(e), timeout_s) from None
        try:
            total = result.get_num_tuples()
            rows = [plain(result.get_next()) for _ in range(min(total, row_cap))]
            columns = result.get_column_names()
        finally:
            result.close()
        return QueryResult(columns, rows, total, time.perf_counter() - start, executed=text).capped(
            MAX_CELL_CHARS, MAX_RESULT_CHARS)


SESSIONS = {"sqlite": SQLiteSession, "ladybug": LadybugSession}
