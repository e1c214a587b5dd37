"""The job queue's schema level: the name of the last of procrastinate's migration files the store has
(core.store.schema.upgrade applies the newer ones; core.store.database.check_schema compares it with the code's).

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("queue_schema", sa.Column("migration", sa.Text, nullable=False))


def downgrade() -> None:
    op.drop_table("queue_schema")
