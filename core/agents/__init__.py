"""The machinery the techniques (core/techniques, one folder each) share: the engine a technique gives
(engine.py), the LangGraph loop most of them run on (graph.py), with pauses for the analyst's review of plans and
queries, the guards, the runtime. Start here: AgentRuntime (runtime.py). What a run is asked to do and what it emits
are plain data in core.model (RunSettings, Review, the events)."""
