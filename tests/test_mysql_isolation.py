"""The MariaDB reader (issue 12): each opened backend reads its own database only, cannot take the project's locks,
see or end other sessions, or escape its time limit; a server that accepts and never answers is reported in
seconds. The attacks run on the built-in demo databases; they need a server (skipped without one unless
REQUIRE_MYSQL=1). ``_run`` sends a statement past the client-side checks, to show what the server itself stops."""
from __future__ import annotations

import dataclasses
import secrets
import socket
import threading

import pytest

from core.scenarios.dqa import demo
from core.backends import mysql
from core.backends.base import MAX_CELL_CHARS, BackendUnavailable, QueryError, QueryTimeout, RefusedWrite
from core.config.settings import DatabaseSettings
from tests.test_backends_sql import mysql_settings


@pytest.fixture(scope="module")
def settings() -> DatabaseSettings:
    return mysql_settings()


@pytest.fixture(scope="module")
def databases():
    return [demo.database(demo.questions(scenario)[0]) for scenario in ("locating", "building")]


@pytest.fixture
def pair(settings, databases):
    """Two backends on two questions' databases, as two runs would hold them."""
    backends = [mysql.open_database(d, settings) for d in databases]
    yield backends
    for b in backends:
        b.close()


def _admin_rows(settings, sql, args=None):
    con = mysql._connect(settings)
    try:
        with con.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        con.close()


def test_each_backend_reads_its_own_database_only(pair, databases):
    a, b = pair
    other = mysql.database_name(databases[1].key)
    table = next(iter(databases[1].tables.tables))
    with pytest.raises(RefusedWrite):
        a.query(f"SELECT * FROM `{other}`.{table}")
    assert sorted(r[0] for r in a.query("SHOW DATABASES").rows) == sorted(
        [mysql.database_name(databases[0].key), "information_schema"])
    assert a._user != b._user and mysql.LEGACY_READER not in (a._user, b._user)


def test_reader_cannot_see_or_end_other_sessions(pair):
    a, b = pair
    seen = a._run("SELECT USER, INFO FROM information_schema.PROCESSLIST", 5, 50).rows
    assert {r[0] for r in seen} == {a._user}
    with pytest.raises(RefusedWrite):  # the server: "You are not owner of thread"
        a._run(f"KILL {b._thread_id}", 5, 10)
    assert b.query("SELECT 1 AS one").rows == [[1]]
    for sql in ("SHOW PROCESSLIST", "SHOW FULL PROCESSLIST", "SHOW GRANTS", "SHOW VARIABLES", "KILL 1",
                "SHOW CREATE USER CURRENT_USER"):
        with pytest.raises(RefusedWrite):
            a.query(sql)


def test_reader_cannot_block_the_projects_loads(settings, databases, pair):
    a, _ = pair
    for sql in ("SELECT GET_LOCK('planrag_setup', 0)", "SELECT get_lock ('x', 0)", "SELECT IS_USED_LOCK('x')",
                "SELECT RELEASE_ALL_LOCKS()"):
        with pytest.raises(RefusedWrite, match="lock"):
            a.query(sql)
    # Past the check, the old lock names are taken; the loads use salted names the reader cannot read. (A copy
    # of the demo database under a key of its own is reloaded, so no other process's database is touched.)
    own = dataclasses.replace(databases[0], key=f"locktest-{secrets.token_hex(4)}")
    try:
        for lock in ("planrag_setup", f"planrag_load_{mysql.database_name(own.key)}"):
            assert a._run(f"SELECT GET_LOCK('{lock}', 0)", 5, 10).rows == [[1]]
        assert mysql.load(own, settings) is True  # would wait 60 s and fail on a taken lock
        assert mysql.load(own, settings, reload=True) is True
    finally:
        mysql.forget(own.key, settings)
    with pytest.raises(RefusedWrite):
        a._run(f"SELECT * FROM {mysql.META}.secret", 5, 10)


