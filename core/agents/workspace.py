"""What a run works on: its question, its database opened in the chosen backend, and the candidate decisions
for grading; and the default way to get them, from the question catalog (DQA or the built-in demo)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.model.run_settings import RunSettings
from core.backends.base import Backend
from core.backends.registry import open_backend

if TYPE_CHECKING:
    from pathlib import Path

    from core.model.question import Database, Question
    from core.config.settings import DatabaseSettings


@dataclass
class Workspace:
    question: Question  # anything with .text, .scenario, .answer
    backend: Backend
    candidates: list
    database: Database | None = None  # when given, the outcome places the decision in the simulator's ranking


def open_catalog_workspace(settings: RunSettings, root: str | Path | None = None,
                           db_settings: DatabaseSettings | None = None) -> Workspace:
    """Question N of ``settings.source`` (DQA from ``root``, default DQA_DIR or ../shared/dqa; or the demo) with
    its database opened in ``settings.db`` (servers as ``db_settings`` say, default from the environment)."""
    from core.scenarios import catalog  # heavy: loads numpy, pandas
    from core.scenarios import candidates  # heavy: loads numpy, pandas

    question = catalog.question(settings.source, settings.scenario, settings.question, root)
    database = catalog.database(question, root)
    return Workspace(question, open_backend(settings.db, database, db_settings), candidates(question, database),
                     database)
