"""The SQL backends (embedded SQLite, MySQL/MariaDB) on real DQA databases: loading, MySQL as agents write it
(translated by sqlglot for SQLite, giving the same rows as MariaDB), case-insensitive strings, read-only
enforcement by the engines, time limits, one statement per query, row caps."""
from __future__ import annotations

import re
import sqlite3
import threading

import pytest

from core.backends import mysql, sql_dialect, sqlite
from core.backends.base import BackendUnavailable, QueryError, QuerySyntaxError, QueryTimeout, RefusedWrite
from core.config.settings import DatabaseSettings
from tests.conftest import require

LOCATING_COUNTS = {"country": 665, "trade_node": 80, "flow": 159, "node_country": 1480}
BUILDING_COUNTS = {"goods": 52, "building": 251, "supply": 445, "demand": 260}

#: A join of 1480^3 row combinations: minutes of work for either engine.
RUNAWAY = ("SELECT COUNT(*) AS n FROM node_country a, node_country b, node_country c "
           "WHERE a.base_trading_power + b.base_trading_power < c.base_trading_power")

#: (id, database, MySQL query, absolute tolerance on numbers). Every output column is aliased so that column
#: names agree; MySQL rounds ``/`` on integers to 4 decimals where SQLite keeps the double.
MYSQLISMS = [
    ("backticks_double_quotes", "locating",
     'SELECT `country_name` AS c, `development` AS d FROM `country` WHERE `home_node` = "baltic_sea" '
     "ORDER BY `development` DESC, `country_name` LIMIT 5", 0),
    ("limit_offset_comma", "locating", "SELECT trade_node AS t FROM trade_node ORDER BY trade_node LIMIT 3, 4", 0),
    ("order_strings", "locating", "SELECT trade_node AS t FROM trade_node ORDER BY trade_node", 0),
    ("group_by_aggregates", "locating",
     "SELECT home_node AS h, COUNT(*) AS n, SUM(development) AS s, MAX(development) AS m, AVG(development) AS a "
     "FROM country GROUP BY home_node ORDER BY n DESC, h LIMIT 10", 0),
    ("concat_ifnull", "locating",
     'SELECT CONCAT(source, "->", dest) AS edge, IFNULL(flow, 0) AS f FROM flow ORDER BY flow DESC, edge LIMIT 5',
     0),
    ("true_false", "locating",
     "SELECT COUNT(*) AS n, SUM(has_merchant) AS m FROM node_country WHERE is_home = TRUE AND has_merchant = FALSE",
     0),
    ("boolean_column", "locating",
     "SELECT trade_node AS t, is_inland AS i FROM trade_node WHERE is_inland ORDER BY trade_node", 0),
    ("if", "locating",
     'SELECT IF(is_inland, "inland", "coastal") AS kind, COUNT(*) AS n FROM trade_node GROUP BY kind ORDER BY kind',
     0),
    ("scalar_subquery", "locating",
     "SELECT trade_node AS t FROM trade_node WHERE total_power > (SELECT AVG(total_power) FROM trade_node) "
     "ORDER BY total_power DESC", 0),
    ("in_subquery", "locating",
     "SELECT country_name AS c FROM country WHERE country_name IN (SELECT country_name FROM node_country "
     "WHERE is_home = TRUE AND trade_node = 'baltic_sea') ORDER BY c", 0),
    ("join", "locating",
     "SELECT c.country_name AS c, nc.trade_node AS t, nc.calculated_trading_power AS p FROM country c "
     'JOIN node_country nc ON nc.country_name = c.country_name WHERE c.country_name = "SWE" ORDER BY p DESC, t', 0),
    ("left_join_having", "locating",
     "SELECT f.dest AS d, SUM(f.flow) AS inflow, MAX(t.local_value) AS v FROM flow f "
     "LEFT JOIN trade_node t ON t.trade_node = f.dest GROUP BY f.dest HAVING SUM(f.flow) > 1 "
     "ORDER BY inflow DESC, d LIMIT 5", 0),
    ("count_distinct", "locating", "SELECT COUNT(DISTINCT home_node) AS n FROM country", 0),
    ("join_group_building", "building",
     "SELECT g.goods_name AS g, SUM(s.current_output) AS o FROM goods g JOIN supply s ON s.goods_id = g.code "
     "GROUP BY g.goods_name ORDER BY o DESC, g LIMIT 5", 0),
    ("integer_arithmetic", "building",
     "SELECT SUM(level) / COUNT(*) AS mean_level, SUM(level) AS total, 7 DIV 2 AS q, 5 / 2 AS r FROM building",
     1e-4),
    ("expression_order", "building",
     "SELECT b.name AS n, d.max_demand - d.current_input AS gap FROM demand d JOIN building b "
     "ON b.id = d.building_id ORDER BY gap DESC, d.building_id, d.goods_id LIMIT 5", 0),
]

