"""The ``python -m core`` command line (``dqa``, ``schema``, ``query``, the demo source, help, errors, pipes), run
as other tools run them."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_dqa_counts_and_repairs(dqa_dir):
    out = run("dqa", str(dqa_dir))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == ["locating: 200 questions (3 distinct databases)",
                         "building: 101 questions (37 distinct databases)",
                         "data repairs (by rule, never by dropping rows):"]
    assert ("  locating: node_country.has_has_merchant read as node_country.has_merchant (SQL): "
            "questions 13, 97, 105, 140, 143, 175") in lines
    assert ('  locating: NodeCountry.has_merchant stored as the strings "True"/"False": read as booleans (graph): '
            "questions 1-200") in lines
    assert any(line.startswith("  locating: property has_has_merchant read as has_merchant (graph): questions ")
               and "105" in line for line in lines)


DEMO = {"DQA_DIR": "/nonexistent"}  # the demo source needs no DQA data


def test_schema_is_what_the_agent_is_given(capsys):
    from core.scenarios import catalog
    import core.cli.main as cli
    from core.backends.registry import open_backend

    for scenario, db in (("locating", "sqlite"), ("building", "ladybug")):
        assert cli.main(["schema", "--source", "demo", "--scenario", scenario, "--question", "1", "--db", db]) == 0
        question = catalog.question("demo", scenario, 1)
        backend = open_backend(db, catalog.database(question))
        assert capsys.readouterr().out == backend.schema_text() + "\n"
        backend.close()
    out = run("schema", "--source", "demo", "--scenario", "locating", "--question", "1", "--db", "sqlite", env=DEMO)
    assert out.returncode == 0 and "CREATE TABLE trade_node (" in out.stdout


def test_schema_of_a_dqa_question(dqa_dir):
    out = run("schema", "--scenario", "building", "--question", "1", "--db", "ladybug", env={"DQA_DIR": str(dqa_dir)})
    assert out.returncode == 0, out.stderr
    assert "(:Goods {" in out.stdout and "-[:Demand {" in out.stdout


def test_demo_query_and_errors_without_dqa():
    out = run("query", "--source", "demo", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--json",
              "SELECT COUNT(*) AS n FROM flow", env=DEMO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == [[13]]
    out = run("query", "--source", "demo", "--scenario", "locating", "--question", "9", "--db", "sqlite", "SELECT 1",
              env=DEMO)
    assert out.returncode == 1 and out.stderr == "error: no demo locating question 9: there are questions 1-3\n"
    out = run("query", "--scenario", "locating", "--question", "1", "--db", "sqlite", "SELECT 1", env=DEMO)
    assert out.returncode == 1 and out.stderr.startswith("error: /nonexistent/") and "error (" not in out.stderr


def test_output_piped_into_a_reader_that_stops_early():
    # The rows (about 100 kB) do not fit in the pipe: the command is still writing when the reader goes away.
    process = subprocess.Popen([sys.executable, "-m", "core", "query", "--source", "demo", "--scenario", "locating",
                                "--question", "1", "--db", "sqlite", "--row-cap", "10000",
                                "SELECT a.source, b.dest, c.flow FROM flow a, flow b, flow c"],
                               cwd=ROOT, env={**os.environ, **DEMO}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().decode().strip() == "source | dest | flow"
    process.stdout.close()  # as `| head -1` does
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 141 and err == ""


def _options(parser: argparse.ArgumentParser, path: str = "python -m core"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_option_has_help():
    from core.cli.main import build_parser

    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _options(build_parser()) if not a.help]
    assert missing == []


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
    assert out.stderr.startswith("error: no dqa locating question 999")


def test_run_a_demo_question(tmp_path, monkeypatch, capsys):
    import core.cli.main as cli
    from core.config import settings as core_settings

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    replay = f"replay:{ROOT / 'assets/replays/demo_building_1_sql_iterrag.json'}"
    code = cli.main(["run", "--source", "demo", "--scenario", "building", "--question", "1", "--db", "sqlite",
                     "--technique", "iterrag", "--llm", replay, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and (report["decision"], report["correct"]) == (107, True)


def test_an_unknown_scenario_is_an_error_line_not_a_traceback(capsys, tmp_path, monkeypatch):
    import core.cli.main as cli
    from core.config import settings as core_settings

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    where = ["--scenario", "nope", "--question", "1", "--db", "sqlite"]
    for argv in (["schema", *where], ["query", *where, "SELECT 1"],
                 ["run", *where, "--technique", "iterrag", "--llm", "replay:none.json"]):
        assert cli.main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: unknown scenario 'nope'; known: locating, building"), (argv, err)


def test_readme_names_the_dqa_files_there_are(dqa_dir):
    """The README's table of DQA files names the question files as they are spelled (Building's is plural)."""
    readme = (ROOT / "README.md").read_text()
    for path in ("locating/questions/simulated_question.json", "building/questions/simulated_questions.json"):
        assert f"`{path}`" in readme and (dqa_dir / path).is_file(), path
    assert "`building/questions/simulated_question.json`" not in readme


def test_help_names_the_home_by_its_variable():
    """Help says PLANRAG_HOME (what a user sets), never the code's DATA_HOME, and shows no reST markup."""
    from core.cli.main import build_parser

    texts = [build_parser().format_help()]
    texts += [sub.format_help() for _, sub in _parsers(build_parser())]
    assert not [t for t in texts if "DATA_HOME" in t.replace("PLANRAG_HOME", "")]
    assert not [t for t in texts if "``" in t]
    assert "PLANRAG_HOME/bench/NAME" in "".join(texts)


