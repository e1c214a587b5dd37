"""Alembic's environment for the team store: online migrations on the URL core.store.schema.upgrade sets."""
from alembic import context
from sqlalchemy import create_engine

url = context.config.get_main_option("sqlalchemy.url")
engine = create_engine(url, connect_args={"prepare_threshold": None})
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
