"""One store API, two engines: a store's ``Database`` is a SQLite file (the embedded default, opened by
core.store.sqlite.open_sqlite) or the team store, a PostgreSQL database named by a ``postgresql://`` URL
(``PLANRAG_DATABASE_URL``; psycopg 3 with a connection pool per process). Stores write one SQL for both: ``?``
placeholders, ``ON CONFLICT`` upserts (``upsert``), ``IS NOT DISTINCT FROM``; the differences are handled here.

The team store's schema is Alembic's (core/store/migrations, ``python -m core db upgrade``); a store opened on a
schema that is behind this code's raises SchemaBehind saying so. SQLite files set up their own tables, as before.
Connections never prepare statements (``prepare_threshold=None``): a PgBouncer in transaction mode in front of
the server would hand a prepared statement's next use to another server connection.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from core.config import home
from core.config import settings as core_settings
from core.config.secrets import scrub
from core.store.sqlite import open_sqlite

T = TypeVar("T")

#: The Alembic revision this code's team-store schema is at (core/store/migrations/versions; a test keeps them equal).
SCHEMA_HEAD = "0005"
_pools: dict[tuple, object] = {}
_checked: set[str] = set()
_pools_lock = threading.Lock()


class SchemaBehind(home.HomeError):
    """The team store's schema is not the one this code needs (never upgraded, or upgraded by older code)."""


def is_url(target) -> bool:
    return isinstance(target, str) and target.split("://", 1)[0] in ("postgresql", "postgres")


def location(path: str | Path) -> str | Path:
    """Where the store whose embedded file is ``path`` lives: the team store's URL when ``PLANRAG_DATABASE_URL`` is
    set (everything then lives there), else ``path`` (a URL given stays as it is)."""
    if is_url(path):
        return path
    return core_settings.database_url() or Path(path)


def shown(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


POOL_MAX_ENV = "PLANRAG_DB_POOL_MAX"


def connect_kwargs() -> dict:
    """psycopg connection options every team-store connection uses: no server-side prepared statements (PgBouncer);
    the process named (``planrag HOST:PID``) in the server's ``pg_stat_activity``, to count connections per process."""
    return {"prepare_threshold": None, "application_name": f"planrag {socket.gethostname()}:{os.getpid()}"[:63]}


def pool_max() -> int:
    """The most connections one of a process's store pools opens (``PLANRAG_DB_POOL_MAX``, default 20)."""
    value = os.environ.get(POOL_MAX_ENV, "20")
    if not value.isdigit() or int(value) < 1:
        raise home.HomeError(f"{POOL_MAX_ENV}={value!r} is not a number of connections (1 or more)")
    return int(value)


#: How long one round of a pool's attempts to reconnect to a store that went away lasts: psycopg_pool backs its
#: attempts off (1, 2, 4 s ...) within a round and then gives up (its default round, 300 s, spaces them up to 128 s
#: apart: a store back after a long outage was reconnected to minutes late, and after 300 s not at all until asked).
#: Here a round that gave up starts the next at once (pool_options), so attempts stay at most a few seconds apart
#: and a store that is back is reconnected to within seconds, whatever the outage's length.
RECONNECT_S = 10.0
#: How long a store's request waits for a connection before it counts the store as away (is_lost: said, waited for
#: and tried again by whoever made it; psycopg_pool's default is 30 s, all that time without a word). A connection is
#: free or opened within milliseconds otherwise: the stores' transactions are short.
WAIT_S = 5.0


def _next_round(found):
    """A new round of attempts to reconnect (psycopg_pool's own way to let a pool with no connection grow); for an
    asyncio pool, the coroutine its caller awaits."""
    return found.check()


def pool_options() -> dict:
    """What every pool to the team store is given (this module's and the job queue's, threaded or asyncio): rounds
    of reconnection of RECONNECT_S, one after the other for as long as the store is away; and the pools' every
    failed attempt to reconnect, a warning each, kept out of the log (the outage is said once instead, by whoever
    waits for the store)."""
    import logging

    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    return {"reconnect_timeout": RECONNECT_S, "reconnect_failed": _next_round}


def pool(url: str, *, checkpoints: bool = False):
    """This process's connection pool to ``url`` (one per URL and kind; a forked process opens its own).
    ``checkpoints``: the pool LangGraph's PostgresSaver wants (autocommit, rows as dicts)."""
    from psycopg.rows import dict_row  # optional: the team store's driver, loaded only in team mode
    from psycopg_pool import ConnectionPool  # optional: as above

    key = (url, checkpoints, os.getpid())
    with _pools_lock:
        found = _pools.get(key)
        if found is None:
            kwargs = {**connect_kwargs(), **({"autocommit": True, "row_factory": dict_row} if checkpoints else {})}
            # each connection is checked as it is handed out: after a server restart the pool reconnects
            found = _pools[key] = ConnectionPool(url, kwargs=kwargs, min_size=1, max_size=pool_max(), open=True,
                                                 check=ConnectionPool.check_connection,
                                                 name="checkpoints" if checkpoints else "store", timeout=WAIT_S,
                                                 **pool_options())
    return found


def connection_errors() -> tuple[type[Exception], ...]:
    """The errors of a team store that cannot be reached (a server restarting, the network away)."""
    import psycopg  # optional: the team store's driver, loaded only in team mode
    from psycopg_pool import PoolTimeout  # optional: as above

    return psycopg.OperationalError, PoolTimeout


def is_lost(error: BaseException | None) -> bool:
    """Whether ``error`` (or what caused it) says the team store cannot be reached: a failure of the
    infrastructure, not of the work that met it (which is then retried, never ended by it)."""
    if "psycopg" not in sys.modules:  # the embedded stores: never
        return False
    kinds = connection_errors()
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kinds):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def lost_reason(error: BaseException) -> str:
    """What the driver said of a store that cannot be reached (the first line of the first cause; no password)."""
    while error.__cause__ is not None:  # a wrapper's message ("Database error.") says less than its cause
        error = error.__cause__
    return scrub((str(error).strip().splitlines() or [type(error).__name__])[0])


