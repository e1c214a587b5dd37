"""PlanRAG (PlanRAG paper, Figure 11): a Plan first, then Thought, Action, Observation and Re-plan: Y|N after each;
on the shared loop (core.agents.graph) with the loop's prompt sets, composed from its attributes (technique.toml)."""
