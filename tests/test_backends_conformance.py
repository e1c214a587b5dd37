"""One conformance suite for every database backend, on real DQA files: the same data, the same answers
to typical analysis queries, every write refused, runaway queries stopped, syntax errors reported."""
from __future__ import annotations

import math

import pytest

from core.backends.base import QuerySyntaxError, QueryTimeout, RefusedWrite
from core.backends.registry import language, open_backend, unavailable
from tests.conftest import require

BACKENDS = ["sqlite", "mysql", "ladybug", "neo4j"]

COUNTS = {
    "sql": {"locating": ["country", "trade_node", "flow", "node_country"],
            "building": ["goods", "building", "supply", "demand"]},
    "cypher": {"locating": ["(x:Country)", "(x:Trade_node)", "()-[x:source]->()", "()-[x:NodeCountry]->()"],
               "building": ["(x:Goods)", "(x:Building)", "()-[x:Supply]->()", "()-[x:Demand]->()"]},
}

QUERIES = {
    "sources_of_home": {
        "sql": "SELECT source, flow FROM flow WHERE dest = 'baltic_sea' ORDER BY source",
        "cypher": "MATCH (s:Trade_node)-[f:source]->(d:Trade_node {name: 'baltic_sea'}) "
                  "RETURN s.name, f.flow ORDER BY s.name",
    },
    "presence_by_power": {
        "sql": "SELECT trade_node, base_trading_power FROM node_country WHERE country_name = 'SWE' "
               "ORDER BY base_trading_power DESC, trade_node",
        "cypher": "MATCH (c:Country {name: 'SWE'})-[r:NodeCountry]->(n:Trade_node) "
                  "RETURN n.name, r.base_trading_power ORDER BY r.base_trading_power DESC, n.name",
    },
    "aggregate_per_node": {
        "sql": "SELECT trade_node, COUNT(*) AS countries, SUM(base_trading_power) AS power FROM node_country "
               "GROUP BY trade_node ORDER BY trade_node",
        "cypher": "MATCH (c:Country)-[r:NodeCountry]->(n:Trade_node) "
                  "WITH n.name AS node, collect(c.name) AS countries, sum(r.base_trading_power) AS power "
                  "RETURN node, size(countries), power ORDER BY node",
    },
}

BUILDING_SUPPLIERS = {
    "sql": "SELECT b.id, b.name, s.current_output FROM supply s JOIN building b ON b.id = s.building_id "
           "JOIN goods g ON g.code = s.goods_id WHERE g.goods_name = 'furniture' ORDER BY b.id",
    "cypher": "MATCH (b:Building)-[s:Supply]->(g:Goods {name: 'furniture'}) "
              "RETURN b.id, b.name, s.current_output ORDER BY b.id",
}

WRITES = {
    "sql": ["INSERT INTO country VALUES ('XXX', 'baltic_sea', 1)", "UPDATE trade_node SET local_value = 0",
            "DELETE FROM flow", "DROP TABLE flow", "CREATE TABLE intruder (x INT)",
            "ALTER TABLE flow ADD COLUMN z INT"],
    "cypher": ["CREATE (:Country {name: 'XXX'})", "MATCH (n:Trade_node) SET n.local_value = 0",
               "MATCH (n:Trade_node) DETACH DELETE n", "MERGE (c:Country {name: 'XXX'})",
               "MATCH ()-[f:source]->() DELETE f", "MATCH (n:Trade_node) REMOVE n.local_value"],
}

RUNAWAY = {
    "sql": "SELECT COUNT(*) FROM node_country a, node_country b, node_country c WHERE a.base_trading_power + "
           "b.base_trading_power > c.base_trading_power",
    "cypher": "MATCH (a:Country), (b:Country), (c:Country), (d:Country) "
              "WHERE a.development + b.development > c.development + d.development RETURN count(*)",
}

SYNTAX_ERRORS = {"sql": "SELEC country_name FROM country", "cypher": "MATCH (n:Country RETURN n"}


@pytest.fixture(scope="module", params=BACKENDS)
def backend_name(request):
    name = request.param
    if name == "neo4j":
        request.getfixturevalue("neo4j_server")
    reason = unavailable(name)
    if reason:
        require(name, reason)
    return name


@pytest.fixture(scope="module")
def locating(dqa, backend_name):
    q = dqa.question("locating", 1)
    db = dqa.database(q)
    backend = open_backend(backend_name, db)
    yield backend, db
    backend.close()


