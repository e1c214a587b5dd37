"""Issue 27, section 1: every part of what an agent observes (rows, column names and aliases, error texts, notes)
stays within the observation cap on every backend, cut where it is made and marked; what a run stores (events,
checkpoints) stays bounded per step. The figures (memory, store size, prompt size) are printed by
bench/bench_observations.py; these tests check the bounds in kind."""
from __future__ import annotations

import json

import pytest

from core.scenarios import catalog
from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, RunSettings
from core.agents.nodes import run_query
from core.backends.base import (MAX_ERROR_CHARS, MAX_NAME_CHARS, QueryError, QueryResult, QuerySyntaxError,
                                render_rows)
from core.backends.registry import open_backend
from tests.test_backends_conformance import backend_name  # noqa: F401 (a fixture)

LONG = "c" * 15_000
#: Per backend: a header of 64 aliases of 15,000 characters (or the most the engine allows), a column name of
#: 15,000 characters, and (Ladybug) an error message that quotes a 15-million-character value.
HOSTILE = {
    "sqlite": [f'WITH t("{LONG}") AS (SELECT 1) SELECT * FROM ' + ", ".join(f"t a{i}" for i in range(64)),
               f'SELECT "{LONG}" FROM trade_node', f'SELECT 1 AS "{LONG}"'],
    "mysql": ["WITH t AS (SELECT " + ", ".join(f"1 AS `{'m' * 60}{i:03d}`" for i in range(60)) + ") SELECT * FROM "
              + ", ".join(f"t a{i}" for i in range(60)),
              f"SELECT `{'m' * 15_000}` FROM trade_node", "SELECT " + ", ".join(f"'{'v' * 250}{i}'" for i in range(70))],
    "ladybug": ["RETURN CAST(repeat('v', 15000000) AS INT64)", f"RETURN 1 AS `{LONG}`", f"RETURN '{LONG}'"],
    "neo4j": [f"RETURN 1 AS `{'a' * 19_000}`", f"RETURN 1 AS `{'a' * 9000}`, 2 AS `{'b' * 9000}`",
              f"RETURN '{LONG}'"],
}


@pytest.fixture(scope="module")
def demo():
    return catalog.database(catalog.question("demo", "locating", 1))


@pytest.fixture(scope="module")
def backend(backend_name, demo):  # noqa: F811
    b = open_backend(backend_name, demo)
    yield b
    b.close()


def test_an_error_message_is_cut_where_it_is_made():
    e = QuerySyntaxError("no such value: " + "v" * 1_000_000)
    assert len(str(e)) < MAX_ERROR_CHARS + 60 and str(e).endswith("characters in all]")
    assert "1,000,015 characters in all" in str(e)


def test_long_column_names_are_cut_and_noted():
    r = QueryResult(["a" * 50_000, "b"], [[1, 2]], 1, 0.0).capped()
    assert len(r.columns[0]) < MAX_NAME_CHARS + 40 and r.columns[0].endswith("50,000 characters in all]")
    assert r.columns[1] == "b" and any("column name" in n for n in r.notes)
    again = r.capped(cell_chars=100)  # a second cut keeps the first mark (the length in all)
    assert again.columns[0].endswith("50,000 characters in all]") and len(again.columns[0]) < 140


def test_a_wide_result_keeps_its_names_within_a_share_of_the_result_cap():
    r = QueryResult([f"{'x' * 300}{i}" for i in range(5000)], [[1] * 5000], 1, 0.0).capped(result_chars=200_000)
    assert len(r.columns) == 5000 and sum(map(len, r.columns)) < 5000 * 80


def test_a_long_header_leaves_room_for_rows():
    text = render_rows(["h" * 100_000], [["row one"]], 1, max_chars=4000)
    assert len(text) < 4100 and "row one" in text and "characters in all]" in text


@pytest.mark.parametrize("i", range(3))
def test_hostile_queries_observe_within_the_cap(backend, i):
    queries = HOSTILE[backend.name]
    if i >= len(queries):
        pytest.skip(f"{backend.name} has {len(queries)} hostile queries")
    limits = Limits()
    event = run_query(backend, queries[i], limits)
    assert len(event.text) <= limits.observation_chars + 200, event.text[:300]
    assert len(event.error or "") <= MAX_ERROR_CHARS + 60
    assert all(len(c) <= MAX_NAME_CHARS + 40 for c in event.columns)
    assert len(json.dumps(event.to_dict())) < 300_000
    if event.error is None:
        assert event.columns and "characters in all]" in " ".join(event.columns) + event.text


def test_a_ladybug_error_quoting_a_huge_value_is_cut_in_the_worker(demo):
    """The worker cuts the message before it is sent: the app never holds the 15-million-character text."""
    b = open_backend("ladybug", demo)
    try:
        with pytest.raises(QueryError) as e:
            b._worker.run("RETURN CAST(repeat('v', 15000000) AS INT64)", 30, 10)
        assert len(str(e.value)) < MAX_ERROR_CHARS + 60 and "characters in all]" in str(e.value)
    finally:
        b.close()


def test_a_whole_run_of_hostile_queries_stores_bounded_steps(tmp_path):
    """A scripted IterRAG run on the demo question whose every query has a huge header or error: each stored
    event, each message the model is sent and the stores stay bounded (bench/bench_observations.py has figures)."""
    queries = HOSTILE["sqlite"] * 2
    replies = [f"Thought: look ({i})\nAction: Relational DB\nAction input: {q}\n-- round {i}"
               for i, q in enumerate(queries)] + ["Thought: I now know the answer.\nFinal answer: doab"]
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(replies))
    runtime = AgentRuntime(tmp_path / "home")
    try:
        result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{path}", source="demo",
                                           limits=Limits(max_repeats=20)))
        assert result.status == "finished"
        events = runtime.store.get(result.run_id).events
        assert sum(e.kind == "observation" for e in events) == len(queries)
        assert max(len(json.dumps(e.to_dict())) for e in events) < 300_000
        messages = runtime.transcript(result.run_id)
        observations = [m["content"] for m in messages if m["role"] != "ai"][2:]
        assert observations and max(map(len, observations)) <= Limits().observation_chars + 300
    finally:
        runtime.close()
    store = sum(p.stat().st_size for p in (tmp_path / "home").rglob("*") if p.is_file())
    assert store < 20_000_000