def _parsers(parser, path="python -m core"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from _parsers(sub, f"{path} {name}")


def test_an_empty_question_set_says_so(tmp_path):
    """A set with no questions of a scenario (a generated Locating-only set) says there are none, not '1-0'."""
    from core.model.numbers import questions_text

    assert [questions_text(n) for n in (0, 1, 200)] == ["no questions", "only question 1", "questions 1-200"]
    (tmp_path / "building/questions").mkdir(parents=True)
    (tmp_path / "building/questions/simulated_questions.json").write_text("[]")
    (tmp_path / "locating/questions").mkdir(parents=True)
    (tmp_path / "locating/questions/simulated_question.json").write_text("[]")
    out = run("grade", "--scenario", "building", "--question", "1", "x", env={"DQA_DIR": str(tmp_path)})
    assert (out.returncode, out.stderr) == (1, "error: no dqa building question 1: there are no questions\n")


def test_a_stuck_run_exits_1_as_its_help_and_the_readme_say(dqa_dir, tmp_path):
    out = run("run", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique", "iterrag", "--json",
              "--llm", f"replay:{ROOT / 'tests/transcripts/guards/locating_sql_iterrag_loop.json'}",
              env={"DQA_DIR": str(dqa_dir), "PLANRAG_HOME": str(tmp_path)})
    assert out.returncode == 1 and json.loads(out.stdout)["status"] == "stuck", out.stderr
    from core.cli.main import build_parser

    assert "1 failed (also stuck or context_exceeded)" in " ".join(dict(_parsers(build_parser()))[
        "python -m core run"].format_help().split())
    assert "1 when it failed (also `stuck` or `context_exceeded`)" in " ".join((ROOT / "README.md").read_text().split())


def test_readme_names_every_bench_script_where_it_lists_them():
    """The test section's list of speed scripts and the layout table each name every bench/bench_*.py."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Run the tests"):readme.index("## Point it at DQA")]
    layout = next(line for line in readme.splitlines() if line.startswith("| `bench/` |"))
    for script in sorted(p.name for p in (ROOT / "bench").glob("bench_*.py")):
        assert f"`{script}`" in section or f"`bench/{script}`" in section, script
        assert f"`{script}`" in layout, script


def test_run_without_json_prints_the_run_id_first(tmp_path, monkeypatch, capsys):
    """Issue 29: `core run` without --json never printed the run id (needed to resume, branch or open it)."""
    import core.cli.main as cli
    from core.config import settings as core_settings
    from core.store.runs import RunStore

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    replay = f"replay:{ROOT / 'assets/replays/demo_building_1_sql_iterrag.json'}"
    code = cli.main(["run", "--source", "demo", "--scenario", "building", "--question", "1", "--db", "sqlite",
                     "--technique", "iterrag", "--llm", replay])
    first = capsys.readouterr().out.splitlines()[0]
    [record] = RunStore(tmp_path / "runs.sqlite").list()
    assert code == 0 and first == f"run {record.id}: iterrag on demo building question 1 (sqlite)"
