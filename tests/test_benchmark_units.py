"""The benchmark's parts without DQA: question selections and work lists, the reply cache, the rate limiter,
prices, trace facts and failure categories."""
from __future__ import annotations

import json
import threading

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from core.benchmark import items as items_module
from core.benchmark.cache import ReplyCache, cache_key, caching_opener, model_identity
from core.benchmark.failures import classify
from core.benchmark.items import BenchError, parse_numbers, work_list
from core.llm.prices import DEFAULT_PRICES, cost, load_prices, price_of
from core.benchmark.runner import RateLimiter, default_name
from core.benchmark.trace import read_trace
from core.model.events import ActionEvent, ErrorEvent, FinalEvent, ObservationEvent, ReplanEvent
from core.llm.client import Completion, LLMSettings

MESSAGES = [SystemMessage("You decide."), HumanMessage("Question: where?")]
STOP = ["\nObservation:"]


def test_question_numbers():
    assert parse_numbers("1-3,7, 5,2") == [1, 2, 3, 5, 7]
    assert parse_numbers("all") == []
    for bad in ("0-3", "5-2", "x", "1-", ""):
        with pytest.raises(BenchError, match="--questions"):
            parse_numbers(bad)


def test_work_list_clamps_numbers_past_a_scenario_with_a_note():
    counts = {"locating": 200, "building": 101}
    work = work_list(["locating", "building"], ["sqlite", "ladybug"], ["planrag"], "m", list(range(99, 106)), counts)
    assert work.notes == ["building has questions 1-101: 102-105 left out"]
    assert len(work.items) == 7 * 2 + 3 * 2
    assert work.items[0].key == "locating/99/sqlite/planrag/m" and work.items[-1].name == "building-101-ladybug-planrag"
    with pytest.raises(BenchError, match="building has questions 1-101; there is no question 150-151"):
        work_list(["building"], ["sqlite"], ["planrag"], "m", [1, 150, 151], counts)
    assert len(work_list(["building"], ["sqlite"], ["iterrag", "planrag"], "m", [], counts).items) == 202


def test_all_databases_names_the_skipped_ones(monkeypatch):
    monkeypatch.setattr(items_module, "unavailable", lambda name: "no server" if name in ("mysql", "neo4j") else None)
    notes = []
    assert items_module.databases_of("all", notes) == ["sqlite", "ladybug"]
    assert notes == ["database mysql skipped: no server", "database neo4j skipped: no server"]
    with pytest.raises(BenchError, match="database neo4j cannot be used here: no server"):
        items_module.databases_of("neo4j", [])


def test_default_names():
    assert default_name("gpt-4o-mini") == "gpt-4o-mini"
    assert default_name("replay:/x/scripts.json") == "replay-scripts"
    assert default_name("llama3:8b @ http://localhost:8000/v1") == "llama3-8b"


def test_cache_key_covers_model_parameters_and_every_message(tmp_path):
    base = {"model": "gpt-4o", "temperature": 0.0, "max_tokens": 2048, "base_url": None}
    key = cache_key(base, STOP, MESSAGES)
    assert key == cache_key(dict(base), list(STOP), list(MESSAGES))
    for change in ({"model": "gpt-4"}, {"temperature": 0.5}, {"max_tokens": 100}, {"base_url": "http://x"}):
        assert cache_key({**base, **change}, STOP, MESSAGES) != key
    assert cache_key(base, ["\nObs:"], MESSAGES) != key
    assert cache_key(base, STOP, MESSAGES[:1] + [HumanMessage("Question: where else?")]) != key
    assert cache_key(base, STOP, [HumanMessage("You decide.")] + MESSAGES[1:]) != key  # the role counts too
    replay = tmp_path / "r.json"
    replay.write_text('["a"]')
    first = model_identity(f"replay:{replay}")
    replay.write_text('["b"]')
    assert model_identity(f"replay:{replay}") != first  # an edited transcript is another model


def test_caching_llm_answers_from_the_cache_and_opens_the_model_at_the_first_miss(tmp_path):
    replay = tmp_path / "r.json"
    replay.write_text(json.dumps(["one", "two", "three"]))
    cache = ReplyCache(tmp_path / "cache.sqlite")
    opened = []
    opener = caching_opener(cache, on_open=opened.append)
    first = opener(f"replay:{replay}", LLMSettings())
    conversation = list(MESSAGES)
    for _ in range(2):
        reply = first.complete(conversation, STOP).text
        conversation.append(HumanMessage(reply))
    assert (first.calls, first.hits) == (2, 0) and opened == [first]
    second = opener(f"replay:{replay}", LLMSettings())
    conversation = list(MESSAGES)
    for _ in range(3):  # two from the cache, then the replay from its third reply on
        conversation.append(HumanMessage(second.complete(conversation, STOP).text))
    assert [m.content for m in conversation[2:]] == ["one", "two", "three"]
    assert (second.calls, second.hits) == (1, 2)
    uncached = caching_opener(None)(f"replay:{replay}", LLMSettings())
    assert uncached.complete(MESSAGES, STOP).text == "one" and (uncached.calls, uncached.hits) == (1, 0)
    cache.close()


