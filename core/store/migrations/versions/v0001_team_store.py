"""The team store's first schema: the run store (runs, events, reviews and pauses, its id), grade overrides,
benchmark results (by benchmark: its folder's name), the LLM reply cache and learned plans, as the SQLite files
hold them.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TEXT, INT, REAL = sa.Text, sa.Integer, sa.Float(precision=53)


def _results_columns() -> list:
    return [sa.Column("scenario", TEXT), sa.Column("question", INT), sa.Column("db", TEXT),
            sa.Column("technique", TEXT), sa.Column("model", TEXT)]


def upgrade() -> None:
    op.create_table("runs", sa.Column("id", TEXT, primary_key=True), sa.Column("created", REAL),
                    sa.Column("updated", REAL), sa.Column("status", TEXT), sa.Column("scenario", TEXT),
                    sa.Column("question", INT), sa.Column("db", TEXT), sa.Column("technique", TEXT),
                    sa.Column("llm", TEXT), sa.Column("hitl", TEXT), sa.Column("settings", TEXT),
                    sa.Column("pause", TEXT), sa.Column("outcome", TEXT), sa.Column("decision", TEXT),
                    sa.Column("correct", INT), sa.Column("pause_id", TEXT),
                    sa.Column("pauses", INT, server_default="0"), sa.Column("owner_pid", INT),
                    sa.Column("owner_host", TEXT), sa.Column("heartbeat", REAL),
                    sa.Column("stop_requested", INT, server_default="0"), sa.Column("parent_id", TEXT),
                    sa.Column("branch_step", INT))
    op.create_index("runs_by_question", "runs", ["scenario", "question"])
    op.create_index("runs_by_created", "runs", ["created"])
    op.create_index("runs_by_parent", "runs", ["parent_id"])
    op.create_table("events", sa.Column("run_id", TEXT, primary_key=True), sa.Column("seq", INT, primary_key=True),
                    sa.Column("kind", TEXT), sa.Column("data", TEXT))
    # a stop is recorded with no pause: unique (run, pause), where NULLs do not collide
    op.create_table("reviews", sa.Column("run_id", TEXT, nullable=False), sa.Column("pause_id", TEXT),
                    sa.Column("kind", TEXT), sa.Column("action", TEXT), sa.Column("reviewer", TEXT),
                    sa.Column("at", REAL), sa.Column("review", TEXT), sa.UniqueConstraint("run_id", "pause_id"))
    op.create_table("store_meta", sa.Column("key", TEXT, primary_key=True), sa.Column("value", TEXT))
    op.create_table("overrides", sa.Column("run_id", TEXT, primary_key=True), sa.Column("decision", TEXT),
                    sa.Column("correct", INT), sa.Column("by", TEXT), sa.Column("at", REAL), sa.Column("note", TEXT),
                    sa.Column("placement", TEXT))
    op.create_table("bench_results", sa.Column("benchmark", TEXT, primary_key=True),
                    sa.Column("key", TEXT, primary_key=True), *_results_columns(), sa.Column("status", TEXT),
                    sa.Column("correct", INT), sa.Column("finished", REAL), sa.Column("data", TEXT))
    op.create_table("bench_meta", sa.Column("benchmark", TEXT, primary_key=True),
                    sa.Column("name", TEXT, primary_key=True), sa.Column("value", TEXT))
    op.create_table("bench_not_run", sa.Column("benchmark", TEXT, primary_key=True),
                    sa.Column("key", TEXT, primary_key=True), *_results_columns(), sa.Column("error_kind", TEXT),
                    sa.Column("error", TEXT), sa.Column("attempts", TEXT), sa.Column("at", REAL))
    op.create_table("replies", sa.Column("key", TEXT, primary_key=True), sa.Column("model", TEXT),
                    sa.Column("created", REAL), sa.Column("data", TEXT))
    op.create_table("learned_plans", sa.Column("scenario", TEXT, primary_key=True),
                    sa.Column("version", INT, primary_key=True), sa.Column("created", REAL),
                    sa.Column("data", TEXT))


def downgrade() -> None:
    for table in ("learned_plans", "replies", "bench_not_run", "bench_meta", "bench_results", "overrides",
                  "store_meta", "reviews", "events", "runs"):
        op.drop_table(table)
