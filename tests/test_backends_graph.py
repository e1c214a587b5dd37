"""The graph backends on real DQA files: Ladybug loading (counts, types, exact doubles, caching), read-only
enforcement, timeouts, errors, the Neo4j → Ladybug rewrites, result shaping and thread safety; Neo4j's
adapter without a server (fast unavailability, value conversion, error mapping) and on one
(tests.conftest.neo4j_server)."""
from __future__ import annotations

import json
import os
import threading

import pytest

from core.backends import cypher_dialect as cd
from core.backends import ladybug as lb
from core.backends.base import QueryError, QuerySyntaxError, QueryTimeout, RefusedWrite
from core.backends.registry import open_backend
from core.config.settings import DatabaseSettings


@pytest.fixture(scope="module")
def locating_db(dqa):
    return dqa.database(dqa.question("locating", 1))


@pytest.fixture(scope="module")
def building_db(dqa):
    question = next(q for q in dqa.questions("building") if q.database_ref == "USA1836")
    return dqa.database(question)


@pytest.fixture(scope="module")
def loc(locating_db):
    backend = open_backend("ladybug", locating_db)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def bld(building_db):
    backend = open_backend("ladybug", building_db)
    yield backend
    backend.close()


def _one(backend, text: str):
    return backend.query(text).rows[0][0]


def _bits(rows) -> list[tuple]:
    """Rows with floats as their exact bit pattern, sorted, for exact multiset comparison."""
    return sorted((tuple(v.hex() if isinstance(v, float) else v for v in r) for r in rows), key=repr)


# --- loading ----------------------------------------------------------------------------------------
def test_locating_counts(loc):
    assert [_one(loc, f"MATCH {p} RETURN count(x)") for p in
            ("(x:Trade_node)", "(x:Country)", "()-[x:source]->()", "()-[x:NodeCountry]->()")] == [80, 665, 159, 1480]


def test_building_counts_equal_graphdata(bld, building_db):
    graph = building_db.graph
    got = {label: _one(bld, f"MATCH (x:{label}) RETURN count(x)") for label in graph.nodes}
    got |= {rel: _one(bld, f"MATCH ()-[x:{rel}]->() RETURN count(x)") for rel in graph.rels}
    assert got == graph.counts()


def test_has_merchant_is_bool(loc):
    info = {r[1]: r[2] for r in loc.query("CALL table_info('NodeCountry') RETURN *").rows}
    assert info["has_merchant"] == "BOOL" and info["is_home"] == "BOOL"
    values = loc.query("MATCH ()-[r:NodeCountry]->() RETURN DISTINCT r.has_merchant").rows
    assert values and all(isinstance(v, bool) for (v,) in values)


@pytest.mark.parametrize("which", ["locating", "building"])
def test_every_value_round_trips_exactly(which, loc, bld, locating_db, building_db):
    backend, graph = (loc, locating_db.graph) if which == "locating" else (bld, building_db.graph)
    for t in graph.nodes.values():
        got = backend.query(f"MATCH (n:{t.label}) RETURN " + ", ".join(f"n.{p}" for p in t.properties),
                            row_cap=100_000).rows
        assert _bits(got) == _bits(t.rows), t.label
    for r in graph.rels.values():
        src, dst = graph.nodes[r.src].key, graph.nodes[r.dst].key
        items = [f"a.{src}", f"b.{dst}"] + [f"r.{p}" for p in r.properties]
        got = backend.query(f"MATCH (a:{r.src})-[r:{r.type}]->(b:{r.dst}) RETURN " + ", ".join(items),
                            row_cap=100_000).rows
        assert _bits(got) == _bits(r.rows), r.type


def test_built_file_is_cached_per_content(locating_db, loc, monkeypatch):
    path = lb.database_file(locating_db)
    assert path.is_file() and lb.database_file(locating_db) == path
    built = []
    monkeypatch.setattr(lb, "build", lambda *args: built.append(args))
    again = open_backend("ladybug", locating_db)
    try:
        assert built == []  # opened from the cached file, not built again
        assert _one(again, "MATCH (n:Trade_node) RETURN count(n)") == 80
    finally:
        again.close()


def test_schema_text(loc):
    assert loc.schema_text().splitlines() == [
        "Nodes:",
        "(:Trade_node {name: STRING, local_value: DOUBLE, is_inland: BOOL, total_power: DOUBLE, outgoing: DOUBLE, "
        "ingoing: DOUBLE})",
        "(:Country {name: STRING, home_node: STRING, development: DOUBLE})",
        "Relationships:",
        "(:Trade_node)-[:source {flow: DOUBLE}]->(:Trade_node)",
        "(:Country)-[:NodeCountry {is_home: BOOL, has_merchant: BOOL, base_trading_power: DOUBLE, "
        "calculated_trading_power: DOUBLE}]->(:Trade_node)"]


