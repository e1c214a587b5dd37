"""``python -m sims generate``: fresh DQA-style sets whose labels are the dqa-mode simulators' picks on the written
files (read back through core.scenarios.dqa.source), deterministic for a seed, within the knobs, robust to summation order, in the
DQA layout the workbench and the benchmark's own line-by-line loader read."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.scenarios.dqa.source import DQA
from core.scenarios import graph_from_tables
from core.scenarios import candidates, ranking
from sims import building, locating
from sims.generator import MANIFEST, RANKINGS, TOLERANCE, GenerateError, Knobs, generate
from sims.tables import Table, Tables

ROOT = Path(__file__).resolve().parent.parent
QUESTION_DIRS = {"locating": "locating/questions", "building": "building/questions"}


def rankings(root: Path, scenario: str) -> list[dict]:
    return json.loads((root / QUESTION_DIRS[scenario] / RANKINGS).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    """A set with both scenarios (DQA-size databases), some Locating questions degenerate."""
    root = tmp_path_factory.mktemp("set") / "fresh"
    generate(Knobs("locating", 10, seed=5, degenerate=0.2, per_db=2), root)
    generate(Knobs("building", 6, seed=5, per_db=2), root)
    return root


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_label_is_the_simulators_best_on_the_files_read_back(both, scenario):
    dqa = DQA(both)
    questions, summaries = dqa.questions(scenario), rankings(both, scenario)
    assert len(questions) == len(summaries) == (10 if scenario == "locating" else 6)
    for q, summary in zip(questions, summaries):
        assert q.question_num == q.number == summary["number"]
        db = dqa.database(q)
        ranked = ranking(q, db)  # the dqa mode: the set's questions are of source "dqa"
        assert ranked.mode == "dqa" and q.answer is not None
        assert ranked.label() == q.answer == summary["label"] == summary["best"]["candidate"], q.id
        assert ranked.best.score == summary["best"]["score"]
        if not summary["degenerate"]:
            assert ranked.entries[1].candidate == summary["runner_up"]["candidate"]
            assert summary["margin"] == pytest.approx(ranked.relative_regret(ranked.entries[1].candidate) / 100)
            assert summary["margin"] > TOLERANCE
        assert summary["candidates"] == len(candidates(q, db))
        derived = graph_from_tables(scenario, db.tables)  # the .cql file holds the .sql file's rows
        for label, table in db.graph.nodes.items():
            assert table.rows == derived.nodes[label].rows
        for rtype, table in db.graph.rels.items():
            assert table.rows == derived.rels[rtype].rows


def test_building_answers_supply_the_goods(both):
    dqa = DQA(both)
    for q in dqa.questions("building"):
        tables = dqa.database(q).tables
        code = dict(zip(tables["goods"].column("goods_name"), tables["goods"].column("code")))[q.goods]
        assert (code, q.answer) in {(g, b) for g, b, *_ in tables["supply"].rows}


def test_degenerate_share_is_exact_and_every_candidate_ties(both):
    dqa = DQA(both)
    degenerate = [s for s in rankings(both, "locating") if s["degenerate"]]
    assert len(degenerate) == 2  # round(0.2 * 10)
    for s in degenerate:
        q = dqa.question("locating", s["number"])
        ranked = ranking(q, dqa.database(q))
        assert len({e.score for e in ranked.entries}) == 1
        assert q.answer == candidates(q, dqa.database(q))[0]  # the benchmark's rule: first in table order
        assert s["tie_groups"][0]["size"] == len(ranked.entries)
    assert not any(s["degenerate"] for s in rankings(both, "building"))


def test_per_db_questions_share_one_content(both):
    dqa = DQA(both)
    assert dqa.distinct_databases("locating") == 5 and dqa.distinct_databases("building") == 3
    assert len({q.country for q in dqa.questions("locating")[:2]}) == 2
    assert len({q.goods for q in dqa.questions("building")[:2]}) == 2


def test_question_files_have_the_released_fields_in_order(both):
    loc = json.loads((both / "locating/questions/simulated_question.json").read_text())
    assert list(loc[0]) == ["business_rules", "question", "goal", "answer", "home", "country", "year", "target_rdb",
                            "target_gdb", "question_num"]
    bld = json.loads((both / "building/questions/simulated_questions.json").read_text())
    assert list(bld[0]) == ["country", "question_num", "question", "business_rules", "goods", "target_gdb", "answer"]
    assert isinstance(bld[0]["answer"], int) and bld[0]["country"][-4:].isdigit()
    # The public repository's loader: questions[N-1]["question"] + ["goal"], database file q{N} / {country}.
    for n, q in enumerate(loc, 1):
        assert q["question_num"] == n and (both / f"locating/queries/LPG_format/q{n}.cql").is_file()
        assert q["home"] in q["question"] and q["country"] in q["question"] and q["home"] in q["goal"]
    manifest = json.loads((both / MANIFEST).read_text())
    assert manifest["name"] == "fresh" and set(manifest["scenarios"]) == {"locating", "building"}


def test_same_seed_same_bytes_whatever_the_jobs(tmp_path):
    knobs = Knobs("locating", 4, seed=11, size=40, degenerate=0.25)
    generate(knobs, tmp_path / "a", jobs=1, name="s")
    generate(knobs, tmp_path / "b", jobs=2, name="s")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 1 + 2 + 2 * 4 + 1  # manifest, question files and rankings, 4 databases x 2, empty building
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    generate(Knobs("locating", 4, seed=12, size=40), tmp_path / "c", name="s")
    assert (tmp_path / "c/locating/queries/SQL_format/q1.sql").read_bytes() != \
        (tmp_path / "a/locating/queries/SQL_format/q1.sql").read_bytes()


def test_margin_knobs(tmp_path):
    generate(Knobs("locating", 5, seed=3, size=40, min_margin=0.05), tmp_path / "wide")
    assert all(s["margin"] >= 0.05 for s in rankings(tmp_path / "wide", "locating"))
    generate(Knobs("building", 3, seed=3, max_margin=0.003, candidates=(30, 60)), tmp_path / "near")
    assert all(TOLERANCE < s["margin"] <= 0.003 for s in rankings(tmp_path / "near", "building"))


def _hops_upstream(tables: Tables, home: str) -> dict[str, int]:
    sources: dict[str, list[str]] = {}
    for s, d, _ in tables["flow"].rows:
        sources.setdefault(d, []).append(s)
    dist, frontier = {home: 0}, [home]
    while frontier:
        reached = []
        for node in frontier:
            for s in sources.get(node, []):
                if s not in dist:
                    dist[s] = dist[node] + 1
                    reached.append(s)
        frontier = reached
    return dist


def test_candidates_and_hops_knobs(tmp_path):
    generate(Knobs("locating", 4, seed=8, size=60, candidates=(3, 3), hops=(2, 3)), tmp_path)
    dqa = DQA(tmp_path)
    for q, s in zip(dqa.questions("locating"), rankings(tmp_path, "locating")):
        tables = dqa.database(q).tables
        dist = _hops_upstream(tables, q.home)
        rows = [n for n, c, *_ in tables["node_country"].rows if c == q.country and n in dist and n != q.home]
        assert len(rows) == 3 and all(2 <= dist[n] <= 3 for n in rows)
        assert 2 <= s["hops"] <= 3 and s["hops"] == dist[q.answer]
        assert len(tables["trade_node"].rows) == 60


def _reordered(tables: Tables) -> Tables:
    """The same database with every table's rows reversed (flows kept grouped by source): each sum runs in
    another order, Locating's nodes are processed in another topological order."""
    # Steering follows the first dest in flow-table order: that order is part of the data, not of rounding.
    return Tables({t.name: Table(t.name, t.columns, t.primary_key, t.rows if t.name == "flow" else t.rows[::-1])
                   for t in tables})


