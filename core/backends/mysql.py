"""The MySQL/MariaDB backend (pymysql), for the server given by ``DatabaseSettings.mysql_url``.

Each database content is loaded once per server into its own database ``dqa_<key>``; a row in
``planrag_meta.loaded``, committed in the same transaction as the data, marks a completed load, so a later
open (in any process) skips loading. FLOAT columns are created as DOUBLE: MySQL's FLOAT is single precision
and would change the stored values; strings use utf8mb4 with the case-insensitive ``utf8mb4_unicode_ci``.

Agents query as a reader user made for each opened backend (``planrag_q_<random>``, hosts ``%`` and
``localhost``, a random password kept in this process only), granted SELECT on that one ``dqa_<key>`` database
and one connection: the server itself keeps it from other questions' databases and from other readers' sessions
(their SQL in the processlist, ``KILL``). It is dropped when the backend closes; readers left by a killed process
are dropped by the next open on the same machine (``planrag_meta.readers`` lists them with the process that made
them; a notice says so), those of another machine once idle for a day. Each query runs in a
read-only transaction with a server-side statement time limit, and the client stops waiting at that limit plus
``QUERY_GRACE_S`` (then kills the query with the loading account), so a statement that escapes the server's limit
or a server that stops answering still ends in time. The project's own server locks are named with a random salt
kept in ``planrag_meta.secret`` (readable by the loading account only), so a reader cannot take them; lock
functions, executable comments and optimizer hints are refused before a query is sent.
"""
from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.connections
import pymysql.cursors
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from core.backends import sql_dialect
from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, MAX_CELL_CHARS, MAX_RESULT_CHARS,
                                BackendUnavailable, QueryError, QueryResult, QuerySyntaxError, QueryTimeout,
                                RefusedWrite, RowKeeper)
from core.model.question import Database
from core.config.settings import DatabaseSettings
from core.config import home

META = "planrag_meta"
READER_PREFIX = "planrag_q_"
LEGACY_READER = "planrag_reader"  # the one shared reader of earlier versions: see drop_legacy_reader
COLLATION = "utf8mb4_unicode_ci"
LOADER_VERSION = 1  # bump when the loaded layout changes, so older loads are redone

CONNECT_TIMEOUT_S = 5.0  # TCP connect and login handshake
ADMIN_READ_TIMEOUT_S = 120.0  # one statement of the loading account (a table's rows, a lock wait of 60 s)
QUERY_GRACE_S = 2.0  # how long past its time limit the client waits for a query's answer
SESSION_MEMORY_BYTES = 256 * 1024 * 1024  # MariaDB: what one reader's session may allocate on the server
STALE_READER_S = 24 * 3600  # a reader without a session for this long is dropped

_TIMEOUT_CODES = {1969, 3024}  # MariaDB max_statement_time, MySQL MAX_EXECUTION_TIME
_DENIED_CODES = {1036, 1044, 1045, 1095, 1142, 1143, 1227, 1290, 1370, 1792}  # no privilege, read-only
_SYNTAX_CODES = {1064, 1149}
_LOST_CODES = {2002, 2003, 2006, 2013, 2055}

#: Hosts reached without TLS: it adds nothing on the local machine, and pymysql's default TLS context costs
#: about 30 ms per connection.
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

#: What an agent query may be: its first word, and for SHOW the word after it (after FULL).
_STATEMENTS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "("})
_SHOW = frozenset({"TABLES", "COLUMNS", "FIELDS", "INDEX", "INDEXES", "KEYS", "CREATE", "TABLE", "DATABASES",
                   "SCHEMAS", "WARNINGS", "ERRORS"})