@pytest.fixture(scope="module")
def building(dqa, backend_name):
    q = dqa.question("building", 1)
    assert q.database_ref == "USA1836"
    db = dqa.database(q)
    backend = open_backend(backend_name, db)
    yield backend, db
    backend.close()


def _count(backend, scenario: str, i: int) -> int:
    target = COUNTS[backend.language][scenario][i]
    text = f"SELECT COUNT(*) FROM {target}" if backend.language == "sql" else f"MATCH {target} RETURN count(x)"
    return backend.query(text).rows[0][0]


def _same(rows, expected):
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, float):
                assert math.isclose(g, w, rel_tol=1e-12), (got, want)
            else:
                assert g == w, (got, want)


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_row_counts(scenario, locating, building):
    backend, db = locating if scenario == "locating" else building
    expected = {"locating": [665, 80, 159, 1480], "building": None}[scenario]
    names = COUNTS["sql"][scenario]
    if expected is None:
        expected = [len(db.tables[n].rows) for n in names]
    assert [_count(backend, scenario, i) for i in range(4)] == expected


def test_sources_of_home_node(locating):
    backend, db = locating
    expected = sorted((r[0], r[2]) for r in db.tables["flow"].rows if r[1] == "baltic_sea")
    _same(backend.query(QUERIES["sources_of_home"][backend.language]).rows, expected)


def test_presence_ordered_by_power(locating):
    backend, db = locating
    rows = [(r[0], r[4]) for r in db.tables["node_country"].rows if r[1] == "SWE"]
    expected = sorted(rows, key=lambda r: (-r[1], r[0]))
    _same(backend.query(QUERIES["presence_by_power"][backend.language]).rows, expected)


def test_aggregate(locating):
    backend, db = locating
    groups: dict[str, list[float]] = {}
    for r in db.tables["node_country"].rows:
        groups.setdefault(r[0], []).append(r[4])
    expected = [(n, len(v), math.fsum(v)) for n, v in sorted(groups.items())]
    _same(backend.query(QUERIES["aggregate_per_node"][backend.language]).rows, expected)


def test_building_suppliers(building):
    backend, db = building
    code = next(r[1] for r in db.tables["goods"].rows if r[0] == "furniture")
    names = {r[0]: r[1] for r in db.tables["building"].rows}
    expected = sorted((r[1], names[r[1]], r[3]) for r in db.tables["supply"].rows if r[0] == code)
    _same(backend.query(BUILDING_SUPPLIERS[backend.language]).rows, expected)


@pytest.mark.parametrize("i", range(6))
def test_writes_refused_and_data_unchanged(i, locating):
    backend, _ = locating
    writes = WRITES[backend.language]
    total = ("SELECT SUM(local_value) FROM trade_node" if backend.language == "sql"
             else "MATCH (n:Trade_node) RETURN sum(n.local_value)")
    before = [_count(backend, "locating", j) for j in range(4)] + backend.query(total).rows[0]
    with pytest.raises(RefusedWrite):
        backend.query(writes[i])
    assert [_count(backend, "locating", j) for j in range(4)] + backend.query(total).rows[0] == before


def test_runaway_query_stopped(locating):
    backend, _ = locating
    with pytest.raises(QueryTimeout):
        backend.query(RUNAWAY[backend.language], timeout_s=0.5)
    assert _count(backend, "locating", 1) == 80  # still usable afterwards


def test_syntax_error_is_clear(locating):
    backend, _ = locating
    with pytest.raises(QuerySyntaxError) as e:
        backend.query(SYNTAX_ERRORS[backend.language])
    assert str(e.value)


def test_row_cap(locating):
    backend, _ = locating
    text = "SELECT country_name FROM country" if backend.language == "sql" else "MATCH (c:Country) RETURN c.name"
    result = backend.query(text, row_cap=10)
    assert len(result.rows) == 10 and result.total_rows == 665 and result.truncated
    assert "more rows" in result.to_text(max_rows=10)


def test_schema_text_names_every_table(locating):
    backend, db = locating
    text = backend.schema_text()
    names = db.tables.tables if backend.language == "sql" else [*db.graph.nodes, *db.graph.rels]
    assert all(n in text for n in names)


def test_language_matches_registry(locating, backend_name):
    assert locating[0].language == language(backend_name)
