"""The MySQL/MariaDB backend (pymysql), for the server given by ``DatabaseSettings.mysql_url``.

Each database content is loaded once per server into its own database ``dqa_<key>``; a row in
``planrag_meta.loaded``, committed in the same transaction as the data, marks a completed load, so a later
open (in any process) skips loading. FLOAT columns are created as DOUBLE: MySQL's FLOAT is single precision
and would change the stored values; strings use utf8mb4 with the case-insensitive ``utf8mb4_unicode_ci``.

Agents query as ``planrag_reader`` (hosts ``%`` and ``localhost``), which is granted SELECT on ``dqa\\_%``
databases only. Its password is random, made by the first process that sets the user up and kept in
``planrag_meta.secret`` (readable by the loading account only), so every process can connect as it. Each
query also runs in a read-only transaction with a server-side statement time limit.
"""
from __future__ import annotations

import secrets
import threading
import time
from contextlib import contextmanager
from decimal import Decimal
from functools import partial
from itertools import islice
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.cursors

from core.backends import sql_dialect
from core.backends.base import (DEFAULT_ROW_CAP, DEFAULT_TIMEOUT_S, BackendUnavailable, QueryError, QueryResult,
                                QuerySyntaxError, QueryTimeout, RefusedWrite)
from core.scenario import Database
from core.settings import DatabaseSettings

READER = "planrag_reader"
META = "planrag_meta"
COLLATION = "utf8mb4_unicode_ci"
LOADER_VERSION = 1  # bump when the loaded layout changes, so older loads are redone

_TIMEOUT_CODES = {1969, 3024}  # MariaDB max_statement_time, MySQL MAX_EXECUTION_TIME
_DENIED_CODES = {1036, 1044, 1045, 1142, 1143, 1227, 1290, 1370, 1792}  # no privilege, read-only
_SYNTAX_CODES = {1064, 1149}
_LOST_CODES = {2002, 2003, 2006, 2013, 2055}

#: Hosts reached without TLS: it adds nothing on the local machine, and pymysql's default TLS context costs
#: about 30 ms per connection.
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

_lock = threading.Lock()
_passwords: dict[str, str] = {}  # mysql_url -> reader password, once the server is set up


def _address(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"MYSQL_URL {url!r} should look like mysql://user:password@host:3306")
    return {"host": parts.hostname or "127.0.0.1", "port": parts.port or 3306,
            "user": unquote(parts.username or "root"), "password": unquote(parts.password or "")}


def _connect(settings: DatabaseSettings, connect_timeout: float = 5, **overrides) -> pymysql.Connection:
    try:
        address = _address(settings.mysql_url) | overrides
    except ValueError as e:
        raise BackendUnavailable(str(e)) from None
    options = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": connect_timeout}
    try:
        try:
            return pymysql.connect(**address, **options, ssl_disabled=address["host"] in _LOOPBACK)
        except RuntimeError:  # MySQL 8 caching_sha2 login without TLS needs the cryptography package: use TLS
            return pymysql.connect(**address, **options)
    except pymysql.MySQLError as e:
        raise BackendUnavailable(f"cannot connect to MySQL/MariaDB at {address['host']}:{address['port']} as "
                                 f"{address['user']} ({e.args[-1]}); start the server or set MYSQL_URL") from None


def unavailable(settings: DatabaseSettings) -> str | None:
    """Why the server cannot be used (a quick connect, 2 s at most), or None."""
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
        raise BackendUnavailable(f"waited {timeout_s} s for MySQL lock {name} held by another loader")
    try:
        yield
    finally:
        cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
        cur.fetchall()