def test_labels_do_not_depend_on_summation_order(both):
    dqa = DQA(both)
    for scenario in ("locating", "building"):
        for q, s in zip(dqa.questions(scenario), rankings(both, scenario)):
            if s["degenerate"]:
                continue
            tables = _reordered(dqa.database(q).tables)
            ranked = (locating.rank(tables, q.country) if scenario == "locating" else building.rank(tables, q.goods))
            assert ranked.best.candidate == q.answer
            assert ranked.best.score == pytest.approx(s["best"]["score"], rel=1e-12)


def test_refuses_a_folder_that_is_no_generated_set(tmp_path):
    (tmp_path / "locating").mkdir()
    keep = tmp_path / "locating" / "simulated_question.json"
    keep.write_text("[]")
    with pytest.raises(GenerateError, match="no generated set"):
        generate(Knobs("locating", 1, seed=1), tmp_path)
    assert keep.read_text() == "[]"


def test_knobs_that_cannot_be_met_are_clear_errors(tmp_path):
    with pytest.raises(GenerateError, match="Locating only"):
        generate(Knobs("building", 1, seed=1, degenerate=0.5), tmp_path / "a")
    with pytest.raises(GenerateError, match="--max-margin"):
        generate(Knobs("locating", 1, seed=1, max_margin=1e-12), tmp_path / "b")
    with pytest.raises(GenerateError, match="lower --candidates"):
        generate(Knobs("locating", 1, seed=1, size=10, candidates=(8, 9), hops=(1, 1)), tmp_path / "c")
    assert not (tmp_path / "c" / "locating").exists()  # nothing half-written


