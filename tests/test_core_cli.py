"""The ``python -m core dqa`` and ``python -m core query`` command lines, run as other tools run them."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_dqa_counts(dqa_dir):
    out = run("dqa", str(dqa_dir))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["locating: 200 questions (3 distinct databases)",
                                       "building: 101 questions (37 distinct databases)"]


def test_dqa_bad_directory(tmp_path):
    out = run("dqa", str(tmp_path))
    assert out.returncode != 0 and "not found" in out.stderr


@pytest.mark.parametrize("db,query", [
    ("sqlite", "SELECT source, flow FROM flow WHERE dest = \"baltic_sea\" ORDER BY source"),
    ("ladybug", "MATCH (s:Trade_node)-[f:source]->(:Trade_node {name: 'baltic_sea'}) RETURN s.name, f.flow "
                "ORDER BY s.name"),
])
def test_query_json(dqa_dir, db, query):
    out = run("query", "--scenario", "locating", "--question", "1", "--db", db, "--json", query,
              env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert len(result["columns"]) == 2 and len(result["rows"]) >= 2
    assert all(isinstance(r[1], float) for r in result["rows"])


def test_query_text_output(dqa_dir):
    out = run("query", "--scenario", "building", "--question", "1", "--db", "sqlite",
              "SELECT goods_name, current_price FROM goods WHERE goods_name = 'FURNITURE'",
              env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "goods_name | current_price" and "furniture" in out.stdout


@pytest.mark.parametrize("query,kind", [
    ("DELETE FROM flow", "refused"),
    ("SELEC * FROM flow", "syntax"),
])
def test_query_errors_exit_non_zero(dqa_dir, query, kind):
    out = run("query", "--scenario", "locating", "--question", "1", "--db", "sqlite", query,
              env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode != 0 and out.stdout == "" and f"error ({kind})" in out.stderr


def test_query_timeout_exits_non_zero(dqa_dir):
    out = run("query", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--timeout", "0.3",
              "SELECT COUNT(*) FROM node_country a, node_country b, node_country c",
              env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode != 0 and "error (timeout)" in out.stderr


def test_unknown_question(dqa_dir):
    out = run("query", "--scenario", "locating", "--question", "999", "--db", "sqlite", "SELECT 1",
              env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode != 0 and "questions 1-200" in out.stderr
