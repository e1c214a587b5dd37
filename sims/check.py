"""Whole-benchmark check: rank every DQA question and compare the pick with the annotated answer.

Question N is the N-th entry of the question file. Locating question N reads
``locating/queries/SQL_format/q{question_num}.sql``; a Building question reads
``building/queries/SQL_format/{country}.sql``. Each distinct file content is parsed and compiled
once (the 200 Locating files hold 7 distinct texts), and each Building database is simulated once
for all the goods asked about it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sims import building, locating
from sims.files import read_bytes, read_text
from sims.ranking import InputError, check_mode
from sims.sqldump import read_sql_dump

LOCATING_QUESTIONS = Path("locating/questions/simulated_question.json")
BUILDING_QUESTIONS = Path("building/questions/simulated_questions.json")


@dataclass(frozen=True)
class Miss:
    """A question whose pick differs from its annotation."""

    number: int  # 1-based position in the question file
    expected: object
    got: object


@dataclass(frozen=True)
class ScenarioCheck:
    """Agreement of one scenario's picks with the annotations."""

    scenario: str
    total: int
    misses: tuple[Miss, ...]

    @property
    def agree(self) -> int:
        return self.total - len(self.misses)


@dataclass(frozen=True)
class CheckReport:
    locating: ScenarioCheck
    building: ScenarioCheck
    seconds: float

    @property
    def ok(self) -> bool:
        return not (self.locating.misses or self.building.misses)


class _CompiledFiles:
    """Compiles each distinct file content once; errors name the file."""

    def __init__(self, compile_tables: Callable):
        self.compile_tables = compile_tables
        self.by_content: dict[bytes, object] = {}

    def __call__(self, path: Path):
        data = read_bytes(path, "database dump")
        compiled = self.by_content.get(data)
        if compiled is None:
            compiled = self.by_content[data] = _naming(path, lambda: self.compile_tables(read_sql_dump(path)))
        return compiled


def _naming(path: Path, action: Callable):
    try:
        return action()
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def _questions(path: Path) -> list[dict]:
    try:
        questions = json.loads(read_text(path, "question file"))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}, line {e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(questions, list):
        raise InputError(f"{path}: expected a JSON array of questions")
    return questions


def _field(question: dict, name: str, path: Path, number: int):
    try:
        return question[name]
    except (KeyError, TypeError):
        raise InputError(f"{path}: question {number} has no {name!r} field") from None


def check_locating(dqa_dir: Path, mode: str = "dqa") -> ScenarioCheck:
    """Rank all Locating questions and compare each pick with its answer."""
    path = dqa_dir / LOCATING_QUESTIONS
    networks = _CompiledFiles(locating.TradeNetwork)
    misses, questions = [], _questions(path)
    for number, q in enumerate(questions, 1):
        db = dqa_dir / f"locating/queries/SQL_format/q{_field(q, 'question_num', path, number)}.sql"
        country = _field(q, "country", path, number)
        network = networks(db)
        got = _naming(db, lambda: locating.rank(network, country, mode).label())
        if got != _field(q, "answer", path, number):
            misses.append(Miss(number, q["answer"], got))
    return ScenarioCheck("locating", len(questions), tuple(misses))


def check_building(dqa_dir: Path, mode: str = "dqa") -> ScenarioCheck:
    """Rank all Building questions (one simulation per database) and compare each pick with its answer."""
    path = dqa_dir / BUILDING_QUESTIONS
    questions = _questions(path)
    asked: dict[str, list[str]] = {}
    for number, q in enumerate(questions, 1):
        asked.setdefault(_field(q, "country", path, number), []).append(_field(q, "goods", path, number))
    markets = _CompiledFiles(building.Market)
    rankings = {}
    for tag, goods in asked.items():
        db = dqa_dir / f"building/queries/SQL_format/{tag}.sql"
        market = markets(db)
        rankings[tag] = _naming(db, lambda: building.rank_all(market, mode, sorted(set(goods))))
    misses = []
    for number, q in enumerate(questions, 1):
        got = rankings[q["country"]][q["goods"]].label()
        if got != _field(q, "answer", path, number):
            misses.append(Miss(number, q["answer"], got))
    return ScenarioCheck("building", len(questions), tuple(misses))


def check_benchmark(dqa_dir: str | Path, mode: str = "dqa") -> CheckReport:
    """Check both scenarios of the DQA benchmark in ``dqa_dir``; ``seconds`` is the wall time."""
    start = time.perf_counter()
    check_mode(mode)
    dqa_dir = Path(dqa_dir)
    locating_check = check_locating(dqa_dir, mode)
    building_check = check_building(dqa_dir, mode)
    return CheckReport(locating_check, building_check, time.perf_counter() - start)