_SHOW_CREATE = frozenset({"TABLE", "VIEW"})
#: Functions a reader's query may not call, and why: the server-wide locks (a reader holding one could stall other
#: sessions), and BENCHMARK() (it measures the server, and when the time limit cuts it the server returns 0, not an
#: error).
_REFUSED_FUNCTIONS = {**dict.fromkeys(("GET_LOCK", "RELEASE_LOCK", "RELEASE_ALL_LOCKS", "IS_FREE_LOCK", "IS_USED_LOCK"),
                                      "agent queries take no server locks"),
                      "BENCHMARK": "it measures the server, not the data"}
_MYSQL = Dialect.get_or_raise("mysql")

_lock = threading.Lock()
_salts: dict[str, str] = {}  # mysql_url -> the salt of the project's lock names on that server


class _Connection(pymysql.connections.Connection):
    """A pymysql connection whose reads can be given a deadline (``until``); pymysql's own read timeout applies to
    each read alone."""

    deadline: float | None = None

    @contextmanager
    def until(self, deadline: float):
        """Within this block every read gives up at ``deadline`` (``time.monotonic()``)."""
        base, self.deadline = self._read_timeout, deadline
        try:
            yield
        finally:
            self.deadline, self._read_timeout = None, base

    def _read_packet(self, *args, **kwargs):
        if self.deadline is not None:
            self._read_timeout = max(self.deadline - time.monotonic(), 0.001)
        return super()._read_packet(*args, **kwargs)


def _address(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"MYSQL_URL {url!r} should look like mysql://user:password@host:3306")
    return {"host": parts.hostname or "127.0.0.1", "port": parts.port or 3306,
            "user": unquote(parts.username or "root"), "password": unquote(parts.password or "")}


def _connect(settings: DatabaseSettings, connect_timeout: float = CONNECT_TIMEOUT_S,
             read_timeout: float | None = ADMIN_READ_TIMEOUT_S, **overrides) -> _Connection:
    """A connection; the connect and the login wait ``connect_timeout`` at most (a server that accepts and never
    answers is reported then), each later read ``read_timeout``."""
    try:
        address = _address(settings.mysql_url) | overrides
    except ValueError as e:
        raise BackendUnavailable(str(e)) from None
    options = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": connect_timeout,
               "read_timeout": connect_timeout, "write_timeout": connect_timeout}
    try:
        try:
            con = _Connection(**address, **options, ssl_disabled=address["host"] in _LOOPBACK)
        except RuntimeError:  # MySQL 8 caching_sha2 login without TLS needs the cryptography package: use TLS
            con = _Connection(**address, **options)
    except pymysql.MySQLError as e:
        where = f"MySQL/MariaDB at {address['host']}:{address['port']}"
        if e.args and e.args[0] == 2013:  # the login's read timed out
            raise BackendUnavailable(f"{where} accepted the connection but did not answer within {connect_timeout:g} "
                                     "s; is a MySQL/MariaDB server listening there? (check MYSQL_URL)") from None
        raise BackendUnavailable(f"cannot connect to {where} as {address['user']} ({e.args[-1]}); start the "
                                 "server or set MYSQL_URL") from None
    con._read_timeout = read_timeout
    return con


def unavailable(settings: DatabaseSettings) -> str | None:
    """Why the server cannot be used (a quick connect and login, 2 s at most), or None."""
    try:
        _connect(settings, connect_timeout=2).close()
    except BackendUnavailable as e:
        return str(e)
    return None


def database_name(key: str) -> str:
    """The MySQL database holding the content with this key."""
    return f"dqa_{key}"


@contextmanager
def _server_lock(cur, name: str, timeout_s: int = 60):
    cur.execute("SELECT GET_LOCK(%s, %s)", (name, timeout_s))
    if cur.fetchone()[0] != 1:
        raise BackendUnavailable(f"waited {timeout_s} s for a MySQL lock held by another loader")
    try:
        yield
    finally:
        cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
        cur.fetchall()


