"""Who is looking at which run (the review inbox): a viewer's latest mark per run.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("viewers", sa.Column("run_id", sa.Text, primary_key=True),
                    sa.Column("viewer", sa.Text, primary_key=True), sa.Column("at", sa.Float(precision=53)))


def downgrade() -> None:
    op.drop_table("viewers")
