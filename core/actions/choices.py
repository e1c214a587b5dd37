"""A session's settings chosen, and the connections tested, by whoever the gate (core.auth.gate) lets: each function
asks it with the acting identity (``who``) before it does anything, and gives what the session keeps (the pages
keep it in the browser session; nothing here is stored). A named endpoint and the run limits are an analyst's
choice (``settings``); a model of one's own (its URL and key: ``endpoints``), database connections (``databases``)
and anything the server reads from a path (``server_paths``: a replay or tokenizer file, the DQA folder, the
scenarios folder) are an admin's; testing the connections in use and rescanning the scenarios folder are an
analyst's (``test_connections``, ``rescan``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core import scenarios
from core.auth import endpoints
from core.auth.gate import authorize
from core.auth.roles import Identity
from core.backends.registry import BACKENDS, unavailable
from core.config.settings import DatabaseSettings, LLMSettings
from core.llm.checks import check_llm
from core.llm.client import REPLAY_PREFIX
from core.llm.tokenizer_file import open_tokenizer
from core.model.run_settings import Limits
from core.scenarios.dqa.source import check_dqa


def use_endpoint(name: str, base: LLMSettings, *, who: Identity) -> LLMSettings:
    """The server's endpoint ``name`` (UnknownEndpoint when it has none) with ``base``'s timeouts and limits."""
    authorize(who, "settings")
    return endpoints.get(name).llm_settings(base)


def use_limits(limits: Limits, *, who: Identity) -> Limits:
    """``limits`` checked (ValueError saying which is out of its bounds)."""
    authorize(who, "settings")
    return limits.validate()


def _reads_files(chosen: LLMSettings, current: LLMSettings) -> bool:
    """Whether ``chosen`` makes the server read a file a person named: a replay, or another tokenizer file."""
    return (chosen.model or "").startswith(REPLAY_PREFIX) or chosen.tokenizer != current.tokenizer


def use_model(chosen: LLMSettings, current: LLMSettings, *, who: Identity) -> LLMSettings:
    """A model of one's own (its server, key, replay or tokenizer file) in place of ``current``; its tokenizer file
    opened (TokenizerFileError saying why it cannot be used)."""
    authorize(who, "endpoints")
    if _reads_files(chosen, current):
        authorize(who, "server_paths")
    if chosen.tokenizer:
        open_tokenizer(chosen.tokenizer)
    return chosen


def test_model(chosen: LLMSettings, current: LLMSettings, *, who: Identity) -> str:
    """What the model ``chosen`` says to a one-token request (LLMError with the reason): a model other than the
    session's ``current`` one is a model of one's own, the admin's to try."""
    authorize(who, "test_connections")
    if chosen != current:
        authorize(who, "endpoints")
        if _reads_files(chosen, current):
            authorize(who, "server_paths")
    return check_llm(chosen)


def use_databases(chosen: DatabaseSettings, *, who: Identity) -> DatabaseSettings:
    """The database connections the session's runs use from now on."""
    authorize(who, "databases")
    return chosen


@dataclass(frozen=True)
class Availability:
    backend: str
    language: str
    problem: str | None  # None: available


def test_connections(chosen: DatabaseSettings, current: DatabaseSettings, *, who: Identity) -> list[Availability]:
    """Whether each backend can be used with ``chosen``: connections other than the session's ``current`` ones
    are servers a person typed, the admin's to try."""
    authorize(who, "test_connections")
    if chosen != current:
        authorize(who, "databases")
    return [Availability(name, language, unavailable(name, chosen)) for name, (language, _) in BACKENDS.items()]


def use_dqa(folder: str | None, *, who: Identity) -> str:
    """The DQA folder ``folder`` (None: the configured one) checked: what it holds (DQAError saying why not)."""
    authorize(who, "server_paths")
    return check_dqa(folder or None)


def rescan(*, who: Identity) -> None:
    """Scan the scenarios folders again (new or changed scenario folders) for ``who``."""
    authorize(who, "rescan")
    scenarios.reload()


def use_scenarios_folder(folder: str | None, *, who: Identity) -> Path:
    """Use ``folder`` (None: the configured one) as this context's scenarios folder, scanned anew; the folder."""
    authorize(who, "server_paths")
    scenarios.use_folder(folder or None)
    scenarios.reload()
    return scenarios.scenarios_dir()