# --- read-only, timeouts, errors ----------------------------------------------------------------------
WRITES = [
    "CREATE (:Country {name: 'XXX'})", "MERGE (c:Country {name: 'XXX'})",
    "MATCH (n:Trade_node) SET n.local_value = 0", "MATCH ()-[f:source]->() DELETE f",
    "MATCH (n:Trade_node) DETACH DELETE n", "DROP TABLE source", "ALTER TABLE Trade_node ADD extra INT64",
    "CREATE NODE TABLE X(a INT64, PRIMARY KEY (a))", "COPY Trade_node FROM '/tmp/nodes.csv'",
    "MATCH (n:Trade_node) REMOVE n.local_value", "LOAD FROM '/etc/passwd' RETURN *", "INSTALL json",
    "ATTACH '/tmp/other.lbug' AS other (dbtype lbug)", "CHECKPOINT", "EXPORT DATABASE '/tmp/planrag-export'",
    "BEGIN TRANSACTION", "CALL timeout = 0", "CALL read_csv('/etc/passwd') RETURN *",
    "CALL project_graph('g', ['Trade_node'], ['source'])", "create (:Country {name: 'lower case'})",
]


def _state(backend) -> list:
    return [_one(backend, "MATCH (n) RETURN count(n)"), _one(backend, "MATCH ()-[r]->() RETURN count(r)"),
            _one(backend, "MATCH (n:Trade_node) RETURN sum(n.local_value)")]


def test_writes_refused_data_unchanged(loc):
    before = _state(loc)
    for text in WRITES:
        with pytest.raises(RefusedWrite):
            loc.query(text)
    assert _state(loc) == before
    assert not os.path.exists("/tmp/planrag-export")


def test_read_only_open_refuses_writes_without_the_precheck(loc, monkeypatch):
    monkeypatch.setattr(lb, "prepare", lambda text: text)
    monkeypatch.setattr(lb, "to_ladybug", lambda text: (text, []))
    before = _state(loc)
    for text in WRITES[:9]:
        with pytest.raises(RefusedWrite, match="read-only"):
            loc.query(text)
    assert _state(loc) == before


PRODUCT = ("MATCH (a:Country), (b:Country), (c:Country), (d:Country) WHERE a.development + b.development > "
           "c.development + d.development RETURN count(*)")  # a 3-way product takes 0.3 s: Ladybug is vectorised


def test_runaway_query_stopped_by_timeout(loc):
    # How soon the limit stops it is measured by bench/bench_limits.py, not asserted here.
    with pytest.raises(QueryTimeout):
        loc.query(PRODUCT, timeout_s=0.5)
    assert _one(loc, "MATCH (n:Trade_node) RETURN count(n)") == 80  # still usable


def test_runaway_query_really_runs_long(loc):
    with pytest.raises(QueryTimeout):  # a longer limit is reached too
        loc.query(PRODUCT, timeout_s=2.0)


def test_path_explosion_stopped_by_memory_limit_or_timeout(loc):
    with pytest.raises(QueryError, match="memory limit|longer than"):
        loc.query("MATCH (a)-[*1..30]->(b) RETURN count(*)", timeout_s=30)
    assert _one(loc, "MATCH (n:Trade_node) RETURN count(n)") == 80


def test_huge_range_refused_before_running(loc):
    with pytest.raises(QueryError, match="range"):
        loc.query("UNWIND range(1, 100000000000) AS x RETURN sum(x)")
    assert loc.query("UNWIND range(1, 1000) AS x RETURN sum(x)").rows == [[500500]]


@pytest.mark.parametrize("text, engine_words", [
    ("MATCH (n:Country RETURN n", "Parser exception"),
    ("MATCH (n:Nowhere) RETURN n", "Binder exception"),
    ("MATCH (n:Country) RETURN n.nothing", "Binder exception"),
    ("RETURN toString(1)", "TOSTRING does not exist"),
    ("MATCH (n:Country) WHERE n:Country RETURN n", "Parser exception"),
])
def test_syntax_errors_carry_the_engine_message(loc, text, engine_words):
    with pytest.raises(QuerySyntaxError, match=engine_words):
        loc.query(text)


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("  ;  ", "empty"), ("```cypher\n```", "empty"),
    ("MATCH (n) RETURN n; MATCH (m) RETURN m", "exactly one"),
    ("MATCH (n:Country {name: $name}) RETURN n", r"\$name"),
    ("SHOW TABLES", "not a read query"),
])
def test_unusable_input_rejected(loc, text, words):
    with pytest.raises(QuerySyntaxError, match=words):
        loc.query(text)