def _set_up(admin: pymysql.Connection, url: str) -> str:
    """Create the bookkeeping database (once per process); the salt of the project's lock names on the server."""
    with _lock:
        if url in _salts:
            return _salts[url]
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {META} CHARACTER SET utf8mb4 COLLATE {COLLATION}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META}.loaded (name VARCHAR(64) PRIMARY KEY, "
                        "loader INT NOT NULL, loaded_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META}.secret (name VARCHAR(64) PRIMARY KEY, "
                        "value VARCHAR(128) NOT NULL)")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META}.readers (name VARCHAR(32) PRIMARY KEY, "
                        "db VARCHAR(64) NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)")
            try:  # the process that made the reader (earlier versions did not record it)
                cur.execute(f"ALTER TABLE {META}.readers ADD COLUMN owner VARCHAR(160) NULL")
            except pymysql.MySQLError as e:
                if e.args[0] != 1060:  # ER_DUP_FIELDNAME: added before
                    raise
            cur.execute(f"INSERT IGNORE INTO {META}.secret VALUES ('lock_salt', %s)", (secrets.token_hex(8),))
            cur.execute(f"SELECT value FROM {META}.secret WHERE name = 'lock_salt'")
            _salts[url] = cur.fetchone()[0]
        return _salts[url]


def _load_lock(salt: str, name: str) -> str:
    return f"planrag_load_{salt}_{name}"


def _is_loaded(cur, name: str, tables: int) -> bool:
    cur.execute(f"SELECT loader FROM {META}.loaded WHERE name = %s", (name,))
    row = cur.fetchone()
    if not row or row[0] != LOADER_VERSION:
        return False
    cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (name,))
    return cur.fetchone()[0] == tables


def _write(admin: pymysql.Connection, cur, database: Database, name: str) -> None:
    cur.execute(f"DELETE FROM {META}.loaded WHERE name = %s", (name,))
    cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE {COLLATION}")
    admin.select_db(name)
    for t in database.tables:
        cur.execute(sql_dialect.create_table(t, float_type="DOUBLE") + " ENGINE=InnoDB")
    admin.begin()
    for t in database.tables:
        cur.executemany(f"INSERT INTO {t.name} ({', '.join(t.column_names)}) "
                        f"VALUES ({', '.join(['%s'] * len(t.columns))})", t.rows)
    cur.execute(f"INSERT INTO {META}.loaded (name, loader) VALUES (%s, %s)", (name, LOADER_VERSION))
    admin.commit()


def load(database: Database, settings: DatabaseSettings, *, reload: bool = False) -> bool:
    """Load ``database`` into ``dqa_<key>`` unless a completed load is there (or ``reload``). True when it
    wrote the data. Raises BackendUnavailable on any server failure."""
    name = database_name(database.key)
    admin = _connect(settings)
    try:
        salt = _set_up(admin, settings.mysql_url)
        with admin.cursor() as cur, _server_lock(cur, _load_lock(salt, name)):
            if not reload and _is_loaded(cur, name, len(database.tables.tables)):
                return False
            _write(admin, cur, database, name)
            return True
    except pymysql.MySQLError as e:
        raise BackendUnavailable(f"cannot load {name} into MySQL/MariaDB: {e.args[-1]}") from None
    finally:
        admin.close()