def test_cached_reply_keeps_usage_and_is_shared_between_threads(tmp_path):
    cache = ReplyCache(tmp_path / "cache.sqlite")
    done = Completion("Final answer: krakow", 120, 7, 1.5, False)

    def write(i):
        cache.put(f"k{i}", "m", done)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(ReplyCache(tmp_path / "cache.sqlite").get(f"k{i}") == done for i in range(8))
    assert cache.get("missing") is None


class FakeClock:
    """``time.monotonic`` and ``time.sleep`` for the rate limiter: sleeping moves the clock on."""

    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 9))
        self.now += seconds


def test_rate_limiter_spaces_calls(monkeypatch):
    from core.benchmark import runner

    clock = FakeClock()
    monkeypatch.setattr(runner, "time", clock)
    limit = RateLimiter(600)  # one every 0.1 s
    for _ in range(4):
        limit()
    assert clock.sleeps == [0.1, 0.1, 0.1]  # the first call goes at once
    clock.now += 1.0  # idle for a second: the next call goes at once, the one after waits its interval
    limit()
    limit()
    assert clock.sleeps == [0.1, 0.1, 0.1, 0.1]
    with pytest.raises(BenchError, match="--rpm"):
        RateLimiter(0)


def test_prices(tmp_path):
    path = tmp_path / "prices.json"
    assert load_prices(path) == DEFAULT_PRICES and json.loads(path.read_text()) == DEFAULT_PRICES
    table = {**DEFAULT_PRICES, "my-model": [1.0, 2.0]}
    path.write_text(json.dumps(table))
    assert load_prices(path)["my-model"] == [1.0, 2.0]
    assert price_of("gpt-4o-mini-2024-07-18", table) == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_of("gpt-4o-2024-08-06 @ https://proxy", table) == DEFAULT_PRICES["gpt-4o"]
    assert price_of("replay:/x.json", table) == [0.0, 0.0] and price_of("llama3", table) is None
    assert cost("my-model", 1_000_000, 500_000, table) == pytest.approx(2.0) and cost("llama3", 1, 1, table) is None
    path.write_text('{"gpt-4": [30]}')
    with pytest.raises(ValueError, match="gpt-4 must be"):
        load_prices(path)



