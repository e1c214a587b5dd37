"""The team store's schema: ``upgrade`` applies the Alembic migrations (core/store/migrations), LangGraph's own
checkpoint tables (``PostgresSaver.setup``, which keeps its own migration count) and the job queue's tables
(procrastinate's schema, at the pinned version's) to a PostgreSQL database."""
from __future__ import annotations

from pathlib import Path

from core.store import database

MIGRATIONS = Path(__file__).with_name("migrations")


def _alembic_config(url: str):
    from alembic.config import Config  # heavy: Alembic and SQLAlchemy, only for a schema change

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", "postgresql+psycopg://" + url.split("://", 1)[1])
    return config


def head() -> str:
    """The newest revision of the migrations."""
    from alembic.script import ScriptDirectory  # heavy: as above

    return ScriptDirectory.from_config(_alembic_config("postgresql://")).get_current_head()


def upgrade(url: str) -> tuple[str | None, str]:
    """Bring the team store at ``url`` to this code's schema (its tables and LangGraph's checkpoint tables);
    returns the revisions it was and is at."""
    from alembic import command  # heavy: as above
    from langgraph.checkpoint.postgres import PostgresSaver  # heavy: LangGraph's Postgres checkpointer

    was = database.current_revision(url)
    command.upgrade(_alembic_config(url), "head")
    with database.pool(url, checkpoints=True).connection() as con:
        PostgresSaver(con).setup()
        if not database.has_queue(url):
            from procrastinate.schema import SchemaManager  # heavy: the job queue's schema, only for a change

            con.execute(SchemaManager.get_schema())
    database.close_pools(url)  # the schema check runs again on the next open
    return was, database.current_revision(url)
