"""The team store's schema: ``upgrade`` applies the Alembic migrations (core/store/migrations), LangGraph's own
checkpoint tables (``PostgresSaver.setup``, which keeps its own migration count) and the job queue's tables
(procrastinate's schema, then its migration files past the store's level: ``upgrade_queue``) to a PostgreSQL
database."""
from __future__ import annotations

from contextlib import closing
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
    """Bring the team store at ``url`` to this code's schema (its tables, LangGraph's checkpoint tables and the job
    queue's, ``upgrade_queue``); returns the revisions it was and is at."""
    from alembic import command  # heavy: as above
    from langgraph.checkpoint.postgres import PostgresSaver  # heavy: LangGraph's Postgres checkpointer

    was = database.current_revision(url)
    command.upgrade(_alembic_config(url), "head")
    with database.pool(url, checkpoints=True).connection() as con:
        PostgresSaver(con).setup()
    upgrade_queue(url)
    database.close_pools(url)  # the schema check runs again on the next open
    return was, database.current_revision(url)


def upgrade_queue(url: str) -> list[str]:
    """The job queue's tables at this code's procrastinate level: created from procrastinate's schema when absent,
    else each of its migration files newer than the store's level applied in order, each in a transaction of its
    own with the level it brings (a store ahead of the code is left as it is: check_schema refuses it). The
    migrations applied."""
    files = database.queue_migrations()
    with closing(database.session(url)) as session:
        con = session.connection
        con.execute("SELECT pg_advisory_lock(hashtextextended('planrag:queue_schema', 0))")  # one upgrade at a time
        level = database.queue_level(url)
        if level is None:
            from procrastinate.schema import SchemaManager  # heavy: the job queue's schema, only for a change

            with con.transaction():
                con.execute(SchemaManager.get_schema())
                _set_level(con, files[-1].stem)
            return []
        applied = []
        for file in (f for f in files if f.stem > level):
            with con.transaction():
                con.execute(file.read_text(encoding="utf-8"))
                _set_level(con, file.stem)
            applied.append(file.stem)
    return applied


def _set_level(con, migration: str) -> None:
    con.execute("DELETE FROM queue_schema")
    con.execute("INSERT INTO queue_schema (migration) VALUES (%s)", (migration,))