GRACE_S = 600.0  # how long a process waits for a team store that cannot be reached before it gives up
BACK_EVERY_S = 2.0  # how often it looks whether the store is back


def unreachable(url: str, wait_s: float = BACK_EVERY_S) -> Exception | None:
    """Why the team store at ``url`` cannot be reached by this process now (None when it can): each of its pools to
    it hands out a connection within ``wait_s`` seconds (a pool reconnects at its own pace after an outage), or,
    with none, the server takes a connection within about that."""
    import psycopg  # optional: the team store's driver

    with _pools_lock:
        mine = [p for (u, _, pid), p in _pools.items() if u == url and pid == os.getpid()]
    try:
        if not mine:
            with psycopg.connect(url, connect_timeout=max(1, round(wait_s)), **connect_kwargs()):
                return None
        for found in mine:
            with found.connection(timeout=wait_s):
                pass
    except connection_errors() as e:
        return e
    return None


def back(url: str) -> bool:
    """Whether the team store at ``url`` is back for this process (``unreachable`` within BACK_EVERY_S seconds)."""
    return unreachable(url) is None


def wait_until_back(url: str, grace_s: float = GRACE_S) -> bool:
    """Wait until the team store at ``url`` is ``back`` (looked at every BACK_EVERY_S seconds); False when it was
    not within ``grace_s`` seconds."""
    deadline = time.monotonic() + grace_s
    while not back(url):
        if time.monotonic() > deadline:
            return False
        time.sleep(BACK_EVERY_S)
    return True


def patiently(do: Callable[[], T], where: str | Path, say: Callable[[str], None]) -> T:
    """``do()``; whenever it finds the team store at ``where`` away, said (``say``), waited for (GRACE_S) and done
    again, so ``do`` must be safe to repeat (reads, or writes of the same files). An embedded store: ``do()`` alone."""
    while True:
        try:
            return do()
        except Exception as e:
            if not is_lost(e):
                raise
            say(f"the team store cannot be reached ({lost_reason(e)}); waiting for it")
            if not wait_until_back(str(where)):
                raise


def close_pools(url: str | None = None) -> None:
    """Close this process's pools (to ``url``, or all)."""
    with _pools_lock:
        for key in [k for k in _pools if url is None or k[0] == url]:
            if key[2] == os.getpid():
                _pools[key].close()
            del _pools[key]
        _checked.difference_update({url} if url else set(_checked))


def current_revision(url: str) -> str | None:
    """The Alembic revision the team store is at; None when it has no schema yet."""
    import psycopg  # optional: the team store's driver

    try:
        with psycopg.connect(url, **connect_kwargs()) as con:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    except psycopg.OperationalError as e:
        raise home.HomeError(f"cannot reach the team store {shown(url)} (PLANRAG_DATABASE_URL): "
                             f"{str(e).strip()}") from None
    return row[0] if row else None


#: procrastinate's migration files (``NN.NN.NN_NN_name.sql``, applied in the order of their names); None: those of
#: the installed procrastinate (found without importing it).
QUEUE_MIGRATIONS: Path | None = None
#: The job queue's level in a store whose queue tables were made before the level was recorded (schema 0004): the
#: earlier code created them once, from procrastinate 3.10.0's schema, whose last migration this is.
QUEUE_BASELINE = "03.04.00_50_post_add_retry_failed_job_procedure"


def queue_migrations() -> list[Path]:
    """procrastinate's migration files, in the order they apply (QUEUE_MIGRATIONS)."""
    import importlib.util

    folder = QUEUE_MIGRATIONS
    if folder is None:
        spec = importlib.util.find_spec("procrastinate")
        if spec is None or not spec.submodule_search_locations:
            raise home.HomeError("procrastinate is not installed (pip install -r requirements.txt)")
        folder = Path(next(iter(spec.submodule_search_locations))) / "sql" / "migrations"
    return sorted(folder.glob("*.sql"), key=lambda p: p.name)