def test_fences_whitespace_and_trailing_semicolon_accepted(loc):
    for text in ["  MATCH (n:Trade_node) RETURN count(n);  ", "```cypher\nMATCH (n:Trade_node) RETURN count(n);\n```",
                 "```\nMATCH (n:Trade_node)\nRETURN count(n)\n```", "MATCH (n:Trade_node) RETURN count(n) // done\n;"]:
        result = loc.query(text)
        assert result.rows == [[80]] and ";" not in result.executed and "`" not in result.executed


# --- rewrites ---------------------------------------------------------------------------------------
REWRITES = [  # Neo4j form, Ladybug-native form giving the same rows
    ("MATCH (n:Trade_node) RETURN n.name, toFloat(n.ingoing) ORDER BY n.name",
     "MATCH (n:Trade_node) RETURN n.name, CAST(n.ingoing AS DOUBLE) ORDER BY n.name"),
    ("RETURN toFloat('2.5'), toFloat(3)", "RETURN 2.5, 3.0"),
    ("UNWIND [3.7, -3.7, 2.5, -2.5, 0.2, 5, -5] AS x RETURN toInteger(x)",
     "UNWIND [3, -3, 2, -2, 0, 5, -5] AS x RETURN x"),
    ("MATCH (g:Goods) RETURN toInteger(g.code), toInteger(g.current_price) ORDER BY g.code",
     "MATCH (g:Goods) RETURN g.code, CAST(floor(g.current_price) AS INT64) ORDER BY g.code"),
    ("MATCH ()-[r:NodeCountry]->() RETURN toBoolean(r.has_merchant), toBoolean('TRUE'), toBoolean('false') LIMIT 5",
     "MATCH ()-[r:NodeCountry]->() RETURN r.has_merchant, true, false LIMIT 5"),
    ("MATCH ()-[r]->() RETURN type(r), count(*) ORDER BY type(r)",
     "MATCH ()-[r]->() RETURN label(r), count(*) ORDER BY label(r)"),
    ("MATCH (n) WHERE 'Country' IN labels(n) RETURN labels(n), count(*)",
     "MATCH (n) WHERE label(n) = 'Country' RETURN [label(n)], count(*)"),
    ("MATCH (a)-[r:source]->(b) RETURN startNode(r).name, endNode(r).name ORDER BY a.name, b.name",
     "MATCH (a)-[r:source]->(b) RETURN a.name, b.name ORDER BY a.name, b.name"),
    ("MATCH (n:Trade_node) WHERE NOT exists((n)-[:source]->()) AND exists(n.name) RETURN n.name ORDER BY n.name",
     "MATCH (n:Trade_node) WHERE NOT EXISTS { MATCH (n)-[:source]->() } AND n.name IS NOT NULL "
     "RETURN n.name ORDER BY n.name"),
    ("MATCH (c:Country {name: 'SWE'})-[:NodeCountry]->(t) WITH collect(t) AS ts "
     "RETURN [t IN ts WHERE t.local_value > 3 | t.name], [t IN ts | t.is_inland], [t IN ts WHERE t.is_inland]",
     "MATCH (c:Country {name: 'SWE'})-[:NodeCountry]->(t) WITH collect(t) AS ts "
     "RETURN list_transform(list_filter(ts, t -> t.local_value > 3), t -> t.name), "
     "list_transform(ts, t -> t.is_inland), list_filter(ts, t -> t.is_inland)"),
    ("MATCH p = shortestPath((a:Trade_node {name: 'kongo'})-[:source*]->(b:Trade_node {name: 'english_channel'})) "
     "RETURN length(p)",
     "MATCH p = (a:Trade_node {name: 'kongo'})-[:source* SHORTEST]->(b:Trade_node {name: 'english_channel'}) "
     "RETURN length(p)"),
    ("MATCH p = allShortestPaths((a:Trade_node {name: 'kongo'})-[:source*..10]->(b:Trade_node)) "
     "RETURN b.name, length(p), count(*) ORDER BY b.name",
     "MATCH p = (a:Trade_node {name: 'kongo'})-[:source* ALL SHORTEST 1..10]->(b:Trade_node) "
     "RETURN b.name, length(p), count(*) ORDER BY b.name"),
    ("MATCH (n:Trade_node) WHERE n.name != 'kongo' RETURN count(*)",
     "MATCH (n:Trade_node) WHERE n.name <> 'kongo' RETURN count(*)"),
]