#: (MySQL condition, the same with exact case): each must select the same rows on both engines.
CASE_INSENSITIVE = [
    ('country_name = "swe"', "country_name = 'SWE'"),
    ("home_node LIKE 'BALTIC%'", "home_node LIKE 'baltic%'"),
    ("country_name IN ('swe', 'Dan')", "country_name IN ('SWE', 'DAN')"),
    ("home_node = 'Baltic_Sea' AND country_name <> 'swe'", "home_node = 'baltic_sea' AND country_name <> 'SWE'"),
    ("LOWER(home_node) = 'Baltic_Sea'", "home_node = 'baltic_sea'"),  # an expression, not a column
    ("CONCAT(country_name, '') IN ('swe', 'dan')", "country_name IN ('SWE', 'DAN')"),
]

WRITES = ["INSERT INTO country VALUES ('XXX', 'baltic_sea', 1)", "UPDATE trade_node SET local_value = 0",
          "DELETE FROM flow", "REPLACE INTO country VALUES ('SWE', 'lubeck', 1)", "DROP TABLE flow",
          "CREATE TABLE intruder (x INT)", "CREATE INDEX i ON country (development)",
          "ALTER TABLE flow ADD COLUMN z INT"]
ENGINE_ONLY_WRITES = {
    "sqlite": ["ATTACH DATABASE ':memory:' AS m", "PRAGMA writable_schema = ON", "PRAGMA journal_mode = WAL",
               "CREATE TEMP TABLE t AS SELECT 1"],
    "mysql": ["TRUNCATE TABLE flow", "RENAME TABLE flow TO flow2", "CREATE DATABASE dqa_intruder",
              "SET GLOBAL max_connections = 3", "GRANT SELECT ON *.* TO planrag_reader",
              "SELECT * FROM country INTO OUTFILE '/tmp/planrag_out'"],
}


def mysql_settings() -> DatabaseSettings:
    """The MySQL/MariaDB server of MYSQL_URL; skips (fails under REQUIRE_MYSQL=1) when it is unreachable."""
    settings = DatabaseSettings()
    reason = mysql.unavailable(settings)
    if reason:
        require("mysql", f"MySQL/MariaDB backend tests need a server: {reason}")
    return settings


@pytest.fixture(scope="module")
def locating(dqa):
    return dqa.database(dqa.question("locating", 1))


@pytest.fixture(scope="module")
def building(dqa):
    question = next(q for q in dqa.questions("building") if q.database_ref == "USA1836")
    return dqa.database(question)


def _backend(engine: str, database):
    if engine == "sqlite":
        return sqlite.open_database(database, DatabaseSettings())
    return mysql.open_database(database, mysql_settings())


@pytest.fixture(scope="module")
def sqlite_locating(locating):
    backend = _backend("sqlite", locating)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def sqlite_building(building):
    backend = _backend("sqlite", building)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def mysql_locating(locating):
    backend = _backend("mysql", locating)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def mysql_building(building):
    backend = _backend("mysql", building)
    yield backend
    backend.close()


@pytest.fixture(params=["sqlite", "mysql"])
def engine(request) -> str:
    return request.param


def backend_for(request, engine: str, scenario: str):
    return request.getfixturevalue(f"{engine}_{scenario}")


def count(backend, table: str) -> int:
    return backend.query(f"SELECT COUNT(*) AS n FROM {table}").rows[0][0]


def assert_unchanged(backend, locating) -> None:
    """Row counts and a column sum as loaded."""
    assert {table: count(backend, table) for table in LOCATING_COUNTS} == LOCATING_COUNTS
    total = backend.query("SELECT SUM(local_value) AS s FROM trade_node").rows[0][0]
    assert total == pytest.approx(sum(locating.tables["trade_node"].column("local_value")), rel=1e-12)


def assert_same_rows(a: list[list], b: list[list], tolerance: float = 0) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb):
            if isinstance(x, float) or isinstance(y, float):
                assert x == pytest.approx(y, rel=1e-12, abs=tolerance), (ra, rb)
            else:
                assert x == y, (ra, rb)


