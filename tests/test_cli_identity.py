"""The command line's identity (issue 36): whoever runs ``python -m core`` on the server's machine is its operator,
the admin ``local operator``, recorded as who started its runs and benchmarks, reviewed, stopped and branched; never
the Unix account's name (README, Sign-in and roles)."""
from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

from core.store.runs import RunStore
from tests.test_e2e_signin import REPLAY

ROOT = Path(__file__).resolve().parent.parent
OPERATOR = "local operator"


def core(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PLANRAG_HOME": str(home)})


def paused_run(home: Path) -> str:
    done = core(home, "run", "--source", "demo", "--scenario", "locating", "--question", "1", "--db", "sqlite",
                "--technique", "planrag", "--llm", f"replay:{REPLAY}", "--hitl", "approve-every-plan")
    assert done.returncode == 3, done.stderr  # paused at its plan
    return done.stdout.split("paused: run ")[1].split()[0]


def test_the_command_line_acts_as_the_local_operator(tmp_path):
    home = tmp_path / "home"
    reviewed = paused_run(home)
    resumed = core(home, "run", "--resume", reviewed, "--pause", "p1", "--approve")
    assert resumed.returncode in (0, 3), resumed.stderr
    stopped = paused_run(home)
    assert core(home, "stop", stopped).returncode == 0
    branched = core(home, "branch", reviewed, "--step", "1", "--note", "check the totals", "--json")
    assert branched.returncode in (0, 1, 3), branched.stderr
    bench = core(home, "bench", "--smoke", "--technique", "iterrag")
    assert bench.returncode == 0, bench.stderr

    store = RunStore(home / "runs.sqlite")
    runs = store.list()
    assert len(runs) == 5  # two paused runs, a branch, two smoke items
    assert {store.started_by(r.id) for r in runs} == {OPERATOR}
    rows = store.db.rows("SELECT run_id, action, reviewer FROM reviews")
    assert {reviewer for _, _, reviewer in rows} == {OPERATOR}
    assert (reviewed, "approve", OPERATOR) in rows and (stopped, "stop", OPERATOR) in rows
    account = getpass.getuser()
    assert all(account not in (reviewer, store.started_by(run_id)) for run_id, _, reviewer in rows)
