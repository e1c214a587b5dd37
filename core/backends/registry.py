"""Which database backends exist, whether each can be used here, and opening one on a question's database."""
from __future__ import annotations

import importlib

from core.backends.base import Backend, BackendUnavailable
from core.model.bounds import unknown
from core.model.question import Database
from core.config.settings import DatabaseSettings

#: name -> (query language, module implementing ``open_database(database, settings)`` and ``unavailable(settings)``)
BACKENDS: dict[str, tuple[str, str]] = {
    "sqlite": ("sql", "core.backends.sqlite"),
    "mysql": ("sql", "core.backends.mysql"),
    "ladybug": ("cypher", "core.backends.ladybug"),
    "neo4j": ("cypher", "core.backends.neo4j"),
}


def language(name: str) -> str:
    """``sql`` or ``cypher``."""
    return BACKENDS[name][0]


def unavailable(name: str, settings: DatabaseSettings | None = None) -> str | None:
    """Why the backend cannot be used here (None when it can): a missing package, an unreachable server."""
    if name not in BACKENDS:
        return unknown("database backend", name, BACKENDS)
    try:
        module = importlib.import_module(BACKENDS[name][1])
    except ImportError as e:
        return f"{name}: its Python package is not installed ({e})"
    return module.unavailable(settings or DatabaseSettings())


def open_backend(name: str, database: Database, settings: DatabaseSettings | None = None) -> Backend:
    """Load ``database`` into backend ``name`` and open it read-only. Raises BackendUnavailable with the reason."""
    reason = unavailable(name, settings)
    if reason:
        raise BackendUnavailable(reason)
    module = importlib.import_module(BACKENDS[name][1])
    return module.open_database(database, settings or DatabaseSettings())