@pytest.mark.parametrize("neo4j_form, native", REWRITES, ids=[r[0][:40] for r in REWRITES])
def test_rewrite_gives_the_native_rows(loc, bld, neo4j_form, native):
    backend = bld if "Goods" in native else loc
    rewritten, direct = backend.query(neo4j_form, row_cap=1000), backend.query(native, row_cap=1000)
    assert rewritten.notes and not direct.notes
    assert rewritten.rows == direct.rows and rewritten.total_rows == direct.total_rows > 0


def test_to_integer_of_a_string_fails_rather_than_differ(loc):
    with pytest.raises(QuerySyntaxError, match="rewritten"):
        loc.query("RETURN toInteger('42')")


def test_top_k_before_aggregation_keeps_its_order(loc, locating_db):
    top = sorted(locating_db.graph.nodes["Trade_node"].rows, key=lambda r: -r[1])[:3]
    result = loc.query("MATCH (n:Trade_node) WITH n ORDER BY n.local_value DESC LIMIT 3 "
                       "RETURN collect(n.name), sum(n.local_value)")
    assert result.rows[0][0] == [r[0] for r in top]
    assert result.rows[0][1] == pytest.approx(sum(r[1] for r in top), rel=1e-12)
    assert any("ORDER BY" in n for n in result.notes)


def test_rewrites_leave_literals_names_and_comments_alone(loc):
    text = ("RETURN 'toFloat(x) type(r) != [x IN l | x]' AS `toInteger(y)`, \"labels(n)\" AS s "
            "// shortestPath((a)-[*]->(b)) exists(n.x)\n")
    result = loc.query(text)
    assert result.notes == [] and result.executed == text.strip()
    assert result.columns == ["toInteger(y)", "s"]
    assert result.rows == [["toFloat(x) type(r) != [x IN l | x]", "labels(n)"]]


@pytest.mark.parametrize("text", [
    "MATCH (n) RETURN n.type, {type: 1}, n.labels",  # properties and map keys named like functions
    "MATCH p = shortestPath((a)-[*2..5]->(b)) RETURN p",  # lower bound 2: no Ladybug equivalent
    "RETURN toString(1), split('a,b', ','), head([1]), round(2.5)",  # not exact: left to fail
    "MATCH (n) WITH n ORDER BY n.x LIMIT 3 RETURN n.name",  # no aggregation after the top-k
])
def test_no_rewrite_where_semantics_would_change(text):
    assert cd.to_ladybug(text) == (text, [])


# --- results ----------------------------------------------------------------------------------------
def test_row_cap_and_total_rows(loc):
    result = loc.query("MATCH (c:Country) RETURN c.name", row_cap=7)
    assert len(result.rows) == 7 and result.total_rows == 665 and result.truncated
    assert loc.query("MATCH (c:Country) RETURN c.name", row_cap=0).rows == []


def test_columns_named_as_neo4j_names_them(loc):
    result = loc.query("MATCH (n:Trade_node) RETURN count(*), n.is_inland AS inland, toFloat(sum(n.ingoing)) "
                       "ORDER BY inland")
    assert result.columns == ["count(*)", "inland", "toFloat(sum(n.ingoing))"]
    assert loc.query("MATCH (n:Trade_node) WITH n.name AS name RETURN * LIMIT 1").columns == ["name"]


def test_values_are_plain_json(loc):
    result = loc.query("MATCH p = (c:Country {name: 'SWE'})-[r:NodeCountry]->(t:Trade_node {name: 'baltic_sea'}) "
                       "RETURN c, r, p, id(c), [c.name], {a: c.development}, sum(1)")
    c, r, p, ident, names, struct, total = result.rows[0]
    assert c == {"_label": "Country", "name": "SWE", "home_node": "baltic_sea", "development": 107.373}
    assert r["_label"] == "NodeCountry" and r["is_home"] is True and set(r) == {
        "_label", "is_home", "has_merchant", "base_trading_power", "calculated_trading_power"}
    assert p["nodes"][0] == c and p["relationships"] == [r]
    assert p["nodes"][1]["_label"] == "Trade_node" and "home_node" not in p["nodes"][1]  # nulls dropped
    assert isinstance(ident, str) and names == ["SWE"] and struct == {"a": 107.373}
    assert total == 1 and type(total) is int
    json.dumps(result.rows, allow_nan=False)


