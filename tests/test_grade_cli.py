"""``python -m core grade``: the grade of one final answer, as other tools call it (the JSON contract)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from core.model.outcome import RunOutcome
from core.model.run_settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"decision", "status", "reason", "mentions", "correct", "rank", "tied", "regret"}


def grade(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "core", "grade", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, input=stdin)


def test_demo_grade_json_reads_the_conclusion():
    done = grade("--scenario", "building", "--question", "1", "--source", "demo", "--json",
                 "Building 106 lowers the price less than building 107, so pick 107")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert FIELDS <= set(out)
    assert (out["decision"], out["status"], out["correct"], out["rank"], out["tied"], out["regret"]) == (
        107, "decided", True, 1, 1, 0.0)


def test_demo_grade_ambiguous_and_from_stdin():
    done = grade("--scenario", "locating", "--question", "1", "--source", "demo", "--json", "-",
                 stdin="Either doab or ganges would do.")
    out = json.loads(done.stdout)
    assert (out["decision"], out["status"], out["correct"], out["rank"]) == (None, "ambiguous", False, None)
    assert out["mentions"] == ["doab", "ganges"]


def test_dqa_tied_pick_text(dqa_dir):
    done = grade("--scenario", "locating", "--question", "1", "Final answer: kongo")
    assert done.returncode == 0 and "rank tied 3rd–79th of 79" in done.stdout and "wrong" in done.stdout


def test_unknown_question_is_a_clear_error():
    done = grade("--scenario", "locating", "--question", "999", "--source", "demo", "krakow")
    assert done.returncode == 1 and "no demo locating question 999" in done.stderr


def test_override_from_the_command_line(tmp_path):
    import os

    from core.store.overrides import OverrideStore
    from core.store.runs import RunStore

    store = RunStore(tmp_path / "runs.sqlite")
    store.create("r1", RunSettings("locating", 1, "sqlite", "planrag", "x", source="demo"))
    store.update("r1", "finished", outcome=RunOutcome.from_dict({"decision": None, "correct": False}))
    env = {**os.environ, "PLANRAG_HOME": str(tmp_path)}

    def override(*args):
        return subprocess.run([sys.executable, "-m", "core", "override", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env=env)

    unnamed = override("r1", "--decision", "doab")  # the command line's identity: the machine's operator
    assert unnamed.returncode == 0 and "grade overridden by local operator" in unnamed.stdout
    assert OverrideStore(tmp_path).get("r1").by == "local operator"
    missing = override("r9", "--decision", "doab", "--by", "ana")
    assert (missing.returncode, missing.stderr) == (1, "error: run r9 is not in the run store\n")  # no "(override)"
    assert "not a candidate" in override("r1", "--decision", "atlantis", "--by", "ana").stderr
    done = override("r1", "--decision", "Doab", "--by", "ana", "--note", "the answer names doab last")
    assert done.returncode == 0 and "grade overridden by ana" in done.stdout and "(correct)" in done.stdout
    saved = OverrideStore(tmp_path).get("r1")
    assert (saved.decision, saved.correct, saved.by, saved.note) == ("doab", True, "ana", "the answer names doab last")
    assert json.loads(override("--list").stdout)["run_id"] == "r1"
    assert "restored" in override("r1", "--clear").stdout and OverrideStore(tmp_path).get("r1") is None