def _set_up(admin: pymysql.Connection, url: str) -> str:
    """Create the bookkeeping database and the SELECT-only reader (once per process); its password."""
    with _lock:
        if url in _passwords:
            return _passwords[url]
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {META} CHARACTER SET utf8mb4 COLLATE {COLLATION}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META}.loaded (name VARCHAR(64) PRIMARY KEY, "
                        "loader INT NOT NULL, loaded_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META}.secret (name VARCHAR(64) PRIMARY KEY, "
                        "value VARCHAR(128) NOT NULL)")
            with _server_lock(cur, "planrag_setup"):
                cur.execute(f"SELECT value FROM {META}.secret WHERE name = 'reader_password'")
                row = cur.fetchone()
                password = row[0] if row else secrets.token_urlsafe(24)
                if not row:
                    cur.execute(f"INSERT INTO {META}.secret VALUES ('reader_password', %s)", (password,))
                for host in ("%", "localhost"):
                    cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (READER, host, password))
                    cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (READER, host, password))
                    cur.execute("GRANT SELECT ON `dqa\\_%%`.* TO %s@%s", (READER, host))
        _passwords[url] = password
        return password


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
    wrote the data. Also sets up the reader account. Raises BackendUnavailable on any server failure."""
    name = database_name(database.key)
    admin = _connect(settings)
    try:
        _set_up(admin, settings.mysql_url)
        with admin.cursor() as cur, _server_lock(cur, f"planrag_load_{name}"):
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
    finally:
        admin.close()


def _plain(value):
    if value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, Decimal):  # SUM of INT, AVG, division: integral ones as int, others as float
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)  # dates and times, as MySQL prints them


class MySQLBackend:
    """One connection as the SELECT-only reader to one loaded database. Queries are serialized."""

    name = "mysql"
    language = "sql"

    def __init__(self, database: Database, settings: DatabaseSettings, password: str):
        self.database = database
        self._reconnect = partial(_connect, settings, user=READER, password=password,
                                  database=database_name(database.key))
        self._con = self._reconnect()
        self._lock = threading.Lock()
        with self._con.cursor() as cur:
            cur.execute("SELECT VERSION()")
            self.server_version = cur.fetchone()[0]
        self._mariadb = "mariadb" in self.server_version.lower()

    def schema_text(self) -> str:
        return sql_dialect.schema_text(self.database.tables)

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
              row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one MySQL query as written (SHOW/DESCRIBE/EXPLAIN too). ``total_rows`` counts every row,
        streamed from the server within the time limit."""
        sql = sql_dialect.one_statement(text)
        sql_dialect.check_read_only(sql, metadata=True)
        return self._run(sql, timeout_s, row_cap)

    def _ensure_connected(self) -> None:
        try:
            self._con.ping(reconnect=False)
        except pymysql.MySQLError:  # closed by the server (restart, wait_timeout): open a new one
            self._con = self._reconnect()

    def _time_limit(self, timeout_s: float) -> str:
        if self._mariadb:
            return f"SET SESSION max_statement_time = {max(timeout_s, 0.001):.3f}"
        return f"SET SESSION MAX_EXECUTION_TIME = {max(round(timeout_s * 1000), 1)}"

    def _run(self, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
        """Run ``sql`` as given in a read-only transaction; the server enforces privileges and time limit."""
        with self._lock:
            start = time.perf_counter()
            try:
                self._ensure_connected()
                with self._con.cursor() as cur:
                    cur.execute(self._time_limit(timeout_s))
                    cur.execute("START TRANSACTION READ ONLY")
                with self._con.cursor(pymysql.cursors.SSCursor) as cur:
                    cur.execute(sql)
                    columns = [d[0] for d in cur.description or ()]
                    rows = [[_plain(v) for v in r] for r in islice(cur, row_cap)]
                    total = len(rows) + sum(1 for _ in cur)
                self._con.rollback()
            except pymysql.MySQLError as e:
                raise _error(e, timeout_s) from None
        return QueryResult(columns, rows, total, time.perf_counter() - start, executed=sql)

    def close(self) -> None:
        """Close the connection; the loaded database stays on the server for later opens."""
        if self._con.open:
            self._con.close()


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
    """Load ``database`` when needed and open it as the SELECT-only reader."""
    load(database, settings)
    return MySQLBackend(database, settings, _passwords[settings.mysql_url])
