"""Where questions come from: the built-in demo scenarios, DQA when its directory is set, and each plugin scenario's
own questions (the source ``scenario``); the scenario's type (core.scenarios) reads them."""
from __future__ import annotations

from pathlib import Path

from core import scenarios
from core.scenarios.dqa.source import DQAError
from core.model.numbers import questions_text
from core.model.question import Database, Question, ScenarioKind
from core.model.run_settings import RunSettings

SOURCES = {"demo": "Built-in demo scenarios", "dqa": "DQA benchmark", "scenario": "The scenario's own questions"}


def _kind(scenario: str):
    """The scenario's type; DQAError (a clear error on the command line) for an unknown name."""
    try:
        return scenarios.get(scenario)
    except KeyError as e:
        raise DQAError(e.args[0]) from None


def questions(source: str, scenario: ScenarioKind, root: str | Path | None = None) -> list[Question]:
    """The questions of one source and scenario, in file order; DQAError for a scenario or source that is not
    there."""
    kind = _kind(scenario)
    if source not in kind.source_keys():
        raise DQAError(f"scenario {scenario} has no {source!r} questions; its sources: {', '.join(kind.source_keys())}")
    return kind.questions(source, root)


def question(source: str, scenario: ScenarioKind, number: int, root: str | Path | None = None) -> Question:
    """Question N of a source and scenario; raises DQAError for an unknown number."""
    qs = questions(source, scenario, root)
    if not 1 <= number <= len(qs):
        raise DQAError(f"no {source} {scenario} question {number}: there are {questions_text(len(qs))}")
    return qs[number - 1]


def database(q: Question, root: str | Path | None = None) -> Database:
    """The question's database."""
    return scenarios.get(q.scenario).database(q, root)


def default_source(scenario: str) -> str:
    """The first question source a scenario offers (``dqa`` for the DQA scenarios, ``scenario`` for a plugin)."""
    return _kind(scenario).source_keys()[0]


def run_question(settings: RunSettings, root=None):
    """The candidates and the label of a stored run's question (from its settings), for an override form."""
    q = question(settings.source, settings.scenario, settings.question, root)
    return scenarios.candidates(q, database(q, root)), q.answer