def test_schema_text_is_the_dumps_create_tables(dqa_dir, locating, building):
    def normal(text):
        return re.sub(r"\s+", "", text).lower()

    for database, dump in ((locating, "locating/queries/SQL_format/q1.sql"),
                           (building, "building/queries/SQL_format/USA1836.sql")):
        declared = [line for line in (dqa_dir / dump).read_text().splitlines() if line.startswith("CREATE")]
        assert [normal(s) for s in sql_dialect.schema_text(database.tables).splitlines()] == \
            [normal(s) for s in declared]
    assert "name VARCHAR(80)" in sql_dialect.schema_text(building.tables)


@pytest.mark.parametrize("scenario, counts", [("locating", LOCATING_COUNTS), ("building", BUILDING_COUNTS)])
def test_load_row_counts(request, engine, scenario, counts):
    backend = backend_for(request, engine, scenario)
    assert {table: count(backend, table) for table in counts} == counts
    assert backend.schema_text() == sql_dialect.schema_text(backend.database.tables)


def test_values_round_trip_exactly(request, engine, locating, building):
    for scenario, database in (("locating", locating), ("building", building)):
        backend = backend_for(request, engine, scenario)
        for table in database.tables:
            result = backend.query(f"SELECT * FROM {table.name}", row_cap=10_000)
            assert result.columns == table.column_names
            expected = [tuple(int(v) if isinstance(v, bool) else v for v in row) for row in table.rows]
            assert sorted(map(tuple, result.rows)) == sorted(expected)


def test_sqlite_translation_of_mysql_quoting(sqlite_locating, locating):
    result = sqlite_locating.query('SELECT `country_name` AS c FROM `country` WHERE `home_node` = "baltic_sea"')
    assert "`" not in result.executed and '"baltic_sea"' not in result.executed
    assert "'baltic_sea'" in result.executed
    expected = sorted(r["country_name"] for r in locating.tables["country"].records() if r["home_node"] == "baltic_sea")
    assert sorted(r[0] for r in result.rows) == expected and expected


@pytest.mark.parametrize("scenario, sql, tolerance", [case[1:] for case in MYSQLISMS], ids=[c[0] for c in MYSQLISMS])
def test_mysql_isms_same_rows_on_sqlite_and_mariadb(request, scenario, sql, tolerance):
    lite = backend_for(request, "sqlite", scenario).query(sql, row_cap=1000)
    server = backend_for(request, "mysql", scenario).query(sql, row_cap=1000)
    assert lite.columns == server.columns
    assert lite.total_rows == server.total_rows > 0
    assert_same_rows(lite.rows, server.rows, tolerance)


@pytest.mark.parametrize("condition, exact", CASE_INSENSITIVE)
def test_string_comparison_ignores_case(request, engine, condition, exact):
    backend = backend_for(request, engine, "locating")
    sql = "SELECT country_name AS c FROM country WHERE {} ORDER BY country_name"
    rows = backend.query(sql.format(condition)).rows
    assert rows and rows == backend.query(sql.format(exact)).rows


def test_grouping_ignores_case_the_same_way(request, engine):
    backend = backend_for(request, engine, "locating")
    rows = backend.query("SELECT COUNT(*) AS n FROM country WHERE country_name IN ('SWE', 'swe', 'Swe')").rows
    assert rows == [[1]]


@pytest.mark.parametrize("sql", WRITES)
def test_writes_refused_and_data_unchanged(request, engine, sql, locating):
    backend = backend_for(request, engine, "locating")
    with pytest.raises(RefusedWrite):
        backend.query(sql)
    with pytest.raises(RefusedWrite):  # past the keyword check: the engine itself refuses
        backend._run(sql, 5, 10)
    assert_unchanged(backend, locating)


def test_engine_specific_writes_refused(request, engine, locating):
    backend = backend_for(request, engine, "locating")
    for sql in ENGINE_ONLY_WRITES[engine]:
        with pytest.raises(RefusedWrite):
            backend._run(sql, 5, 10)
    assert_unchanged(backend, locating)


def test_write_inside_a_cte_refused_on_sqlite(sqlite_locating):
    with pytest.raises(RefusedWrite):
        sqlite_locating.query("WITH x AS (SELECT 1) DELETE FROM flow")
    assert count(sqlite_locating, "flow") == LOCATING_COUNTS["flow"]


