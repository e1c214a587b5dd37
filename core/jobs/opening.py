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


def warm_up() -> None:
    """Load what a process's first run would otherwise wait for, each loaded once per process: LangGraph and the
    agent runtime, the model client, the question catalog (about 5 s on a quiet machine, many more on a busy one;
    meanwhile the first run's page could not be redrawn either)."""
    import core.agents.runtime  # noqa: F401 heavy: langgraph
    import langchain_openai  # noqa: F401 heavy: the model client
    from core.scenarios import catalog  # noqa: F401 heavy: numpy and pandas
