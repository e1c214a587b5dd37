"""IterRAG (PlanRAG paper, Figure 10): Thought, Action, Observation until the answer, no plan; on the shared loop
(core.agents.graph) with the loop's prompt sets, composed from its attributes (technique.toml)."""