def test_reader_session_has_a_memory_limit_on_mariadb(pair):
    a, _ = pair
    if not a._mariadb:
        pytest.skip("MySQL has no per-session memory limit (MariaDB's max_session_mem_used)")
    assert a._run("SELECT @@max_session_mem_used", 5, 10).rows == [[mysql.SESSION_MEMORY_BYTES]]


def test_benchmark_function_is_refused(pair):
    """BENCHMARK() cut by the time limit would come back as a 0 result, not as a timeout."""
    a, _ = pair
    for sql in ("SELECT BENCHMARK(100000000, MD5('x'))", "SELECT `benchmark` (1, 1)"):
        with pytest.raises(RefusedWrite, match="measures the server"):
            a.query(sql)


@pytest.mark.parametrize("sql", [
    "SET STATEMENT max_statement_time=0 FOR SELECT SLEEP(30)",
    "SELECT 1 FROM country WHERE /*!SLEEP(30) AND*/ 1",
    "SELECT /*+ MAX_EXECUTION_TIME(0) */ SLEEP(30)",
    "SELECT 1 /*M!100000 + SLEEP(30) */ + 1",
])
def test_time_limit_cannot_be_escaped(pair, sql):
    a, _ = pair
    with pytest.raises((RefusedWrite, QueryTimeout)):
        a.query(sql, timeout_s=0.5)


def test_escaped_server_limit_still_ends_at_the_client_deadline(settings, pair):
    """Past the checks, SET STATEMENT lifts the server's limit: the client stops at the limit plus
    QUERY_GRACE_S, kills the session on the server, and the backend goes on with a new connection."""
    a, _ = pair
    old_thread = a._thread_id
    with pytest.raises(QueryTimeout, match="no answer"):
        a._run("SET STATEMENT max_statement_time=0 FOR SELECT SLEEP(60)", 0.5, 10)
    assert a.query("SELECT 2 AS two").rows == [[2]]
    assert a._thread_id != old_thread
    for _ in range(50):  # the kill runs in the background
        if not _admin_rows(settings, "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = %s", (old_thread,)):
            break
        threading.Event().wait(0.1)
    else:
        pytest.fail("the abandoned session still runs on the server")


def test_readers_dropped_on_close_and_stale_ones_swept(settings, databases):
    backend = mysql.open_database(databases[0], settings)
    user = backend._user
    assert _admin_rows(settings, "SELECT COUNT(*) FROM mysql.user WHERE user = %s", (user,))[0][0] == 2
    backend.close()
    assert _admin_rows(settings, "SELECT COUNT(*) FROM mysql.user WHERE user = %s", (user,))[0][0] == 0
    # A reader left by a killed process: no session, older than STALE_READER_S.
    leaked, _ = mysql._create_reader(settings, mysql.database_name(databases[0].key))
    _admin_rows(settings, f"UPDATE {mysql.META}.readers SET created_at = NOW() - INTERVAL 2 DAY WHERE name = %s",
                (leaked,))
    mysql.open_database(databases[0], settings).close()
    assert _admin_rows(settings, "SELECT COUNT(*) FROM mysql.user WHERE user = %s", (leaked,))[0][0] == 0


def test_backend_outlives_its_reader_being_dropped(settings, databases):
    backend = mysql.open_database(databases[0], settings)
    try:
        _admin_rows(settings, f"KILL {backend._thread_id}")
        backend._drop_reader()
        assert backend.query("SELECT 3 AS three").rows == [[3]]
    finally:
        backend.close()


def test_allowed_metadata_statements_still_run(pair):
    a, _ = pair
    assert a.query("SHOW TABLES").rows
    table = a.query("SHOW TABLES").rows[0][0]
    for sql in (f"DESCRIBE {table}", f"SHOW CREATE TABLE {table}", f"SHOW FULL COLUMNS FROM {table}",
                f"EXPLAIN SELECT * FROM {table}", "SELECT '/*! not a comment */ GET_LOCK' AS s"):
        assert a.query(sql).rows


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield DatabaseSettings(mysql_url=f"mysql://root@127.0.0.1:{server.getsockname()[1]}")
    stop.set()
    thread.join()
    for s in held:
        s.close()
    server.close()


