"""A benchmark's budget shared by all its workers: caps, what its calls spent and the calls in flight,
per benchmark and budget id (core.benchmark.budget).

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TEXT, BIG, REAL = sa.Text, sa.BigInteger, sa.Float(precision=53)


def upgrade() -> None:
    op.create_table("bench_budgets", sa.Column("benchmark", TEXT, primary_key=True),
                    sa.Column("id", TEXT, primary_key=True), sa.Column("max_tokens", BIG),
                    sa.Column("max_cost_usd", REAL), sa.Column("max_calls", BIG), sa.Column("price_prompt", REAL),
                    sa.Column("price_completion", REAL),
                    *(sa.Column(name, BIG, nullable=False, server_default="0")
                      for name in ("calls", "prompt_tokens", "completion_tokens", "in_flight")))


def downgrade() -> None:
    op.drop_table("bench_budgets")
