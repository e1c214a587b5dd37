"""Import of the DQA benchmark from a directory laid out as the public PlanRAG repository's ``data/`` folder.

Questions are read eagerly (two JSON files); databases lazily, each distinct file read once (by the hash of
its bytes) and each distinct content kept once (by the hash of the parsed SQL and graph data).
"""
from __future__ import annotations

import hashlib
import json
import threading
from functools import lru_cache
from pathlib import Path

from core.config.settings import dqa_dir
from core.model.graph import GraphData, GraphMapping, read_cypher_dump
from core.model.numbers import questions_text
from core.model.question import Database, Question, ScenarioKind
from sims.manifest import GenerateError, read_manifest
from sims.files import FileRefused, read_bytes, read_text
from sims.sqldump import read_sql_dump
from sims.tables import Tables

#: The DQA benchmark's scenarios (its question files); every scenario: core.scenarios.names().
SCENARIOS: tuple[ScenarioKind, ...] = ("locating", "building")
QUESTION_FILES = {"locating": "locating/questions/simulated_question.json",
                  "building": "building/questions/simulated_questions.json"}
#: The name reports give the released benchmark; a set made by ``python -m sims generate`` names itself.
DQA_SET = "DQA"

#: The graph view of each scenario's SQL databases, as the DQA .cql files hold it.
LOCATING_GRAPH = GraphMapping(
    nodes={"Trade_node": ("trade_node", "name", [("name", "trade_node"), ("local_value", "local_value"),
                                                 ("is_inland", "is_inland"), ("total_power", "total_power"),
                                                 ("outgoing", "outgoing"), ("ingoing", "ingoing")]),
           "Country": ("country", "name", [("name", "country_name"), ("home_node", "home_node"),
                                            ("development", "development")])},
    rels={"source": ("flow", "Trade_node", "source", "Trade_node", "dest", [("flow", "flow")]),
          "NodeCountry": ("node_country", "Country", "country_name", "Trade_node", "trade_node",
                          [("is_home", "is_home"), ("has_merchant", "has_merchant"),
                           ("base_trading_power", "base_trading_power"),
                           ("calculated_trading_power", "calculated_trading_power")])})
BUILDING_GRAPH = GraphMapping(
    nodes={"Goods": ("goods", "code", [("name", "goods_name"), ("code", "code"), ("base_price", "base_price"),
                                        ("current_price", "current_price"), ("pop_demand", "pop_demand")]),
           "Building": ("building", "id", [("id", "id"), ("name", "name"), ("level", "level")])},
    rels={"Supply": ("supply", "Building", "building_id", "Goods", "goods_id",
                     [("max_supply", "max_supply"), ("current_output", "current_output"), ("level", "level")]),
          "Demand": ("demand", "Goods", "goods_id", "Building", "building_id",
                     [("max_demand", "max_demand"), ("current_input", "current_input"), ("level", "level")])})


class DQAError(Exception):
    """The DQA directory, a question or a database file cannot be used; the message says which and why."""


def _sql_path(root: Path, scenario: ScenarioKind, ref: str) -> Path:
    return root / scenario / "queries" / "SQL_format" / f"{ref}.sql"


def _cql_path(root: Path, scenario: ScenarioKind, ref: str) -> Path:
    return root / scenario / "queries" / "LPG_format" / f"{ref}.cql"


def _locating_question(number: int, raw: dict) -> Question:
    """Question ``number`` of DQA's Locating question file."""
    return Question("locating", "dqa", number, int(raw["question_num"]), raw["business_rules"], raw["question"],
                    raw.get("goal", ""), raw["country"], home=raw["home"], year=str(raw.get("year", "")),
                    answer=raw.get("answer"), database_ref=f"q{raw['question_num']}")


def _building_question(number: int, raw: dict) -> Question:
    """Question ``number`` of DQA's Building question file."""
    answer = raw.get("answer")
    return Question("building", "dqa", number, int(raw["question_num"]), raw["business_rules"], raw["question"],
                    "", raw["country"], goods=raw["goods"], year=raw["country"][-4:],
                    answer=None if answer is None else int(answer), database_ref=raw["country"])


_QUESTION_READERS = {"locating": _locating_question, "building": _building_question}


