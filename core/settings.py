"""Settings from the environment, with the project's defaults (data folders, database servers, the LLM). The UI
may override them per session. Plain values only: importing this loads no driver or LLM library."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DQA_DIR = PROJECT_ROOT.parent / "shared" / "dqa"
DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306"
DATA_HOME = Path(os.environ.get("PLANRAG_HOME", PROJECT_ROOT / ".planrag"))


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


@dataclass
class LLMSettings:
    """Which model and server, from explicit values or the environment (OPENAI_MODEL, OPENAI_BASE_URL,
    OPENAI_API_KEY)."""

    model: str | None = field(default_factory=lambda: os.environ.get("OPENAI_MODEL") or None)
    base_url: str | None = field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None)
    api_key: str | None = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY") or None, repr=False)
    temperature: float = 0.0
    timeout_s: float = 120.0
    max_retries: int = 4
    retry_base_s: float = 1.0  # first backoff delay; doubled on each retry, capped at 30 s
    max_reply_tokens: int | None = 2048
