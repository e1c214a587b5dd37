"""Where a process's runs are kept and driven: the run store and the agent runtime under DATA_HOME (the app's
fallback home when DATA_HOME cannot be used: core.config.home), for the app's jobs (core.jobs.runs) and a worker's
(core.jobs.tasks) alike."""
from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from core.agents.workspace import open_catalog_workspace
from core.config import home
from core.config import settings as config
from core.llm.client import LLMSettings
from core.store.database import location
from core.store.runs import RunStore

_stores: dict = {}  # where a store lives -> (its file's identity, its size then, the RunStore)
_stores_lock = threading.Lock()


def open_store() -> RunStore:
    """The run store under DATA_HOME (the app's fallback home when DATA_HOME cannot be used: core.config.home),
    built once per process for each place a store lives and shared by its threads; built again when its file was
    replaced or cut short outside the app, so that the store notices it (RunStore.notice)."""
    home.use_fallback()
    path = config.DATA_HOME / "runs.sqlite"
    target = location(path)
    with _stores_lock:
        kept = _stores.get(target)
        if kept is not None:
            identity, size = _file(target)
            if identity is not False and identity == kept[0] and size >= kept[1]:
                return kept[2]
        store = RunStore(path)
        _stores[target] = (*_file(target), store)
        return store


def _file(target: str | Path) -> tuple[tuple | bool | None, int]:
    """A store file's identity (device and inode; False when it is missing) and size; the team store's URL has
    none (None)."""
    if not isinstance(target, Path):
        return None, 0
    try:
        stat = os.stat(target)
    except OSError:
        return False, 0
    return (stat.st_dev, stat.st_ino), stat.st_size


def open_runtime(dqa_root: str | Path | None = None, llm: LLMSettings | None = None,
                 db: config.DatabaseSettings | None = None):
    """An AgentRuntime under DATA_HOME reading DQA questions from ``dqa_root``, opening models with ``llm`` (server,
    key) and database servers with ``db`` (defaults: the environment)."""
    from core.agents.runtime import AgentRuntime  # heavy: loads langgraph

    home.use_fallback()
    return AgentRuntime(config.DATA_HOME, workspace=partial(open_catalog_workspace, root=dqa_root, db_settings=db),
                        llm_settings=llm)


#: What ``warm_up`` loads, in steps of 0.1-0.35 s each on a quiet machine (1.2 s in all, measured): LangChain's
#: messages and tracers (LangSmith), LangGraph, the agent runtime, the OpenAI SDK and LangChain's model client, pandas
#: and the question catalog.
WARM_UP = ("langchain_core.messages", "langsmith.client", "langgraph.graph", "core.agents.runtime", "openai",
           "langchain_openai", "pandas", "core.scenarios.catalog")


def warm_up(between: Callable[[], object] = lambda: None) -> None:
    """Load what a process's first run would otherwise wait for (``WARM_UP``, each once per process), a step at a
    time; ``between()``, called before each step, may hold it back (the app: until no page has run for a moment). A
    page's own first imports wait for the step under way, not for the whole warm-up (a page's first visit then took
    1.4 s instead of 0.2)."""
    for name in WARM_UP:
        between()
        importlib.import_module(name)
