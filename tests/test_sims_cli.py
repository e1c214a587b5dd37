"""The ``python -m sims`` command line: JSON output other tools rely on, the benchmark check, errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sims import locating, synthetic

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sims", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_rank_locating_json(dqa_dir):
    done = run("rank", "locating", "--db", dqa_dir / "locating/queries/SQL_format/q1.sql", "--country", "SWE",
               "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    assert len(entries) == 79 and set(entries[0]) == {"candidate", "score", "rank", "tied", "measure", "better"}
    assert entries[0]["candidate"] == "krakow"
    assert {(e["measure"], e["better"]) for e in entries} == {("profit", "higher")}
    # q1: krakow 1st, novgorod 2nd, the other 77 candidates have the same profit: one tie group ranked 3rd
    assert [(e["rank"], e["tied"]) for e in entries[:3]] == [(1, 1), (2, 1), (3, 77)]
    assert {(e["rank"], e["tied"]) for e in entries[2:]} == {(3, 77)}
    scores = [e["score"] for e in entries]
    assert scores == sorted(scores, reverse=True)


def test_rank_building_json_and_table(dqa_dir):
    db = dqa_dir / "building/queries/SQL_format/USA1836.sql"
    done = run("rank", "building", "--db", db, "--goods", "furniture", "--json", "--mode", "rules")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    assert all(isinstance(e["candidate"], int) for e in entries)
    assert {(e["measure"], e["better"]) for e in entries} == {("price", "lower")}
    assert [e["score"] for e in entries] == sorted(e["score"] for e in entries)
    table = run("rank", "building", "--db", db, "--goods", "furniture")
    assert table.returncode == 0 and "pick 1485" in table.stdout


def test_check_whole_benchmark(dqa_dir):
    done = run("check", "--dqa", dqa_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "locating: 200/200 agree" in done.stdout and "building: 101/101 agree" in done.stdout
    assert "wall time:" in done.stdout


def test_any_file_in_the_dump_format(tmp_path):
    tables = synthetic.trade_network(60, seed=3)
    db = synthetic.write_sql(tables, tmp_path / "synthetic.sql")
    country = tables["country"].rows[0][0]
    done = run("rank", "locating", "--db", db, "--country", country, "--json")
    assert done.returncode == 0, done.stderr
    expected = locating.rank(tables, country)
    assert json.loads(done.stdout) == [{"candidate": e.candidate, "score": e.score, "rank": rank, "tied": tied,
                                        "measure": "profit", "better": "higher"}
                                       for e, (rank, tied) in zip(expected.entries, expected.groups())]


@pytest.mark.parametrize("damage, message", [
    (lambda lines: lines[:30] + [lines[30][:20]], "truncated.sql, line 31: malformed INSERT"),
    (lambda lines: lines[:12] + ['INSERT INTO flow(source,dest,flow) VALUES ("a", 1.0);'] + lines[12:],
     "truncated.sql, line 13: 2 values for 3 columns of flow"),
])
def test_broken_file_is_reported_with_file_and_line(tmp_path, damage, message):
    lines = synthetic.dump_sql(synthetic.trade_network(20)).splitlines()
    db = tmp_path / "truncated.sql"
    db.write_text("\n".join(damage(lines)) + "\n", encoding="utf-8")
    done = run("rank", "locating", "--db", db, "--country", "C0000", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr


def test_input_errors(tmp_path, dqa_dir):
    missing = run("rank", "building", "--db", tmp_path / "nowhere.sql", "--goods", "grain")
    assert missing.returncode == 2 and "nowhere.sql" in missing.stderr
    unknown = run("rank", "locating", "--db", dqa_dir / "locating/queries/SQL_format/q1.sql", "--country", "XXX")
    assert unknown.returncode == 2 and "q1.sql: unknown country 'XXX'" in unknown.stderr
    no_data = run("check", "--dqa", tmp_path)
    assert no_data.returncode == 2 and "simulated_question.json" in no_data.stderr
    from_env = run("check", env={"DQA_DIR": str(tmp_path / "elsewhere")})  # without --dqa, DQA_DIR is read
    assert from_env.returncode == 2 and str(tmp_path / "elsewhere") in from_env.stderr


def test_output_piped_into_a_reader_that_stops_early(tmp_path):
    tables = synthetic.trade_network(3000, seed=1)  # its ranking (over 100 kB) does not fit in the pipe
    db = synthetic.write_sql(tables, tmp_path / "big.sql")
    process = subprocess.Popen([sys.executable, "-m", "sims", "rank", "locating", "--db", str(db), "--country",
                                tables["country"].rows[0][0]], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"locating (dqa mode): pick ")
    process.stdout.close()  # as `| head -1` does
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 141 and err == ""


def test_every_option_has_help():
    from sims.__main__ import _parser
    from tests.test_core_cli import _options

    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _options(_parser(), "python -m sims")
               if not a.help]
    assert missing == []


def test_rank_table_marks_ties(dqa_dir):
    done = run("rank", "locating", "--db", dqa_dir / "locating/queries/SQL_format/q1.sql", "--country", "SWE")
    assert done.returncode == 0 and "  =3  " in done.stdout and "tied with the others of rank N" in done.stdout


def test_rank_json_help_and_readme_name_every_field(dqa_dir):
    """The --json help and the README's example object list the keys the output has (rank and tied too)."""
    from sims.__main__ import _parser

    done = run("rank", "locating", "--db", dqa_dir / "locating/queries/SQL_format/q1.sql", "--country", "SWE",
               "--json")
    keys = list(json.loads(done.stdout)[0])
    sub = _parser()._subparsers._group_actions[0].choices["rank"]._subparsers._group_actions[0].choices["locating"]
    help_text = next(a.help for a in sub._actions if "--json" in a.option_strings)
    readme = (ROOT / "README.md").read_text()
    example = readme[readme.index('`{"candidate": "krakow"'):].split("`")[1]
    assert list(json.loads(example)) == keys
    assert all(f'"{k}"' in help_text for k in keys)


def test_check_without_a_dqa_directory_says_how_to_set_one(tmp_path, monkeypatch, capsys):
    """As python -m core: no DQA_DIR and no ../shared/dqa is 'set DQA_DIR', not a missing file under ../shared."""
    import sims.__main__ as cli

    monkeypatch.delenv("DQA_DIR", raising=False)
    monkeypatch.setattr(cli, "DEFAULT_DQA", tmp_path / "shared/dqa")
    assert cli.main(["check"]) == 2
    assert capsys.readouterr().err.startswith("error: no DQA directory: set DQA_DIR (or give --dqa DIR)")
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "nowhere"))
    assert cli.main(["check"]) == 2
    assert capsys.readouterr().err == f"error: the DQA directory {tmp_path / 'nowhere'} is not a folder\n"