class DQA:
    """The benchmark in one directory: its questions, and their databases loaded on demand and cached."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        try:
            manifest = read_manifest(self.root)
        except GenerateError as e:
            raise DQAError(str(e)) from None
        #: Which question set this is, for reports: DQA, or a generated set's name (its generated.json).
        self.name: str = _set_name(self.root, manifest)
        self._questions: dict[str, list[Question]] = {}
        for scenario in SCENARIOS:
            path = self.root / QUESTION_FILES[scenario]
            try:
                raw = json.loads(read_text(path, "question file"))
            except FileRefused as e:
                raise DQAError(str(e)) from None
            except FileNotFoundError:
                raise DQAError(f"{path} not found: is {self.root} the DQA data folder?") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise DQAError(f"{path}: not a JSON question file ({e})") from None
            try:
                self._questions[scenario] = [_QUESTION_READERS[scenario](i, q) for i, q in enumerate(raw, 1)]
            except (KeyError, TypeError, ValueError) as e:
                raise DQAError(f"{path}: a question lacks a field or has a bad value ({e!r})") from None
        self._lock = threading.Lock()
        self._by_bytes: dict[str, Tables | GraphData] = {}
        self._by_content: dict[str, Database] = {}
        self._by_ref: dict[tuple[str, str], Database] = {}
        self._notes: dict[tuple[str, str], list[str]] = {}

    def questions(self, scenario: ScenarioKind) -> list[Question]:
        """All questions of a scenario, in file order."""
        return self._questions[scenario]

    def question(self, scenario: ScenarioKind, number: int) -> Question:
        """Question N (1-based, as the benchmark's runner counts)."""
        qs = self._questions[scenario]
        if not 1 <= number <= len(qs):
            raise DQAError(f"no {scenario} question {number}: DQA has {questions_text(len(qs))}")
        return qs[number - 1]

    def _read(self, path: Path, reader, kind: str):
        try:
            data = read_bytes(path, kind)
        except FileRefused as e:
            raise DQAError(str(e)) from None
        except FileNotFoundError:
            raise DQAError(f"database file {path} not found") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self._by_bytes:
            self._by_bytes[digest] = reader(path)
        return self._by_bytes[digest]

    def database(self, question: Question) -> Database:
        """The question's database (SQL and graph views), read once per distinct content."""
        ref = (question.scenario, question.database_ref)
        with self._lock:
            if ref in self._by_ref:
                return self._by_ref[ref]
            sql_path = _sql_path(self.root, *ref)
            cql_path = _cql_path(self.root, *ref)
            tables = self._read(sql_path, read_sql_dump, "database dump")
            graph = self._read(cql_path, read_cypher_dump, "graph file")
            key = hashlib.sha256(f"{tables.content_hash()}:{graph.content_hash()}".encode()).hexdigest()[:16]
            db = self._by_content.get(key)
            if db is None:
                db = self._by_content[key] = Database(key, question.scenario, tables, graph,
                                                      [str(sql_path), str(cql_path)])
            self._by_ref[ref] = db
            self._notes[ref] = [f"{sql_path.name}: {n}" for n in tables.notes] + [f"{cql_path.name}: {n}"
                                                                                for n in graph.notes]
            return db

    def notes(self, question: Question) -> list[str]:
        """The data defects repaired in this question's own files, each with the rule applied."""
        self.database(question)
        return self._notes[(question.scenario, question.database_ref)]

    def distinct_databases(self, scenario: ScenarioKind) -> int:
        """How many distinct database contents the scenario's questions use (loads them all)."""
        return len({self.database(q).key for q in self.questions(scenario)})


@lru_cache(maxsize=4)
def _dqa(root: str) -> DQA:
    return DQA(root)


def _set_name(root: Path, manifest: dict | None) -> str:
    return str(manifest.get("name") or root.name) if manifest else DQA_SET


def set_name(root: str | Path) -> str:
    """The name of the question set in the DQA-format folder ``root``: DQA_SET, or a generated set's name (its
    generated.json's), read without loading its questions; DQAError when its manifest cannot be read."""
    try:
        return _set_name(Path(root), read_manifest(Path(root)))
    except GenerateError as e:
        raise DQAError(str(e)) from None


def dqa_benchmark(root: str | Path | None = None) -> DQA:
    """The DQA benchmark at ``root`` (default: the configured directory), imported once per process."""
    root = root or dqa_dir()
    if root is None:
        raise DQAError("DQA is not configured: set DQA_DIR (or the DQA directory in Settings) to the data/ "
                       "folder of the public myeon9h/PlanRAG repository")
    return _dqa(str(Path(root).resolve()))


def check_dqa(root: str | Path | None) -> str:
    """Import the DQA benchmark at ``root`` (default: the configured directory), for the Settings page's connection
    test. Raises DQAError with the reason."""
    bench = dqa_benchmark(root)
    return f"DQA at {bench.root}: " + ", ".join(f"{len(bench.questions(s))} {s} questions" for s in SCENARIOS)
