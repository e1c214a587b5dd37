"""PlanRAG w/o RP (PlanRAG paper, Table 4): PlanRAG that never re-plans; on the shared loop (core.agents.graph) with
the loop's prompt sets, composed from its attributes (technique.toml)."""