def test_the_price_table_written_on_first_use_is_never_read_half_written(tmp_path):
    """Two runs starting together both find no table: one writes it while the other reads it (a run once failed
    with "price table ... is not JSON"). The table is written whole, so every reader gets all of it."""
    for attempt in range(40):
        path = tmp_path / str(attempt) / "prices.json"
        start, results = threading.Barrier(4), []

        def first_use():
            start.wait()
            try:
                results.append(load_prices(path))
            except ValueError as e:
                results.append(e)

        threads = [threading.Thread(target=first_use) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [DEFAULT_PRICES] * 4, attempt
        assert [p.name for p in path.parent.iterdir()] == ["prices.json"]  # no temporary file left

def action(query, language="sql"):
    return ActionEvent(tool="Relational DB", query=query, language=language)


def observation(text="", columns=(), rows=(), error_kind=None):
    return ObservationEvent(text=text, columns=list(columns), rows=[list(r) for r in rows], executed="",
                            error="x" if error_kind else None, error_kind=error_kind)


def test_trace_facts_and_failure_categories():
    events = [action('SELECT source FROM flow WHERE dest = "baltic_sea"'),
              observation("source\nkrakow\nnovgorod", ["source"], [["krakow"], ["novgorod"]]),
              action("SELECT * FROM trade_node"),
              observation("trade_node | ingoing | total_power\nkrakow | 1.0 | 3.0",
                          ["trade_node", "ingoing", "total_power"], [["krakow", 1.0, 3.0]]),
              ReplanEvent(replan=True, old_plan=["a"], new_plan=["b"]),
              action("compare", "self"), observation("compare"),
              FinalEvent(answer="novgorod")]
    facts = read_trace(events, "locating", "novgorod")
    assert (facts.retrievals, facts.retrievals_with_rows, facts.replans) == (2, 2, 1)
    assert facts.critical_seen == {"ingoing": True, "total_power": True} and facts.pick_seen
    assert classify(False, facts, "finished", "novgorod", "novgorod") == ("unclassified", {})
    assert classify(True, facts, "finished", "novgorod", "novgorod") == (None, {})

    missed = read_trace(events[:2] + events[-1:], "locating", "novgorod")
    assert missed.missed == ["ingoing", "total_power"]
    assert classify(False, missed, "finished", "x", "novgorod")[0] == "MIS"
    assert classify(False, facts, "finished", "baltic_sea", None) == ("CAN", {"CAN": "the final answer names no "
                                                                                     "candidate"})
    unseen = read_trace(events, "locating", "kiev")
    assert classify(False, unseen, "finished", "kiev", "kiev")[1] == {"CAN": "the pick never appeared in the data "
                                                                             "retrieved"}
    blind = read_trace([action("SELECT trade_node, ingoing, total_power FROM trade_node"),
                        observation("trade_node | ingoing | total_power\nkiev | 1 | 2", rows=[["kiev", 1, 2]])],
                       "locating", "kiev")
    assert classify(False, blind, "finished", "kiev", "kiev")[0] == "CAN"  # never looked at the flows

    failed = read_trace(events[:2] + [action("SELEC x"), observation("Query error", error_kind="syntax")],
                        "locating", "novgorod")
    assert failed.last_query_failed and failed.query_errors == 1
    category, signs = classify(False, failed, "finished", "novgorod", "novgorod")
    assert category == "QUR" and set(signs) == {"QUR", "MIS"}
    limit = read_trace(events + [ErrorEvent(error_kind="limit", fatal=False, message="")],
                       "locating", "novgorod")
    assert classify(False, limit, "finished", "novgorod", "novgorod")[0] == "OTH"
    crashed = read_trace(events[:2] + [ErrorEvent(error_kind="bad_request", message="too long")],
                         "locating", None)
    assert crashed.error_kind == "bad_request"
    assert classify(False, crashed, "failed", None, None) == (
        "OTH", {"OTH": "run failed (bad_request)", "MIS": "(heuristic) never queried ingoing, total_power"})
    building = read_trace([action("MATCH (b:Building)-[s:Supply]->(g:Goods) RETURN b.id, s.current_output", "cypher"),
                           observation("b.id | s.current_output\n1485 | 3.0", ["b.id", "s.current_output"],
                                       [[1485, 3.0]])], "building", 1485)
    assert building.critical_seen == {"current_output": True, "pop_demand": False}
    assert building.looked_at_candidates and building.pick_seen


def test_a_benchmark_of_the_demo_questions(tmp_path, monkeypatch, capsys):
    import core.cli.main as cli
    from tests.conftest import ROOT

    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))  # the demo needs no DQA data
    replay = f"replay:{ROOT / 'assets/replays/demo_locating_1_sql_planrag.json'}"
    code = cli.main(["bench", "--source", "demo", "--scenario", "locating", "--questions", "1-3", "--technique",
                     "planrag", "--llm", replay, "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0 and "[3/3] demo-locating-" in printed and "(paper " not in printed  # the paper: on DQA
    with pytest.raises(SystemExit):
        cli.main(["bench", "--source", "nope", "--technique", "planrag"])


class _Writes:
    """A stand-in for stdout that keeps each write() apart, as a pipe read by another process may see them."""

    def __init__(self):
        self.writes, self.lock = [], threading.Lock()

    def write(self, text):
        with self.lock:
            self.writes.append(text)
        return len(text)

    def flush(self):
        pass


def test_progress_lines_from_worker_threads_are_each_one_write(tmp_path, monkeypatch):
    """``core bench --concurrency 2`` prints a progress line from each worker thread: each line is one write of the
    whole line (print() writes the newline apart, so two threads' lines could run together)."""
    import core.cli.main as cli
    from core.config import settings as core_settings
    from core.config.settings import PROJECT_ROOT

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    out = _Writes()
    monkeypatch.setattr("sys.stdout", out)
    code = cli.main(["bench", "--source", "demo", "--technique", "iterrag", "--technique", "planrag", "--questions",
                     "1", "--concurrency", "2", "--no-cache", "--llm", f"replay:{PROJECT_ROOT / 'assets/replays'}",
                     "--out", str(tmp_path / "out")])
    assert code == 0
    progress = [w for w in out.writes if "-sqlite-" in w and "/4]" in w]
    assert len(progress) == 4
    assert all(w.startswith("[") and w.endswith("\n") and w.count("\n") == 1 for w in progress), progress
    assert sorted(w[:5] for w in progress) == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
