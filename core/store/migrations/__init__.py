"""The team store's schema as Alembic migrations (``versions/``), applied by ``python -m core db upgrade``
(core.store.schema)."""