def test_reader_cannot_see_other_databases(mysql_locating):
    for sql in ("SELECT * FROM mysql.user", f"SELECT * FROM {mysql.META}.secret"):
        with pytest.raises(RefusedWrite):
            mysql_locating.query(sql)


def test_runaway_query_stopped(request, engine):
    # How soon the limit stops it is measured by bench/bench_limits.py, not asserted here.
    backend = backend_for(request, engine, "locating")
    with pytest.raises(QueryTimeout):
        backend.query(RUNAWAY, timeout_s=0.5)
    with pytest.raises(QueryTimeout):  # it really runs long: a longer limit is reached too
        backend.query(RUNAWAY, timeout_s=2)
    assert count(backend, "country") == LOCATING_COUNTS["country"]  # the connection still works


@pytest.mark.parametrize("sql", ["SELEC country_name FROM country", "SELECT FROM country WHERE",
                                 "SELECT country_name FROM country WHERE (development > 1"])
def test_syntax_error(request, engine, sql):
    with pytest.raises(QuerySyntaxError):
        backend_for(request, engine, "locating").query(sql)


def test_unknown_column_is_a_query_error(request, engine):
    with pytest.raises(QueryError, match="nosuch"):
        backend_for(request, engine, "locating").query("SELECT nosuch FROM country")


@pytest.mark.parametrize("sql", ["SELECT 1; SELECT 2", "SELECT country_name FROM country; DROP TABLE flow",
                                 "```sql\nSELECT 1;\nSELECT 2;\n```"])
def test_several_statements_refused(request, engine, sql):
    backend = backend_for(request, engine, "locating")
    with pytest.raises(QuerySyntaxError, match="2 statements"):
        backend.query(sql)
    assert count(backend, "flow") == LOCATING_COUNTS["flow"]


@pytest.mark.parametrize("text", ["```sql\nSELECT COUNT(*) AS n FROM country;\n```",
                                  "\n  SELECT COUNT(*) AS n FROM country ;  -- all of them\n",
                                  "```\nSELECT COUNT(*) AS n FROM country\n```", "SELECT COUNT(*) AS n FROM country;;"])
def test_code_fences_and_semicolons_accepted(request, engine, text):
    result = backend_for(request, engine, "locating").query(text)
    assert result.rows == [[LOCATING_COUNTS["country"]]]
    assert result.executed.rstrip().endswith("country")


@pytest.mark.parametrize("text", ["", "  ;  ", "```sql\n```", "-- nothing"])
def test_empty_query(request, engine, text):
    with pytest.raises(QuerySyntaxError, match="empty"):
        backend_for(request, engine, "locating").query(text)


@pytest.mark.parametrize("sql", ["SELECT TRUNCATE(development, 1) AS d FROM country",
                                 "SELECT country_name FROM country FOR UPDATE"])
def test_untranslatable_mysql_raises_on_sqlite(sqlite_locating, sql):
    with pytest.raises(QuerySyntaxError, match="cannot be translated"):
        sqlite_locating.query(sql)


def test_untranslatable_mysql_runs_on_mariadb(mysql_locating):
    result = mysql_locating.query("SELECT TRUNCATE(development, 1) AS d FROM country ORDER BY development DESC")
    assert result.total_rows == LOCATING_COUNTS["country"]


def test_metadata_statements_only_on_mysql(sqlite_locating, mysql_locating):
    with pytest.raises(QuerySyntaxError, match="SHOW"):
        sqlite_locating.query("SHOW TABLES")
    assert sorted(r[0] for r in mysql_locating.query("SHOW TABLES").rows) == sorted(LOCATING_COUNTS)


def test_row_cap_total_rows_and_text(request, engine):
    backend = backend_for(request, engine, "locating")
    result = backend.query("SELECT * FROM node_country ORDER BY calculated_trading_power DESC, trade_node, "
                           "country_name", row_cap=10)
    assert len(result.rows) == 10 and result.total_rows == 1480 and result.truncated
    assert all(type(v) in (str, int, float) for row in result.rows for v in row)
    assert "1475 more rows not shown (1480 rows in all)" in result.to_text(max_rows=5)
    assert backend.query("SELECT * FROM flow", row_cap=0).total_rows == LOCATING_COUNTS["flow"]


def test_plain_python_values(request, engine):
    backend = backend_for(request, engine, "building")
    total, mean, top = backend.query("SELECT SUM(level) AS t, AVG(level) AS a, MAX(base_price) AS m "
                                     "FROM building, (SELECT MAX(base_price) AS base_price FROM goods) g").rows[0]
    assert type(total) is int and type(mean) is float and type(top) is float