def test_silent_server_reported_not_waited_on(silent_server, databases):
    reason = mysql.unavailable(silent_server)
    assert "did not answer within 2 s" in reason
    with pytest.raises(BackendUnavailable, match="did not answer"):
        mysql.open_database(databases[0], silent_server)


def test_availability_check_of_a_silent_server_never_blocks(silent_server):
    """A page asks in passing: the check runs in the background and the answer is remembered."""
    from core.backends import availability

    assert availability.status("mysql", silent_server, wait_s=0) == (False, None)  # still checking
    known, reason = availability.status("mysql", silent_server, wait_s=30)
    assert known and "did not answer" in reason
    assert availability.status("mysql", silent_server, wait_s=0) == (True, reason)  # remembered


def test_cancel_stops_the_running_query(pair):
    """The analyst's Stop: the query ends at once (here long before its own limit) and the backend goes on."""
    a, _ = pair
    outcome = []

    def run():
        try:
            a.query("SELECT SLEEP(120) AS s", timeout_s=300)
            outcome.append("finished")
        except QueryError as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    while not any(r[0] == "User sleep" for r in _admin_rows(
            a._settings, "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = %s", (a._thread_id,))):
        threading.Event().wait(0.05)
    a.cancel()
    thread.join()
    assert outcome != ["finished"]
    assert a.query("SELECT 4 AS four").rows == [[4]]


def test_wide_cells_are_cut_in_the_backend(pair):
    """A server's wide cells are cut as they arrive (they never pile up in the app's memory), the cut marked."""
    r = pair[0].query("SELECT REPEAT('x', 300000) AS s, n FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 "
                      "UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6) t", row_cap=6)
    assert r.total_rows == 6 and r.truncated
    assert r.rows[0] == ["x" * MAX_CELL_CHARS + "…[cut: 300,000 characters in all]", 1]
    assert any("cut" in note for note in r.notes)


def test_readers_of_a_killed_run_are_removed_at_the_next_open_and_said(settings, databases, tmp_path):
    """Issue 27: a process killed mid-run leaves its reader account; the next open (any process on this machine)
    drops it at once, not a day later, and says so in the notices the pages and the command line show."""
    import os
    import signal
    import subprocess
    import sys

    from core.config import home
    from tests.conftest import ROOT

    script = ("import sys, time\nfrom core.scenarios.dqa import demo\nfrom core.backends import mysql\n"
              "from core.config.settings import DatabaseSettings\n"
              f"b = mysql.open_database(demo.database(demo.questions('locating')[0]), DatabaseSettings(mysql_url="
              f"{settings.mysql_url!r}))\nprint(b._user, flush=True)\ntime.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PLANRAG_HOME": str(tmp_path)})
    try:
        leaked = child.stdout.readline().strip()
        assert leaked.startswith(mysql.READER_PREFIX)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    seen = len(home.notices())
    mysql.open_database(databases[0], settings).close()
    assert _admin_rows(settings, "SELECT COUNT(*) FROM mysql.user WHERE user = %s", (leaked,))[0][0] == 0
    assert _admin_rows(settings, f"SELECT COUNT(*) FROM {mysql.META}.readers WHERE name = %s", (leaked,))[0][0] == 0
    assert any(leaked in n and "killed" in n for n in home.notices(seen))


def test_a_live_processs_reader_is_kept(settings, databases):
    """Another live process's reader (here this one's, idle between queries) is not taken for a leftover."""
    a = mysql.open_database(databases[0], settings)
    try:
        a._con.close()  # no session now, as between two queries after a server-side timeout
        mysql.open_database(databases[1], settings).close()
        assert _admin_rows(settings, "SELECT COUNT(*) FROM mysql.user WHERE user = %s", (a._user,))[0][0] == 2
    finally:
        a.close()
