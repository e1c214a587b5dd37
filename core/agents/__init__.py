"""Decision-making agents (SingleRAG, IterRAG, PlanRAG, PlanRAG w/o RP, AutoPlan) on one LangGraph loop and REAPER
on its own graph, with pauses for the analyst's review of plans. Start here: AgentRuntime (runtime.py). Names are imported on first use, so the
light modules (techniques, config, parsing) load without LangGraph."""
import importlib

_EXPORTS = {"AgentRuntime": "runtime", "RunNotPaused": "runtime", "RunResult": "runtime", "new_run_id": "runtime",
            "HITL_MODES": "config", "Limits": "config", "Pause": "config", "Review": "config",
            "RunSettings": "config", "Event": "events", "event_from_dict": "events", "TECHNIQUES": "techniques",
            "Workspace": "workspace"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'core.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(f"core.agents.{_EXPORTS[name]}"), name)
