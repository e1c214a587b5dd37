"""LangGraph's checkpoints of the runs: its own SQLite saver on ``checkpoints.sqlite`` in the project home, or its
own PostgreSQL saver (``langgraph-checkpoint-postgres``) on the team store (core.store.database)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.store import database
from core.store.sqlite import open_sqlite


def open_checkpointer(path: str | Path) -> tuple[object, Callable[[], None]]:
    """The checkpointer of the store whose embedded file is ``path`` and what closes it."""
    target = database.location(path)
    if database.is_url(target):
        from langgraph.checkpoint.postgres import PostgresSaver  # optional: team mode only

        database.check_schema(target)
        return PostgresSaver(database.pool(target, checkpoints=True)), lambda: None  # the pool stays for the process
    from langgraph.checkpoint.sqlite import SqliteSaver  # heavy: LangGraph's saver, loaded with the runtime only

    # a damaged checkpoint file is set aside (its paused runs cannot be resumed) and a new one started
    con = open_sqlite(Path(target), "checkpoint store", check_same_thread=False)
    con.execute("PRAGMA synchronous = NORMAL")  # in WAL mode (SqliteSaver's): no fsync per step
    return SqliteSaver(con), con.close