def forget(key: str, settings: DatabaseSettings | None = None) -> None:
    """Drop a content's loaded database from the server, so the next open loads it again."""
    settings = settings or DatabaseSettings()
    admin = _connect(settings)
    try:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database_name(key)}`")
            try:
                cur.execute(f"DELETE FROM {META}.loaded WHERE name = %s", (database_name(key),))
            except pymysql.MySQLError:  # no bookkeeping yet
                pass
    finally:
        admin.close()


def _drop_readers(cur, names) -> None:
    for name in names:
        cur.execute("DROP USER IF EXISTS %s@'%%', %s@'localhost'", (name, name))
        cur.execute(f"DELETE FROM {META}.readers WHERE name = %s", (name,))


def _process_id(pid: int | None = None) -> str | None:
    """``HOST PID START``: a process of this machine, told apart from a later one given the same pid by its start
    time (None when it has ended, or where /proc is missing)."""
    pid = pid or os.getpid()
    try:
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
    return f"{socket.gethostname()} {pid} {start}"


def _left_by_ended_processes(owners: list[tuple[str, str | None]]) -> list[str]:
    """The readers (name, owner) made by a process of this machine that has ended (killed: it never dropped
    them)."""
    host = socket.gethostname()
    left = []
    for name, owner in owners:
        parts = (owner or "").split(" ")
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and _process_id(int(parts[1])) != owner:
            left.append(name)
    return left


def _create_reader(settings: DatabaseSettings, db: str) -> tuple[str, str]:
    """A new reader granted SELECT on database ``db`` only, with one connection at a time: (user, password). Drops
    on the way, and says so (core.config.home's notices), the readers without a session whose process on this machine
    has ended (a killed run's), and those of other machines left idle for ``STALE_READER_S``."""
    user, password = READER_PREFIX + secrets.token_hex(6), secrets.token_urlsafe(24)
    admin = _connect(settings)
    try:
        _set_up(admin, settings.mysql_url)
        with admin.cursor() as cur:
            cur.execute(f"SELECT name, owner FROM {META}.readers WHERE name NOT IN "
                        "(SELECT user FROM information_schema.PROCESSLIST)")
            idle = list(cur.fetchall())
            orphans = _left_by_ended_processes(idle)
            cur.execute(f"SELECT name FROM {META}.readers WHERE created_at < NOW() - INTERVAL %s SECOND AND name "
                        "NOT IN (SELECT user FROM information_schema.PROCESSLIST)", (STALE_READER_S,))
            stale = [r[0] for r in cur.fetchall() if r[0] not in orphans]
            _drop_readers(cur, orphans + stale)
            if orphans:
                host = _address(settings.mysql_url)["host"]
                home.add_notice(f"Removed {len(orphans)} MySQL/MariaDB reader account(s) left on {host} by runs "
                                f"whose process was killed: {', '.join(sorted(orphans))}.")
            cur.execute(f"INSERT INTO {META}.readers (name, db, owner) VALUES (%s, %s, %s)",
                        (user, db, _process_id()))
            for host in ("%", "localhost"):  # localhost too: an anonymous ''@localhost would outrank user@%
                cur.execute("CREATE USER %s@%s IDENTIFIED BY %s WITH MAX_USER_CONNECTIONS 2",
                            (user, host, password))
                cur.execute(f"GRANT SELECT ON `{db}`.* TO %s@%s", (user, host))
    except pymysql.MySQLError as e:
        raise BackendUnavailable(f"cannot create a reader for {db} on MySQL/MariaDB: {e.args[-1]}") from None
    finally:
        admin.close()
    return user, password


def _admin_do(settings: DatabaseSettings, statement: str, args=None) -> None:
    """Run one statement as the loading account, quickly; failures are ignored (best effort)."""
    try:
        admin = _connect(settings, connect_timeout=2, read_timeout=5)
    except BackendUnavailable:
        return
    try:
        with admin.cursor() as cur:
            cur.execute(statement, args)
    except pymysql.MySQLError:
        pass
    finally:
        admin.close()


def drop_legacy_reader(settings: DatabaseSettings | None = None) -> None:
    """Migration: drop the shared reader ``planrag_reader`` of earlier versions and its password (no longer used;
    run once no process of an earlier version uses the server)."""
    admin = _connect(settings or DatabaseSettings())
    try:
        with admin.cursor() as cur:
            cur.execute("DROP USER IF EXISTS %s@'%%', %s@'localhost'", (LEGACY_READER, LEGACY_READER))
            cur.execute("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = "
                        "'secret'", (META,))
            if cur.fetchone():
                cur.execute(f"DELETE FROM {META}.secret WHERE name = 'reader_password'")
    finally:
        admin.close()


def check_statement(sql: str) -> None:
    """Refuse (QuerySyntaxError, RefusedWrite), before it is sent, what a reader's query may not be even when the
    server would run it: a statement other than a read (SELECT, WITH, VALUES, TABLE, SHOW, DESCRIBE, EXPLAIN);
    executable comments and optimizer hints, which the server runs though they look like comments; the
    server-wide lock functions and BENCHMARK()."""
    # SHOW: tables, columns, indexes, CREATE TABLE/VIEW; executable comments /*! */ and /*M! */, hints /*+ */
    try:
        tokens = _MYSQL.tokenize(sql)
    except Exception as e:  # noqa: BLE001 - sqlglot's tokenizer raises several kinds
        raise QuerySyntaxError(f"cannot read the query ({e})") from None
    for t in tokens:
        if t.token_type == TokenType.HINT or any(c.lstrip().startswith(("!", "M!")) for c in t.comments):
            raise RefusedWrite("executable comments and optimizer hints (/*! */, /*M! */, /*+ */) are refused; "
                               "send the query without them")
        why = _REFUSED_FUNCTIONS.get(t.text.upper()) if t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) else None
        if why:
            raise RefusedWrite(f"{t.text.upper()} is refused: {why}")
    words = [t.text.upper() for t in tokens[:4]]
    if words and words[0] not in _STATEMENTS:
        raise QuerySyntaxError(f"a query cannot start with {words[0]}: send one SELECT query (or SHOW TABLES, "
                               "DESCRIBE, EXPLAIN)")
    if words[:1] == ["SHOW"]:
        rest = [w for w in words[1:] if w != "FULL"] or [""]
        if rest[0] not in _SHOW or (rest[0] == "CREATE" and (rest[1:2] or [""])[0] not in _SHOW_CREATE):
            raise RefusedWrite(f"SHOW {' '.join(rest[:2])} is refused: only SHOW TABLES, COLUMNS, INDEX and "
                               "CREATE TABLE are available (the schema is in the prompt)")


def _plain(value):
    if value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, Decimal):  # SUM of INT, AVG, division: integral ones as int, others as float
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)  # dates and times, as MySQL prints them


class MySQLBackend:
    """One connection, as a reader of its own (see the module), to one loaded database. Queries are serialized."""

    name = "mysql"
    language = "sql"

    def __init__(self, database: Database, settings: DatabaseSettings):
        self.database = database
        self._settings = settings
        self._db = database_name(database.key)
        self._user, self._password = _create_reader(settings, self._db)
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        try:
            self._con = self._open()
            with self._con.cursor() as cur:
                cur.execute("SELECT VERSION()")
                self.server_version = cur.fetchone()[0]
        except BaseException:
            self._drop_reader()
            raise
        self._mariadb = "mariadb" in self.server_version.lower()

    def _open(self) -> _Connection:
        try:
            con = _connect(self._settings, read_timeout=CONNECT_TIMEOUT_S, user=self._user, password=self._password,
                           database=self._db)
        except BackendUnavailable:  # the reader dropped as stale while this backend slept (or the server down)
            self._drop_reader()
            self._user, self._password = _create_reader(self._settings, self._db)
            con = _connect(self._settings, read_timeout=CONNECT_TIMEOUT_S, user=self._user, password=self._password,
                           database=self._db)
        self._thread_id = con.thread_id()
        return con

    def schema_text(self) -> str:
        return sql_dialect.schema_text(self.database.tables)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
              row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one MySQL query as written (SHOW/DESCRIBE/EXPLAIN too). ``total_rows`` counts every row,
        streamed from the server within the time limit."""
        sql = sql_dialect.one_statement(text)
        sql_dialect.check_read_only(sql, metadata=True)
        check_statement(sql)
        return self._run(sql, timeout_s, row_cap)

    def _ensure_connected(self) -> None:
        try:
            self._con.ping(reconnect=False)
        except pymysql.MySQLError:  # closed by the server (restart, wait_timeout) or by a deadline: a new one
            self._con = self._open()

    def _limits(self, timeout_s: float) -> str:
        """The session's time limit for the next query and, on MariaDB, its memory limit (MySQL has no session
        one)."""
        if self._mariadb:
            return (f"SET SESSION max_statement_time = {max(timeout_s, 0.001):.3f}, "
                    f"max_session_mem_used = {SESSION_MEMORY_BYTES}")
        return f"SET SESSION MAX_EXECUTION_TIME = {max(round(timeout_s * 1000), 1)}"

    def _run(self, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
        """Run ``sql`` as given in a read-only transaction; the server enforces privileges and time limit, the
        client gives up ``QUERY_GRACE_S`` after it (and kills the query)."""
        with self._lock:
            start = time.perf_counter()
            deadline = time.monotonic() + timeout_s + QUERY_GRACE_S
            try:
                self._ensure_connected()
                with self._con.until(deadline):
                    with self._con.cursor() as cur:
                        cur.execute(self._limits(timeout_s))
                        cur.execute("START TRANSACTION READ ONLY")
                    with self._con.cursor(pymysql.cursors.SSCursor) as cur:
                        cur.execute(sql)
                        columns = [d[0] for d in cur.description or ()]
                        kept = RowKeeper(row_cap, _plain)
                        for row in cur:
                            kept.add(row)
                    self._con.rollback()
            except pymysql.MySQLError as e:
                if time.monotonic() < deadline:
                    raise _error(e, timeout_s) from None
                self._kill_abandoned()
                raise QueryTimeout(f"no answer from the server within {timeout_s:g} s (+{QUERY_GRACE_S:g} s); the "
                                   "query was stopped: make it cheaper (fewer joins, filter early, aggregate)") from None
        return QueryResult(columns, kept.rows, kept.total, time.perf_counter() - start, executed=sql).capped(
            MAX_CELL_CHARS, MAX_RESULT_CHARS)

    def _kill_abandoned(self) -> None:
        """End the server session the client gave up on (its query may still run there), in the background."""
        self._con._force_close()  # noqa: SLF001 - no goodbye to a server that stopped answering
        if self._thread_id is not None:
            threading.Thread(target=_admin_do, args=(self._settings, f"KILL {int(self._thread_id)}"),
                             daemon=True, name="planrag-mysql-kill").start()

    def cancel(self) -> None:
        """Stop the query running now (the analyst's Stop), as the loading account; best effort."""
        if self._thread_id is not None:
            _admin_do(self._settings, f"KILL QUERY {int(self._thread_id)}")

    def _drop_reader(self) -> None:
        _admin_do(self._settings, "DROP USER IF EXISTS %s@'%%', %s@'localhost'", (self._user, self._user))
        _admin_do(self._settings, f"DELETE FROM {META}.readers WHERE name = %s", (self._user,))

    def close(self) -> None:
        """Close the connection and drop its reader; the loaded database stays on the server for later opens."""
        if self._con.open:
            self._con.close()
        self._drop_reader()


def _error(e: pymysql.MySQLError, timeout_s: float) -> QueryError:
    code = e.args[0] if e.args and isinstance(e.args[0], int) else None
    message = f"MySQL error {code}: {e.args[-1]}" if code else f"MySQL: {e}"
    if code in _TIMEOUT_CODES:
        return QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped; make it cheaper "
                            "(fewer joins, filter early, aggregate)")
    if code in _DENIED_CODES:
        return RefusedWrite(f"{message}; the database is read-only: send one SELECT query")
    if code in _SYNTAX_CODES:
        return QuerySyntaxError(message)
    if code in _LOST_CODES:
        return BackendUnavailable(f"{message}; the connection to the server was lost")
    return QueryError(message)


def open_database(database: Database, settings: DatabaseSettings) -> MySQLBackend:
    """Load ``database`` when needed and open it as a reader of its own."""
    load(database, settings)
    return MySQLBackend(database, settings)
