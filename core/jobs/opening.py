"""Where a process's runs are kept and driven: the run store and the agent runtime under DATA_HOME (the app's
fallback home when DATA_HOME cannot be used: core.config.home), for the app's jobs (core.jobs.runs) and a worker's
(core.jobs.tasks) alike."""
from __future__ import annotations

from functools import partial
from pathlib import Path

from core.agents.workspace import open_catalog_workspace
from core.config import home
from core.config import settings as config
from core.llm.client import LLMSettings
from core.store.runs import RunStore


def open_store() -> RunStore:
    """The run store under DATA_HOME (the app's fallback home when DATA_HOME cannot be used: core.config.home)."""
    home.use_fallback()
    return RunStore(config.DATA_HOME / "runs.sqlite")


def open_runtime(dqa_root: str | Path | None = None, llm: LLMSettings | None = None,
                 db: config.DatabaseSettings | None = None):
    """An AgentRuntime under DATA_HOME reading DQA questions from ``dqa_root``, opening models with ``llm`` (server,
    key) and database servers with ``db`` (defaults: the environment)."""
    from core.agents.runtime import AgentRuntime  # heavy: loads langgraph

    home.use_fallback()
    return AgentRuntime(config.DATA_HOME, workspace=partial(open_catalog_workspace, root=dqa_root, db_settings=db),
                        llm_settings=llm)
