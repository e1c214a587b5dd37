"""The machinery the techniques (core/techniques, one folder each) share: the engine a technique gives
(engine.py), a run's state in typed parts (state.py), what every graph's nodes share (nodes.py), the LangGraph loop
most of them run on (graph.py; paper_loop.py in the paper setting), with pauses for the analyst's review of plans and
queries, the guards, the runtime. Start here: AgentRuntime (runtime.py). What a run is asked to do and what it emits
are plain data in core.model (RunSettings, Review, the events)."""