def test_queries_from_several_threads(request, engine):
    backend = backend_for(request, engine, "locating")
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(count(backend, "node_country"))
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [LOCATING_COUNTS["node_country"]] * 20


def test_sqlite_file_cached_per_content(locating, tmp_path, monkeypatch):
    path = sqlite.database_file(locating)
    build_file, built = sqlite.build_file, []
    monkeypatch.setattr(sqlite, "build_file", lambda *args: built.append(args))
    again = sqlite.open_database(locating, DatabaseSettings())
    assert built == [] and sqlite.database_file(locating) == path  # opened from the cached file, not built again
    other = sqlite.open_database(locating, DatabaseSettings())
    again.close()
    assert count(other, "country") == LOCATING_COUNTS["country"]
    other.close()
    build_file(locating.tables, tmp_path / "fresh.sqlite")  # bench/bench_load.py measures how long this takes
    fresh = sqlite3.connect(tmp_path / "fresh.sqlite")
    assert fresh.execute("SELECT COUNT(*) FROM country").fetchone()[0] == LOCATING_COUNTS["country"]
    fresh.close()


def test_mysql_load_skipped_when_complete(mysql_building, building):
    settings = mysql_settings()
    assert mysql.load(building, settings) is False
    assert mysql.load(building, settings, reload=True) is True
    assert mysql.load(building, settings) is False
    assert count(mysql_building, "supply") == BUILDING_COUNTS["supply"]


def test_mysql_unreachable_server(locating):
    settings = DatabaseSettings(mysql_url="mysql://root@127.0.0.1:1")
    assert "127.0.0.1:1" in mysql.unavailable(settings)
    with pytest.raises(BackendUnavailable):
        mysql.open_database(locating, settings)
    assert "mysql://" in mysql.unavailable(DatabaseSettings(mysql_url="postgres://x@y"))


def test_a_syntax_error_says_where_the_parser_stopped_in_sql_terms():
    """Issue 29: a query with a syntax error told the model and the user sqlglot's internals ("Required keyword:
    'expressions' missing for <class 'sqlglot...Aliases'>"); the message says where the query stops being SQL."""
    from core.backends.sql_dialect import mysql_to_sqlite

    with pytest.raises(QuerySyntaxError) as e:
        mysql_to_sqlite("SELECT current_price * (1 + 0.75((pop_demand + SUM(max_demand)) - (current_output + "
                        "SUM(max_supply))) / MAX(pop_demand, max_supply))")
    assert str(e.value) == ('syntax error near "(" at line 1, column 34: the query reads as SQL up to "SELECT '
                            'current_price * (1 + 0.75(" and cannot go on there')
    with pytest.raises(QuerySyntaxError) as e:
        mysql_to_sqlite("SELECT country_name\nFROM country WHERE (development > 1 FROM x")
    assert str(e.value).startswith('syntax error near "FROM" at line 2, column 37, expected ")"')
    said = [str(e.value)]
    for sql in ("SELECT a FROM t WHERE", "SELECT a FROM t WHERE x = = 2", "SELEC a FROM t"):
        with pytest.raises(QuerySyntaxError) as e:
            mysql_to_sqlite(sql)
        said.append(str(e.value))
    assert all(t.startswith("syntax error near ") and "sqlglot" not in t and "Required keyword" not in t
               and "<class" not in t for t in said), said


def test_the_agent_is_told_its_own_query_and_the_analyst_sees_the_query_as_run(sqlite_locating):
    """Issue 29: the model copied the rewrite (COLLATE NOCASE, CAST AS REAL) from error notes into its next query;
    the note quotes no rewrite, which goes to the observation's ``executed`` (the Run page's "As the database ran
    it") only."""
    from core.agents.nodes import run_query
    from core.model.run_settings import Limits

    query = "SELECT nosuch FROM country WHERE country_name = 'SWE'"
    with pytest.raises(QueryError) as e:
        sqlite_locating.query(query)
    assert "COLLATE" not in str(e.value) and "query as run" not in str(e.value) and "nosuch" in str(e.value)
    assert "COLLATE NOCASE" in e.value.executed
    event = run_query(sqlite_locating, query, Limits())
    assert event.error and "COLLATE" not in event.text and "COLLATE NOCASE" in event.executed
