"""What an administrator sees of each worker of the job queue (``python -m core worker --status``, Settings): its
name, host, pid, queues and start, by procrastinate's worker id (a row whose worker is gone is dropped by the
sweep).

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("queue_workers", sa.Column("worker_id", sa.BigInteger, primary_key=True),
                    sa.Column("name", sa.Text), sa.Column("host", sa.Text), sa.Column("pid", sa.Integer),
                    sa.Column("queues", sa.Text), sa.Column("since", sa.Float(precision=53)))


def downgrade() -> None:
    op.drop_table("queue_workers")
