"""Settings from the environment, with the project's defaults (data folders, database servers, the LLM). The UI
may override them per session. Plain values only: importing this loads no driver or LLM library."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from core.config import secrets

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DQA_DIR = PROJECT_ROOT.parent / "shared" / "dqa"
DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306"
DATA_HOME = Path(os.environ.get("PLANRAG_HOME", PROJECT_ROOT / ".planrag"))


def scenarios_dir() -> Path:
    """The folder of the user's scenario plugins (docs/scenarios.md): ``PLANRAG_SCENARIOS``, else ``scenarios/`` in
    the project home (``PLANRAG_HOME``)."""
    value = os.environ.get("PLANRAG_SCENARIOS")
    if value:
        return Path(value).expanduser()
    home = os.environ.get("PLANRAG_HOME")
    return (Path(home).expanduser() if home else DATA_HOME) / "scenarios"


def dqa_dir() -> Path | None:
    """The DQA directory: ``DQA_DIR`` if set, else ``../shared/dqa`` when it exists, else None."""
    value = os.environ.get("DQA_DIR")
    if value:
        return Path(value).expanduser()
    return DEFAULT_DQA_DIR if DEFAULT_DQA_DIR.is_dir() else None


@dataclass
class DatabaseSettings:
    """Where the server backends are; the embedded ones need nothing."""

    mysql_url: str = field(default_factory=lambda: os.environ.get("MYSQL_URL", DEFAULT_MYSQL_URL))
    neo4j_uri: str | None = field(default_factory=lambda: os.environ.get("NEO4J_URI") or None)
    neo4j_user: str = field(default_factory=lambda: os.environ.get("NEO4J_USER", "neo4j"))
    neo4j_password: str = field(default_factory=lambda: os.environ.get("NEO4J_PASSWORD", ""), repr=False)

    def __post_init__(self):
        secrets.register(self.neo4j_password)  # kept out of everything stored or printed (core.config.secrets)
        try:
            secrets.register(urlsplit(self.mysql_url).password)
        except ValueError:  # a malformed URL: the backend reports it
            pass


#: Model timeout (s) and retries: an analyst waiting on a page gives up sooner than an unattended benchmark.
INTERACTIVE_TIMEOUT_S, INTERACTIVE_RETRIES = 60.0, 2
UNATTENDED_TIMEOUT_S, UNATTENDED_RETRIES = 120.0, 4
DEFAULT_MAX_REPLY_TOKENS = 2048


def env_number(name: str, kind=float, default=None):
    """The number in environment variable ``name`` (``default`` when unset or empty); ValueError naming the
    variable when it is not a valid one."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return check_llm_number(name, kind(value), kind)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a valid {'whole ' if kind is int else ''}number") from None


def check_llm_number(name: str, value, kind=float):
    """``value`` if it is a usable timeout, retry count or reply cap (finite, timeouts and caps above 0, retries
    0 or more); ValueError naming ``name`` otherwise."""
    if value is None:
        return None
    if value != value or value in (float("inf"), float("-inf")) or (kind is int and value != int(value)):
        raise ValueError(f"{name} must be a finite {'whole ' if kind is int else ''}number, not {value!r}")
    if value < 0 or (value == 0 and "retr" not in name.lower()):
        raise ValueError(f"{name} must be {'0 or more' if 'retr' in name.lower() else 'above 0'}, not {value!r}")
    return kind(value)


@dataclass
class LLMSettings:
    """Which model and server, from explicit values or the environment (OPENAI_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY,
    PLANRAG_LLM_TIMEOUT, PLANRAG_LLM_RETRIES, PLANRAG_MAX_REPLY_TOKENS, PLANRAG_TOKENIZER); ``unattended()`` gives
    the benchmark's defaults. The key goes only to ``key_url`` (None: OpenAI's API); ``endpoint``: the server's
    named endpoint these settings come from."""

    model: str | None = field(default_factory=lambda: os.environ.get("OPENAI_MODEL") or None)
    base_url: str | None = field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None)
    api_key: str | None = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY") or None, repr=False)
    key_url: str | None = field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None, repr=False)
    endpoint: str | None = None
    temperature: float = 0.0
    top_p: float | None = None  # nucleus sampling (None: not sent; the server's default)
    seed: int | None = None  # the sampling seed, for servers that take one (None: not sent)
    timeout_s: float = field(default_factory=lambda: env_number("PLANRAG_LLM_TIMEOUT", float, INTERACTIVE_TIMEOUT_S))
    max_retries: int = field(default_factory=lambda: env_number("PLANRAG_LLM_RETRIES", int, INTERACTIVE_RETRIES))
    retry_base_s: float = 1.0  # first backoff delay; doubled on each retry, capped at 30 s
    max_reply_tokens: int | None = field(
        default_factory=lambda: env_number("PLANRAG_MAX_REPLY_TOKENS", int, DEFAULT_MAX_REPLY_TOKENS))
    tokenizer: str | None = field(default_factory=lambda: os.environ.get("PLANRAG_TOKENIZER") or None)
    server_tokenizer: bool = True  # without a tokenizer file, the server's counts tokens (POST /tokenize) where it can

    @classmethod
    def unattended(cls, **values) -> LLMSettings:
        """Settings for unattended runs (the benchmark): a longer timeout and more retries unless the environment
        sets them."""
        return cls(**{"timeout_s": env_number("PLANRAG_LLM_TIMEOUT", float, UNATTENDED_TIMEOUT_S),
                      "max_retries": env_number("PLANRAG_LLM_RETRIES", int, UNATTENDED_RETRIES), **values})

    def with_limits(self, timeout_s: float | None = None, retries: int | None = None,
                    reply_tokens: int | None = None) -> LLMSettings:
        """These settings with the given timeout, retries and reply cap (None: unchanged), checked."""
        from dataclasses import replace

        return replace(self, timeout_s=check_llm_number("--llm-timeout", timeout_s) or self.timeout_s,
                       max_retries=self.max_retries if retries is None else check_llm_number("--llm-retries",
                                                                                            retries, int),
                       max_reply_tokens=check_llm_number("--max-reply-tokens", reply_tokens, int)
                       or self.max_reply_tokens)


DATABASE_URL_ENV = "PLANRAG_DATABASE_URL"


def database_url() -> str | None:
    """The team store (``PLANRAG_DATABASE_URL``, a ``postgresql://`` URL; docs/deploy.md), None for the embedded
    default (SQLite files under the project home). Its password is kept out of everything stored or printed."""
    value = os.environ.get(DATABASE_URL_ENV, "").strip() or None
    if value:
        try:
            secrets.register(urlsplit(value).password)
        except ValueError:  # a malformed URL: opening it reports the error
            pass
    return value


JOBS_ENV = "PLANRAG_JOBS"
JOBS_MODES = ("queue", "process", "threads")


def jobs_mode() -> str:
    """Where runs and benchmark items run (``PLANRAG_JOBS``): ``queue`` (the team's job queue, taken by ``python -m
    core worker`` processes; the default with a team store), ``process`` (runs in the app's local run process,
    core.jobs.local; the embedded default) or ``threads`` (in the process that starts them)."""
    value = os.environ.get(JOBS_ENV, "").strip().lower() or ("queue" if database_url() else "process")
    if value not in JOBS_MODES:
        raise ValueError(f"{JOBS_ENV} is {value!r}: choose {', '.join(JOBS_MODES)}")
    if value == "queue" and not database_url():
        raise ValueError(f"{JOBS_ENV}=queue needs a team store: set {DATABASE_URL_ENV} to a postgresql:// URL")
    return value