def test_regenerating_replaces_only_that_scenario(tmp_path):
    generate(Knobs("locating", 3, seed=1, size=30), tmp_path, name="mine")
    generate(Knobs("building", 2, seed=1), tmp_path)
    generate(Knobs("locating", 2, seed=2, size=30), tmp_path)
    dqa = DQA(tmp_path)
    assert len(dqa.questions("locating")) == 2 and len(dqa.questions("building")) == 2
    assert not (tmp_path / "locating/queries/SQL_format/q3.sql").exists()
    assert json.loads((tmp_path / MANIFEST).read_text())["name"] == "mine"


def run(*args, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PLANRAG_HOME": str(home)} if home else None
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def test_command_line_and_workbench_import(tmp_path):
    out = tmp_path / "cli"
    done = run("sims", "generate", "--scenario", "locating", "--questions", "3", "--seed", "4", "--out", out,
               "--size", "30", "--candidates", "2-4", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert "locating: 3 questions on 3 databases" in done.stdout
    check = run("sims", "check", "--dqa", out)
    assert check.returncode == 0 and "locating: 3/3 agree" in check.stdout
    imported = run("core", "dqa", out)
    assert imported.returncode == 0, imported.stderr
    assert "locating: 3 questions (3 distinct databases)" in imported.stdout
    assert "building: 0 questions" in imported.stdout and "set cli," in imported.stderr
    bad = run("sims", "generate", "--scenario", "building", "--questions", "3", "--seed", "4", "--out", out,
              "--degenerate", "0.3")
    assert bad.returncode == 2 and "Locating only" in bad.stderr


def test_sql_dumps_load_line_by_line_into_mysql(both):
    """The benchmark's own loader runs each line of a dump as one statement on MySQL."""
    from core.backends import mysql
    from tests.test_backends_sql import mysql_settings

    settings = mysql_settings()
    con = mysql._connect(settings)
    name = "planrag_generated_test"
    try:
        with con.cursor() as cur:
            for scenario, ref in (("locating", "q1"), ("building", DQA(both).question("building", 1).database_ref)):
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
                cur.execute(f"CREATE DATABASE {name}")
                cur.execute(f"USE {name}")
                for line in (both / f"{scenario}/queries/SQL_format/{ref}.sql").read_text().splitlines():
                    if line.strip():
                        cur.execute(line)
                tables = DQA(both).database(DQA(both).question(scenario, 1)).tables
                for t in tables:
                    cur.execute(f"SELECT COUNT(*) FROM {t.name}")
                    assert cur.fetchone()[0] == len(t.rows)
            cur.execute(f"DROP DATABASE {name}")
    finally:
        con.close()


def test_benchmark_runs_on_a_generated_set_and_names_it(tmp_path):
    """core bench --dqa-dir on a generated set (scripted replay transcripts): every result and the accuracy report
    name the set, without the paper's DQA figures; the results directory never mixes two sets."""
    from core.benchmark import reports
    from core.benchmark.items import BenchError
    from core.benchmark.runner import Bench, BenchConfig
    from tests.bench_scripts import write_transcripts

    sets = tmp_path / "sets"
    generate(Knobs("locating", 3, seed=21, size=40), sets / "fresh-a")
    generate(Knobs("building", 2, seed=21, candidates=(30, 60)), sets / "fresh-a")
    generate(Knobs("locating", 3, seed=22, size=40), sets / "fresh-b")
    folder = tmp_path / "scripts"
    variants = {1: "right", 2: "wrong", 3: "right"}
    made = write_transcripts(DQA(sets / "fresh-a"), folder, {"locating": [1, 2, 3], "building": [1, 2]}, ["sqlite"],
                             ["planrag"], lambda q: variants[q.number])
    bench = Bench(BenchConfig(["planrag"], f"replay:{folder}", scenario="all", db="sqlite", home=tmp_path / "home",
                              dqa_root=sets / "fresh-a"))
    assert bench.set_name == "fresh-a" and bench.directory.name == f"replay-{folder.name}-fresh-a"
    progress = bench.run()
    assert (progress.done, progress.errors) == (5, [])
    results = bench.results()
    assert {r["set"] for r in results} == {"fresh-a"}
    assert [r["correct"] for r in results] == [made[f"{r['scenario']}-{r['question']}-sqlite-planrag"].correct
                                              for r in results]
    acc = reports.accuracy(results)
    assert set(acc["set"]) == {"fresh-a"} and acc["paper"].isna().all()
    assert reports.items(results)["set"].tolist() == ["fresh-a"] * 5
    with pytest.raises(BenchError, match="other parameters"):
        Bench(BenchConfig(["planrag"], f"replay:{folder}", scenario="locating", db="sqlite", home=tmp_path / "home",
                          dqa_root=sets / "fresh-b", out=bench.directory))
    done = run("core", "bench", "--scenario", "locating", "--technique", "planrag", "--llm", f"replay:{folder}",
               "--dqa-dir", sets / "fresh-a", "--out", tmp_path / "cli", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "3 items of set fresh-a" in done.stdout and "accuracy on set fresh-a" in done.stdout


def test_workbench_pages_on_a_generated_set(monkeypatch, tmp_path):
    """DQA_DIR set to a generated set: Scenarios lists its questions with their labels (and says when a scenario
    has none), the Decision check ranks one with the label on top, the Benchmark page runs it and names it."""
    import time as clock

    import core.jobs.benchmarks as jobs
    from tests.bench_scripts import write_transcripts
    from tests.page_app import isolate, on_tab, open_file, open_page

    isolate(monkeypatch, tmp_path)
    root = tmp_path / "my-set"
    generate(Knobs("locating", 3, seed=31, size=40), root)
    monkeypatch.setenv("DQA_DIR", str(root))
    dqa = DQA(root)

    at = open_file("pages/scenarios.py", question_ref=("dqa", "locating", 2))
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Labelled best decision"] == dqa.question("locating", 2).answer
    at.segmented_control(key="scenarios_scenario").set_value("building").run()
    assert not at.exception and "no building questions" in at.info[0].value

    at = open_file("pages/decision.py", question_ref=("dqa", "locating", 2))
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["Best decision"] == shown["Benchmark label"] == dqa.question("locating", 2).answer

    folder = tmp_path / "scripts"
    write_transcripts(dqa, folder, {"locating": [1, 2, 3]}, ["sqlite"], ["planrag"], lambda q: "right")
    at = open_page("pages/benchmark.py", question_ref=None)
    assert at.text_input(key="bench_set").value == str(root)
    at.selectbox(key="bench_scenario").set_value("locating")
    at.text_input(key="bench_model").input(f"replay:{folder}")
    at.text_input(key="bench_questions").input("1-3")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = jobs.jobs()[-1]
    deadline = clock.time() + 60
    while not job.done and clock.time() < deadline:
        clock.sleep(0.1)
    at.run()
    assert job.bench.progress.correct == 3 and job.bench.set_name == "my-set"
    assert any("items of set **my\\-set**" in m.value for m in at.markdown)  # the name as text (ui.untrusted.md)
    on_tab(at, "Results")
    assert any("Question set: **my-set**" in c.value for c in at.caption)


@pytest.mark.parametrize("backend", ["sqlite", "mysql", "ladybug", "neo4j"])
def test_every_backend_loads_a_generated_database(both, backend):
    """The workbench's backends open generated databases as they open DQA's: same row counts in SQL and Cypher."""
    from core.backends.registry import open_backend, unavailable
    from tests.conftest import require

    reason = unavailable(backend)
    if reason:
        require(backend, reason)
    dqa = DQA(both)
    queries = {"locating": ("SELECT COUNT(*) AS n FROM node_country",
                            "MATCH (:Country)-[r:NodeCountry]->(:Trade_node) RETURN count(r) AS n"),
               "building": ("SELECT COUNT(*) AS n FROM supply",
                            "MATCH (:Building)-[s:Supply]->(:Goods) RETURN count(s) AS n")}
    for scenario, (sql, cypher) in queries.items():
        db = dqa.database(dqa.question(scenario, 1))
        opened = open_backend(backend, db)
        try:
            result = opened.query(sql if backend in ("sqlite", "mysql") else cypher, timeout_s=60, row_cap=10)
        finally:
            opened.close()
        table = "node_country" if scenario == "locating" else "supply"
        assert result.as_json()["rows"] == [[len(db.tables[table].rows)]]


def test_same_bytes_under_other_hash_seeds(tmp_path):
    """No output depends on set or dict-of-str iteration order: processes with other PYTHONHASHSEEDs (and the
    parallel path) write the same bytes."""
    outputs = []
    for hash_seed in ("0", "4242"):
        out = tmp_path / hash_seed
        for scenario in ("locating", "building"):
            done = subprocess.run([sys.executable, "-m", "sims", "generate", "--scenario", scenario, "--questions",
                                   "3", "--seed", "9", "--out", str(out), "--size", "30" if scenario == "locating"
                                   else "20", "--candidates", "1-5" if scenario == "locating" else "20-40",
                                   "--jobs", "2", "--name", "hashed", "--degenerate",
                                   "0.34" if scenario == "locating" else "0"],
                                  cwd=ROOT, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "PYTHONHASHSEED": hash_seed})
            assert done.returncode == 0, done.stderr
        outputs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outputs[0] == outputs[1] and len(outputs[0]) == 1 + 2 * (2 + 3 * 2)


def test_knobs_that_give_no_question_are_named_as_typed(tmp_path):
    """The error names the knobs as the user typed them: no 'None' for an open margin, ranges as LO-HI."""
    assert Knobs("locating", 1, 1, min_margin=0.9).margin_text() == "margin at least 0.9"
    assert Knobs("locating", 1, 1, max_margin=0.002).margin_text() == "margin 0.0-0.002"
    with pytest.raises(GenerateError) as e:
        generate(Knobs("locating", 1, 1, min_margin=0.9), tmp_path / "set")
    assert "(margin at least 0.9, candidates 1-8, hops 1-3): loosen them" in str(e.value)
    assert "None" not in str(e.value)