def queue_head() -> str:
    """The job queue's level this code needs: its last migration's name (without .sql)."""
    return queue_migrations()[-1].stem


def queue_level(url: str) -> str | None:
    """The job queue's level of the team store at ``url`` (queue_schema; QUEUE_BASELINE for queue tables made before
    it was recorded); None when it has no queue tables."""
    import psycopg  # optional: the team store's driver

    with psycopg.connect(url, **connect_kwargs()) as con:
        if not con.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()[0]:
            return None
        row = (con.execute("SELECT migration FROM queue_schema").fetchone()
               if con.execute("SELECT to_regclass('queue_schema') IS NOT NULL").fetchone()[0] else None)
    return row[0] if row else QUEUE_BASELINE


def check_schema(url: str) -> None:
    """SchemaBehind unless the team store at ``url`` has this code's schema and the job queue's tables at this code's
    procrastinate level (checked once per process)."""
    if url in _checked:
        return
    at = current_revision(url)
    if at == SCHEMA_HEAD:
        level, needed = queue_level(url), queue_head()
        if level != needed:
            at = (f"{at} without the job queue's tables" if level is None else
                  f"{at} with the job queue at {level} (this code's procrastinate needs {needed})")
    if at != SCHEMA_HEAD:
        state = "has no schema yet" if at is None else f"is at schema revision {at}"
        raise SchemaBehind(f"The team store {shown(url)} {state}; this version of the workbench needs revision "
                           f"{SCHEMA_HEAD}. Run: python -m core db upgrade")
    _checked.add(url)


def check() -> None:
    """At start-up (app and commands): the team store's schema, when one is configured."""
    url = core_settings.database_url()
    if url:
        check_schema(url)


class _Postgres:
    """A psycopg connection taking the stores' SQL: ``?`` placeholders become ``%s`` (a literal ``%`` is doubled)."""

    def __init__(self, con):
        self._con = con

    @property
    def connection(self):
        """The psycopg connection itself (for another library's statements in the same transaction)."""
        return self._con

    def execute(self, sql: str, params=()):
        return self._con.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(params))

    def close(self) -> None:
        self._con.close()


def session(url: str) -> _Postgres:
    """A team-store connection of its own, outside the pools, in autocommit, taking the stores' SQL: for what lasts
    as long as its session, such as an advisory lock (``close()`` ends it)."""
    import psycopg  # optional: the team store's driver, loaded only in team mode

    return _Postgres(psycopg.connect(url, autocommit=True, **connect_kwargs()))


class Database:
    """A store's database: ``target`` is a SQLite file's path or a ``postgresql://`` URL; ``what`` names it in
    messages; ``setup(connection)`` makes a SQLite file's tables (the team store's come from its migrations)."""

    def __init__(self, target: str | Path, what: str, setup: Callable[[sqlite3.Connection], None] | None = None):
        self.what = what
        self.team = is_url(target)
        self._local = threading.local()
        if self.team:
            self.url, self.path = str(target), None
            check_schema(self.url)
            self._pool = pool(self.url)
        else:
            self.url, self.path = None, Path(target)
            self._local.con = open_sqlite(self.path, what, setup, timeout=30)

    @property
    def label(self) -> str:
        """Where it is, for messages (a URL without its password)."""
        return shown(self.url) if self.team else str(self.path)

    @property
    def engine(self) -> str:
        return "postgresql" if self.team else "sqlite"

    def _sqlite(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and kept (reopening per operation costs a WAL checkpoint
        each time)."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = open_sqlite(self.path, self.what, timeout=30)
            con.execute("PRAGMA synchronous = NORMAL")  # durable across a process crash in WAL mode
        return con

    @contextmanager
    def transaction(self) -> Iterator:
        """A connection whose ``execute(sql, params)`` takes the stores' SQL, in one transaction: committed at the
        end, rolled back on an error."""
        if self.team:
            with self._pool.connection() as con:  # commits at the end, rolls back on an error
                yield _Postgres(con)
        else:
            con = self._sqlite()
            with con:
                yield con

    def rows(self, sql: str, params=()) -> list[tuple]:
        """The rows of one query."""
        with self.transaction() as con:
            return con.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close this thread's SQLite connection (the team store's pool stays for the process)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


def upsert(table: str, columns: tuple[str, ...], key: tuple[str, ...], replace: bool = True) -> str:
    """``INSERT`` of ``columns`` into ``table`` that replaces the row with the same ``key`` (``replace``) or keeps
    it; the same SQL on both engines."""
    marks = ", ".join("?" * len(columns))
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT ({', '.join(key)}) DO "
    rest = [c for c in columns if c not in key]
    if not replace or not rest:
        return head + "NOTHING"
    return head + "UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in rest)
