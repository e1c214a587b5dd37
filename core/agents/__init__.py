"""Decision-making agents (SingleRAG, IterRAG, PlanRAG, PlanRAG w/o RP, AutoPlan) on one LangGraph loop (graph.py)
and REAPER on its own graph (reaper.py), with pauses for the analyst's review of plans and queries. Start here:
AgentRuntime (runtime.py). What a run is asked to do and what it emits are plain data in core.model (RunSettings,
Review, the events)."""