def test_dialect_note_is_short():
    assert len(cd.LADYBUG_DIALECT_NOTE.splitlines()) <= 8


# --- threads ----------------------------------------------------------------------------------------
def test_threads_share_a_backend_and_open_their_own(loc, locating_db):
    text = "MATCH (c:Country)-[r:NodeCountry]->(t:Trade_node) RETURN t.name, sum(r.base_trading_power) ORDER BY t.name"
    expected = loc.query(text, row_cap=1000).rows
    errors, results = [], []

    def work(own: bool):
        try:
            backend = open_backend("ladybug", locating_db) if own else loc
            for _ in range(10):
                results.append(backend.query(text, row_cap=1000).rows == expected)
            if own:
                backend.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 80 and all(results)


# --- Neo4j ------------------------------------------------------------------------------------------
def test_neo4j_unavailable_quickly_with_a_reason():
    from core.backends import neo4j as nb

    assert "NEO4J_URI is not set" in nb.unavailable(DatabaseSettings(neo4j_uri=None))
    reason = nb.unavailable(DatabaseSettings(neo4j_uri="bolt://127.0.0.1:7", neo4j_password="x"))
    assert reason and "bolt://127.0.0.1:7" in reason


def test_neo4j_values_made_plain():
    import neo4j.graph
    import neo4j.time

    from core.backends import neo4j as nb

    graph = neo4j.graph.Graph()
    a = neo4j.graph.Node(graph, "4:x:1", 1, ["Country"], {"name": "SWE", "development": 107.373})
    b = neo4j.graph.Node(graph, "4:x:2", 2, ["Trade_node"], {"name": "baltic_sea", "gone": None})
    r = graph.relationship_type("NodeCountry")(graph, "5:x:1", 1, {"is_home": True})
    r._start_node, r._end_node = a, b
    path = neo4j.graph.Path(a, r)
    got = nb.plain([a, r, path, {"d": neo4j.time.Date(1444, 11, 11)}, (1, 2.5)])
    node_a = {"_label": "Country", "name": "SWE", "development": 107.373}
    rel = {"_label": "NodeCountry", "is_home": True}
    assert got == [node_a, rel, {"nodes": [node_a, {"_label": "Trade_node", "name": "baltic_sea"}],
                                 "relationships": [rel]}, {"d": "1444-11-11"}, [1, 2.5]]
    json.dumps(got)


@pytest.mark.parametrize("code, error", [
    ("Neo.ClientError.Statement.SyntaxError", QuerySyntaxError),
    ("Neo.ClientError.Statement.ParameterMissing", QuerySyntaxError),
    ("Neo.ClientError.Statement.AccessMode", RefusedWrite),
    ("Neo.TransientError.General.ForbiddenOnReadOnlyDatabase", RefusedWrite),
    ("Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration", QueryTimeout),
    ("Neo.ClientError.Statement.ArithmeticError", QueryError),
])
def test_neo4j_errors_mapped(code, error):
    from neo4j.exceptions import Neo4jError

    from core.backends import neo4j as nb

    mapped = nb._error(Neo4jError._hydrate_neo4j(code=code, message="boom"), 0.5)
    assert type(mapped) is error


@pytest.fixture(scope="module")
def neo4j_loc(locating_db, neo4j_server):
    backend = open_backend("neo4j", locating_db)
    yield backend
    backend.close()


def test_neo4j_server_loads_refuses_and_times_out(neo4j_loc):
    assert _one(neo4j_loc, "MATCH (n:Trade_node) RETURN count(n)") == 80
    assert _one(neo4j_loc, "MATCH ()-[r:NodeCountry]->() RETURN count(r)") == 1480
    assert isinstance(_one(neo4j_loc, "MATCH ()-[r:NodeCountry]->() RETURN r.has_merchant LIMIT 1"), bool)
    with pytest.raises(RefusedWrite):
        neo4j_loc.query("CREATE (:Country {name: 'XXX'})")
    with pytest.raises(QuerySyntaxError):
        neo4j_loc.query("MATCH (n:Country RETURN n")
    with pytest.raises(QueryTimeout):
        neo4j_loc.query("MATCH (a:Country), (b:Country), (c:Country) WHERE a.development + b.development "
                        "> c.development RETURN count(*)", timeout_s=0.5)
    assert _one(neo4j_loc, "MATCH (n:Country) RETURN count(n)") == 665
