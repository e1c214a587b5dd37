"""SingleRAG (PlanRAG paper, Figure 8): one query, then the answer call; on the shared loop (core.agents.graph) with
the loop's prompt sets, composed from its attributes (technique.toml)."""
