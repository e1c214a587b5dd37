#!/bin/sh
# The app and PLANRAG_WORKERS workers of the team deployment under supervisor (deploy/supervisord.conf), each
# started again when it dies; the team's environment (PLANRAG_DATABASE_URL, PLANRAG_JOBS=queue, ...) set before.
# Arguments go to supervisord (-n: in the foreground). Control: "$PLANRAG_PYTHON" -m supervisor.supervisorctl
# -c deploy/supervisord.conf status|restart worker:*|shutdown
set -e
cd "$(dirname "$0")/.."
export PLANRAG_RUN_DIR="${PLANRAG_RUN_DIR:-$PWD/.run}" PLANRAG_WORKERS="${PLANRAG_WORKERS:-2}" \
    PLANRAG_PORT="${PLANRAG_PORT:-8501}" PLANRAG_WORKER_CONCURRENCY="${PLANRAG_WORKER_CONCURRENCY:-1}" \
    PLANRAG_PYTHON="${PLANRAG_PYTHON:-$PWD/.venv/bin/python}"
mkdir -p "$PLANRAG_RUN_DIR"
exec "$PLANRAG_PYTHON" -m supervisor.supervisord -c deploy/supervisord.conf "$@"
