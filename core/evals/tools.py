"""The sample's database as an Inspect tool: one read-only query (SQL or Cypher, by the backend), bounded in time
and rows, its rows as text or its error; for any Inspect agent (``react(tools=[database_query()])``) on DQA."""
from __future__ import annotations

import anyio.to_thread
from inspect_ai.solver import TaskState
from inspect_ai.tool import Tool, ToolError, tool
from inspect_ai.util import store

from core.backends.base import QueryError, render_rows
from core.backends.registry import open_backend
from core.scenarios import catalog

#: a query's time (s) and rows at most
TIMEOUT_S, ROW_CAP = 10.0, 200


def open_sample_backend(meta: dict, root=None):
    """The sample's database (``meta``: scenario, question, db, source) opened read-only in its backend."""
    question = catalog.question(meta.get("source", "dqa"), meta["scenario"], meta["question"], root)
    return open_backend(meta.get("db", "sqlite"), catalog.database(question, root))


def schema_of(meta: dict, root=None) -> str:
    """The sample database's schema as the workbench's prompts show it."""
    backend = open_sample_backend(meta, root)
    try:
        return backend.schema_text()
    finally:
        backend.close()


@tool
def database_query(root: str | None = None) -> Tool:
    """The read-only query tool over the current sample's database."""

    async def execute(query: str) -> str:
        """Run one read-only query on the decision's database and return its rows.

        Args:
            query: One SQL query (or Cypher, for a graph database); writes are refused.
        """
        meta = store().get("planrag_sample")
        if meta is None:
            raise ToolError("no sample database: use this tool with the decision_qa task")

        def run() -> str:
            backend = open_sample_backend(meta, root)
            try:
                result = backend.query(query, timeout_s=TIMEOUT_S, row_cap=ROW_CAP)
            finally:
                backend.close()
            return render_rows(result.columns, result.rows, result.total_rows)

        try:
            return await anyio.to_thread.run_sync(run)
        except QueryError as e:
            raise ToolError(f"Query failed: {e}") from None

    return execute


def remember_sample(state: TaskState) -> None:
    """Make the sample's database the one ``database_query`` queries."""
    store().set("planrag_sample", {k: state.metadata[k] for k in ("scenario", "question", "db", "source")
                                   if k in state.metadata})
