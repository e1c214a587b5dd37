"""Issue 12 (part A), attacked as an attacker would: an engine that crashes, runs past its time or takes too much
memory fails one query (an error observation), never the process; what reaches the parsers is bounded; cells and
results are capped before the model or the store see them; the embedded engines refuse what is not a read.

The embedded engines (SQLite, Ladybug) run in worker processes (core.backends.worker); some tests talk to a
worker directly, as a query that got past every check would. No test asserts how long anything takes (the figures
are printed by bench/bench_isolation.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.scenarios import catalog
from core.model.run_settings import Limits
from core.agents.nodes import run_query
from core.backends import ladybug, sqlite
from core.backends.base import (MAX_CELL_CHARS, MAX_NESTING, MAX_QUERY_CHARS, MAX_RESULT_CHARS, QueryError, QueryResult,
                                QuerySyntaxError, QueryTimeout, RefusedWrite, RowKeeper, cap_cell, render_rows)
from core.backends.registry import open_backend
from core.backends.worker import MEMORY_LIMIT, Worker, landlock_abi
from tests.conftest import ROOT
from tests.test_backends_conformance import backend_name  # noqa: F401 (a fixture)

EMBEDDED = ["sqlite", "ladybug"]
SLOW = {"sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "ladybug": "UNWIND range(1, 9000000) AS a UNWIND range(1, 9000000) AS b RETURN count(*)"}
BUILD = {"sqlite": sqlite.database_file, "ladybug": ladybug.database_file}


@pytest.fixture(scope="module")
def demo():
    return catalog.database(catalog.question("demo", "locating", 1))


@pytest.fixture(params=EMBEDDED)
def worker(request, demo):
    w = Worker(request.param, BUILD[request.param](demo))
    yield w
    w.close()


@pytest.fixture(scope="module")
def any_backend(backend_name, demo):
    """Each backend (sqlite, mysql, ladybug, neo4j) on the demo database; the servers skip when absent."""
    backend = open_backend(backend_name, demo)
    yield backend
    backend.close()


def _ok(w: Worker) -> list:
    return w.run("SELECT 1" if w.engine == "sqlite" else "RETURN 1", 10, 10).rows


# --- 1. a crashing engine fails one query ------------------------------------------------------------------
def test_ladybugs_parser_crash_fails_that_query_and_the_next_one_runs(demo):
    w = Worker("ladybug", ladybug.database_file(demo))
    try:
        assert _ok(w) == [[1]]
        with pytest.raises(QueryError) as e:  # segfaults Ladybug 0.22's parser; the worker dies, not this process
            w.run("RETURN " + "[" * 800 + "1" + "]" * 800, 60, 10)
        assert "crashed" in str(e.value) or isinstance(e.value, QueryTimeout)
        assert _ok(w) == [[1]] and w.starts == 2
    finally:
        w.close()


def test_a_worker_outlives_the_thread_that_started_it(worker):
    """Runs query in threads of their own (run control): the worker one started serves the next ones."""
    thread = threading.Thread(target=_ok, args=(worker,))
    thread.start()
    thread.join()
    time.sleep(0.2)
    assert _ok(worker) == [[1]] and worker.starts == 1


def test_a_closed_backends_worker_serves_the_next_open_of_its_file(demo):
    first = open_backend("sqlite", demo)
    first.query("SELECT 1")
    pid = first._worker.pid
    first.close()
    second = open_backend("sqlite", demo)
    try:
        assert second.query("SELECT COUNT(*) FROM node_country").rows == [[33]] and second._worker.pid == pid
    finally:
        second.close()
    sqlite.forget(demo.key)  # the file goes: so does its idle worker
    third = open_backend("sqlite", demo)
    try:
        assert third.query("SELECT 1").rows == [[1]] and third._worker.pid != pid
    finally:
        third.close()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _once_busy(w: Worker, then) -> None:
    """``then(pid)`` once the (idle, started) worker runs a query: once it has used CPU since this call."""
    pid = w.pid
    idle = _cpu_ticks(pid)
    while _cpu_ticks(pid) < idle + 3:
        time.sleep(0.01)
    then(pid)


def _kill_once_busy(w: Worker, sig: int) -> None:
    _once_busy(w, lambda pid: os.kill(pid, sig))


def _crash_mid_query(w: Worker, sig: int) -> BaseException:
    """The error of a slow query whose worker gets ``sig`` while it runs."""
    _ok(w)
    box = {}

    def slow():
        try:
            w.run(SLOW[w.engine], 60, 10)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    thread = threading.Thread(target=slow)
    thread.start()
    _kill_once_busy(w, sig)
    thread.join(60)
    return box.get("error")


def test_an_engine_crash_is_an_error_for_that_query_only(worker):
    error = _crash_mid_query(worker, signal.SIGSEGV)
    assert isinstance(error, QueryError) and "crashed on this query (signal SIGSEGV)" in str(error)
    assert _ok(worker) == [[1]] and worker.starts == 2


def test_an_agent_observes_an_engine_crash_and_goes_on(demo):
    backend = open_backend("sqlite", demo)
    try:
        backend.query("SELECT 1")
        threading.Thread(target=_kill_once_busy, args=(backend._worker, signal.SIGSEGV)).start()
        event = run_query(backend, SLOW["sqlite"], Limits(query_timeout_s=60))
        assert event.error_kind == "error" and "crashed" in event.text
        assert run_query(backend, "SELECT COUNT(*) FROM node_country", Limits()).rows == [[33]]
    finally:
        backend.close()


@pytest.mark.parametrize("db, query", [("ladybug", "RETURN " + "[" * 800 + "1" + "]" * 800),
                                       ("sqlite", "SELECT " + "(" * 40 + "1" + ")" * 40)])
def test_a_run_whose_query_crashed_the_process_goes_on(tmp_path, db, query):
    """The run died with signal 11 (and stayed ``running``); now the query is an error observation and the run
    ends with its answer."""
    import json

    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings

    tool = "Graph DB" if db == "ladybug" else "Relational DB"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([f"Thought: look\nAction: {tool}\nAction input: {query}",
                                   "Thought: done\nFinal answer: You should allocate the merchant to malacca."]))
    runtime = AgentRuntime(tmp_path / "home")
    try:
        result = runtime.start(RunSettings("locating", 1, db, "iterrag", f"replay:{replies}", source="demo"))
        seen = [e for e in runtime.store.get(result.run_id).events if e.kind == "observation"]
    finally:
        runtime.close()
    assert result.status == "finished" and seen[0].error_kind == "syntax"
    assert f"more than {MAX_NESTING} deep" in seen[0].text


def test_the_query_that_crashed_the_cli_is_an_error_line(tmp_path):
    """``core query`` died with signal 11 on it; now the nesting guard refuses it with a message."""
    env = {**os.environ, "PLANRAG_HOME": str(tmp_path)}
    deep = "RETURN " + "[" * 800 + "1" + "]" * 800
    done = subprocess.run([sys.executable, "-m", "core", "query", "--source", "demo", "--scenario", "locating",
                           "--question", "1", "--db", "ladybug", deep], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and f"more than {MAX_NESTING} deep" in done.stderr


# --- 2. guards before the parsers and translators ----------------------------------------------------------
def test_deep_nesting_and_long_queries_are_refused_on_every_backend(any_backend):
    sql = any_backend.language == "sql"
    deep = ("SELECT " + "(" * 40 + "1" + ")" * 40 if sql else "RETURN " + "[" * 800 + "1" + "]" * 800)
    calls = ("SELECT " if sql else "RETURN ") + "abs(" * 400 + "1" + ")" * 400
    floats = "RETURN " + "toFloat(" * 400 + "1" + ")" * 400
    long = ("SELECT 1 AS a" if sql else "RETURN 1 AS a") + " " * 10 + "+ 1" * (MAX_QUERY_CHARS // 3)
    for text in (deep, calls) + (() if sql else (floats,)):
        with pytest.raises(QuerySyntaxError, match=f"more than {MAX_NESTING} deep"):
            any_backend.query(text)
    with pytest.raises(QuerySyntaxError, match="characters long"):
        any_backend.query(long)
    within = ("SELECT " if sql else "RETURN ") + "(" * 10 + "1" + ")" * 10 + " AS x"
    assert any_backend.query(within).rows == [[1]]
    brackets_in_a_string = ("SELECT '" if sql else "RETURN '") + "(" * 100 + "' AS x"
    assert any_backend.query(brackets_in_a_string).rows == [["(" * 100]]


def test_long_operator_chains_are_an_error_not_a_recursion_crash(demo):
    backend = open_backend("sqlite", demo)
    try:
        with pytest.raises(QuerySyntaxError, match="too deeply nested"):
            backend.query("SELECT " + "NOT " * 3000 + "1")
    finally:
        backend.close()


# --- 3. observation size -----------------------------------------------------------------------------------
def test_a_huge_cell_is_cut_and_marked_in_the_worker(worker):
    text = ("SELECT printf('%.*c', 500000, 'x') AS s" if worker.engine == "sqlite"
            else "RETURN repeat('x', 500000) AS s")
    r = worker.run(text, 30, 10)
    cell = r.rows[0][0]
    assert cell.startswith("x" * MAX_CELL_CHARS) and cell.endswith("…[cut: 500,000 characters in all]")
    assert any("cut" in n for n in r.notes)


def test_a_wide_row_is_cut_to_the_result_size_in_the_worker(worker):
    cell = "printf('%.*c', 20000, 'x')" if worker.engine == "sqlite" else "repeat('x', 20000)"
    text = ("SELECT " if worker.engine == "sqlite" else "RETURN ") + ", ".join(f"{cell} AS c{i}" for i in range(300))
    r = worker.run(text, 60, 10)
    assert len(r.rows[0]) == 300 and sum(len(v) for v in r.rows[0]) < MAX_RESULT_CHARS + 300 * 40
    assert r.rows[0][-1].startswith("…[cut: 20,000 characters in all]")


def test_an_agent_sees_and_stores_cells_cut_to_its_limit(demo):
    for name, text in (("sqlite", "SELECT printf('%.*c', 200000, 'y') AS s, 1 AS n"),
                       ("ladybug", "RETURN repeat('y', 200000) AS s, range(1, 100000) AS l")):
        backend = open_backend(name, demo)
        try:
            event = run_query(backend, text, Limits(cell_chars=500, observation_chars=2000))
        finally:
            backend.close()
        assert len(event.text) < 2200 and "…[cut: 200,000 characters in all]" in event.text
        assert all(len(str(v)) < 600 for v in event.rows[0])  # what the run store keeps


def test_server_rows_are_cut_as_they_stream_in():
    """What a server backend keeps of a wide result while it reads it (MySQL, Neo4j): each cell cut, no more rows kept than
    twice the result size, every row counted."""
    streamed = []

    def rows():
        for i in range(300):
            streamed.append(i)
            yield ["w" * 300_000, i]

    kept = RowKeeper(200, str)
    for row in rows():
        kept.add(row)
    assert kept.total == len(streamed) == 300
    assert 2 <= len(kept.rows) <= 2 * MAX_RESULT_CHARS // MAX_CELL_CHARS + 1
    assert kept.rows[0] == ["w" * MAX_CELL_CHARS + "…[cut: 300,000 characters in all]", "0"]
    narrow = RowKeeper(200)
    for i in range(300):
        narrow.add([i])
    assert len(narrow.rows) == 200 and narrow.total == 300


def test_caps_of_a_result_hold_for_any_backend():
    wide = QueryResult(["a", "b"], [["z" * 50_000, list(range(100_000))]] * 100, 100, 0.0)
    capped = wide.capped(1000, 20_000)
    assert len(capped.rows) < 100 and capped.total_rows == 100 and capped.truncated
    assert all(len(str(v)) <= 1100 for row in capped.rows for v in row)
    assert cap_cell(b"\x00" * 10_000, 50).endswith("…[cut: 20,003 characters in all]")
    assert cap_cell({"name": "a", "n": 1}, 50) == {"name": "a", "n": 1}
    assert cap_cell(cap_cell(list(range(100_000)), 1000), 500).endswith("…[cut: a longer list or map]")
    text = render_rows(["s"], [["q" * 100_000]], 1, max_chars=4000)  # a first row longer than the whole budget
    assert len(text) < 4100 and text.endswith("…[cut: 100,000 characters in all]")


# --- 4. time -----------------------------------------------------------------------------------------------
def test_a_worker_that_does_not_answer_is_killed_at_the_deadline_and_replaced(worker):
    _ok(worker)
    os.kill(worker.pid, signal.SIGSTOP)  # an engine stuck where its own time limit cannot reach
    with pytest.raises(QueryTimeout, match="restarted"):
        worker.run("SELECT 2" if worker.engine == "sqlite" else "RETURN 2", 0.2, 10)
    assert _ok(worker) == [[1]] and worker.starts == 2


def test_sqlite_function_chains_stop_at_the_time_limit(demo):
    inner = "printf('%.*c', 900000, 'x')"
    for i in range(18):
        inner = f"replace({inner}, '{'xy'[i % 2]}', '{'yx'[i % 2]}')"
    chain = " + ".join([f"length({inner})"] * 40)
    backend = open_backend("sqlite", demo)
    try:
        with pytest.raises(QueryTimeout):
            backend.query(f"SELECT {chain} AS n", timeout_s=0.2)
        assert backend.query("SELECT 1").rows == [[1]]
    finally:
        backend.close()


def test_ladybug_list_building_past_the_range_guard_ends(demo):
    backend = open_backend("ladybug", demo)
    try:
        with pytest.raises(QueryError):  # stopped at the deadline, or out of the worker's memory
            backend.query("RETURN size(list_reverse(range(1, 40000000*2)))", timeout_s=0.2)
        assert backend.query("RETURN 1").rows == [[1]]
    finally:
        backend.close()


def test_cancel_kills_the_running_query(worker):
    _ok(worker)
    threading.Thread(target=_once_busy, args=(worker, lambda pid: worker.cancel())).start()
    with pytest.raises(QueryError, match="stopped"):
        worker.run(SLOW[worker.engine], 60, 10)
    assert _ok(worker) == [[1]]


# --- 5. memory ---------------------------------------------------------------------------------------------
def test_a_worker_runs_within_its_memory_limit(worker):
    _ok(worker)
    limits = Path(f"/proc/{worker.pid}/limits")
    if not limits.exists():
        pytest.skip("no /proc")
    line = next(x for x in limits.read_text().splitlines() if x.startswith("Max address space"))
    assert str(MEMORY_LIMIT[worker.engine]) in line


def test_a_query_needing_too_much_memory_is_an_error(demo):
    for name, text in (("ladybug", "UNWIND range(1, 100000000*2) AS x RETURN count(x)"),
                       ("sqlite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000) "
                                  "SELECT count(*) FROM (SELECT CONCAT(printf('%.*c', 900000, 'x'), x) AS s FROM c "
                                  "GROUP BY s) AS g")):
        backend = open_backend(name, demo)
        try:
            with pytest.raises(QueryError, match="memory"):
                backend.query(text, timeout_s=60)
            assert len(backend.query("SELECT 1" if name == "sqlite" else "RETURN 1").rows) == 1
        finally:
            backend.close()


def test_a_worker_holds_no_secret(demo, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-CANARY-123456")
    w = Worker("sqlite", sqlite.database_file(demo))
    try:
        _ok(w)
        environ = Path(f"/proc/{w.pid}/environ")
        if environ.exists():
            assert b"CANARY" not in environ.read_bytes()
    finally:
        w.close()


# --- 6. read-only, by the engine ---------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["SELECT fts3_tokenizer('simple', x'4141414141414141')", "SELECT load_extension('x')",
                                  "SELECT length(replace(hex(zeroblob(100000000)), '0', '00'))",
                                  "SELECT sqlite_compileoption_used('THREADSAFE')", "SELECT randomblob(100)"])
def test_sqlite_allows_only_ordinary_functions(demo, text):
    w = Worker("sqlite", sqlite.database_file(demo))
    try:
        with pytest.raises(RefusedWrite, match="is not available here"):
            w.run(text, 10, 10)
    finally:
        w.close()


def test_sqlite_ordinary_functions_run(demo):
    backend = open_backend("sqlite", demo)
    try:
        r = backend.query("SELECT COUNT(*), ROUND(AVG(base_trading_power), 2), MAX(LENGTH(country_name)), "
                          "COALESCE(NULL, 1), UPPER(MIN(trade_node)), ABS(-2), "
                          "ROW_NUMBER() OVER (ORDER BY COUNT(*)) FROM node_country WHERE country_name LIKE 'T%'")
        assert r.rows[0][0] > 0
    finally:
        backend.close()


def test_ladybug_worker_cannot_touch_files_or_the_network(demo, tmp_path):
    if landlock_abi() < 4:
        pytest.skip("Landlock (ABI 4, with network rules) is not available on this kernel")
    w = Worker("ladybug", ladybug.database_file(demo))
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    try:
        for text in (f"COPY (MATCH (n) RETURN n.name) TO '{tmp_path / 'out.csv'}'",  # past the keyword check
                     f"EXPORT DATABASE '{tmp_path / 'export'}'",
                     f"LOAD FROM '{secret}' RETURN *",
                     "INSTALL json", "CHECKPOINT"):
            with pytest.raises(QueryError):
                w.run(text, 10, 10)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.csv"]
        assert _ok(w) == [[1]]
    finally:
        w.close()


def test_ladybug_statement_kinds_other_than_reads_are_refused(demo):
    backend = open_backend("ladybug", demo)
    try:
        for text in ("COPY (MATCH (n) RETURN n) TO '/tmp/x.csv'", "EXPORT DATABASE '/tmp/x'", "CALL threads=1",
                     "CHECKPOINT", "LOAD FROM '/etc/passwd' RETURN *", "INSTALL json",
                     "CALL current_setting('threads') RETURN *"):
            with pytest.raises((RefusedWrite, QuerySyntaxError)):
                backend.query(text)
    finally:
        backend.close()


# --- 7. the limits as settings -----------------------------------------------------------------------------
@pytest.mark.parametrize("limits", [dict(row_cap=-1), dict(query_timeout_s=float("nan")), dict(cell_chars=0),
                                    dict(observation_chars=10), dict(query_timeout_s=float("inf")),
                                    dict(row_cap=2.5), dict(max_cost_usd=float("nan"))])
def test_bad_limits_are_refused_with_their_name(limits):
    with pytest.raises(ValueError, match="row cap|timeout|cell size|observation size|cost"):
        Limits(**limits).validate()


@pytest.mark.parametrize("command", [["run"], ["bench"], ["query", "--source", "demo", "--scenario", "locating",
                                                          "--question", "1", "--db", "sqlite", "SELECT 1"]])
@pytest.mark.parametrize("flag", [["--row-cap", "-1"], ["--timeout", "nan"], ["--cell-chars", "x"]])
def test_bad_limit_flags_get_a_clear_error(command, flag):
    from core.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(command[:1] + flag + command[1:])
    assert e.value.code == 2


def test_the_settings_page_sets_the_query_limits():
    from tests.page_app import open_file

    at = open_file("pages/settings.py")
    at.number_input(key="limits_timeout").set_value(2.5)
    at.number_input(key="limits_row_cap").set_value(50)
    at.number_input(key="limits_observation").set_value(3000)
    at.number_input(key="limits_cell").set_value(300)
    at.button(key="limits_use").click().run()
    limits = at.session_state["limits"]
    assert (limits.query_timeout_s, limits.row_cap, limits.observation_chars, limits.cell_chars) == (2.5, 50, 3000, 300)
    assert not at.exception and not at.error
