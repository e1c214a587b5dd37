"""Scenario plugins (core.scenarios): the registry, the shipped depot scenario end to end (questions, simulator,
what-if, grading, every embedded backend, a replayed run, the benchmark), ``scenario new`` and ``scenario check``
with errors naming the file and line, and a scenario without a simulator."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from core.scenarios import catalog
from core.analysis import decision, evidence
from core import scenarios
from core.analysis.grading import grade
from core.scenarios import candidates, ranking
from core.scenarios.plugins import checks
from core.scenarios.plugins.folder import FolderScenario, ScenarioError
from sims.ranking import InputError

DEPOT = Path(__file__).resolve().parent.parent / "assets" / "scenarios" / "depot"


@pytest.fixture
def user_scenarios(tmp_path, monkeypatch):
    """An empty scenarios folder of the user's (PLANRAG_SCENARIOS), the registry rescanned before and after."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    monkeypatch.setenv("PLANRAG_SCENARIOS", str(folder))
    scenarios.reload()
    yield folder
    scenarios.reload()


def test_registry_lists_dqa_scenarios_and_the_shipped_plugin():
    assert scenarios.names()[:2] == ["locating", "building"] and "depot" in scenarios.names()
    depot = scenarios.get("depot")
    assert depot.can_check and depot.source_keys() == ["scenario"] and depot.origin == str(DEPOT)
    assert depot.questions()[0].database_ref == "data/ (CSV files)"  # as the Scenarios page names its data
    with pytest.raises(KeyError, match="unknown scenario 'nope'"):
        scenarios.get("nope")


def test_depot_questions_are_labelled_by_its_simulator():
    questions = catalog.questions("scenario", "depot")
    assert [q.id for q in questions] == ["scenario/depot/1", "scenario/depot/2", "scenario/depot/3"]
    q = questions[0]
    assert q.parameters == {"season": "winter"} and "winter" in q.text and "nearest open distribution" in q.text
    db = catalog.database(q)
    assert candidates(q, db) == ["DC-FAI", "DC-KEL", "DC-ASH", "DC-PEN", "DC-BRO", "DC-NOR"]
    r = ranking(q, db)
    assert not r.higher_is_better and r.best.candidate == q.answer == "DC-ASH"
    assert r.baseline > r.best.score  # opening the best site beats opening none
    assert questions[1].answer == "DC-BRO"  # summer moves demand east: another best site


def test_depot_score_follows_its_rules():
    """The weekly cost of one site recomputed by hand: shortest road paths from the nearest open centre."""
    import networkx as nx

    q = catalog.question("scenario", "depot", 2)
    t = catalog.database(q).tables
    graph = nx.Graph()
    graph.add_weighted_edges_from((r["town_a"], r["town_b"], r["km"]) for r in t["road"].records())
    site = {r["site"]: r for r in t["site"].records()}
    centres = [site["DC-EAS"]["town"], site["DC-NOR"]["town"]]
    km = nx.multi_source_dijkstra_path_length(graph, centres)
    rate = t["tariff"].records()[0]["cost_per_parcel_km"]
    cost = sum(r["parcels"] * rate * km[r["town"]] for r in t["demand"].records() if r["season"] == "summer")
    expected = cost + site["DC-NOR"]["weekly_fixed_cost"]
    assert ranking(q, catalog.database(q)).score_of("DC-NOR") == pytest.approx(expected)


def test_depot_what_if_and_names():
    q = catalog.question("scenario", "depot", 1)
    db = catalog.database(q)
    effect = decision.what_if(q, db, "DC-ASH", "default")
    r = ranking(q, db)
    assert effect.before == r.baseline and effect.after == r.score_of("DC-ASH")
    assert effect.measure == "cost" and list(effect.biggest(3).columns)[0] == "town"
    assert sum(a - b for b, a in effect.changes.values()) + 2200 == pytest.approx(effect.after - effect.before)
    assert decision.candidate_names(q, db)["DC-ASH"] == "DC-ASH (Ashford)"
    assert decision.score_name(q) == "weekly cost in winter"


def test_depot_grading_reads_site_names():
    q = catalog.question("scenario", "depot", 1)
    cands = candidates(q, catalog.database(q))
    g = grade("DC-BRO is cheaper to run, but the answer is dc-ash.", "depot", cands, q.answer)
    assert g.decision == "DC-ASH" and g.correct


def test_depot_evidence_names_deciding_values():
    q = catalog.question("scenario", "depot", 1)
    values = evidence.deciding_values(q, catalog.database(q))
    tables = {v.table for v in values}
    assert {"road", "demand", "site"} <= tables
    labels = [v.label for v in values]
    assert len(set(labels)) == len(labels), "each value named once: a road by both its towns"
    assert any(v.table == "road" and v.label.count(",") == 1 for v in values)
    assert all("winter" in v.label for v in values if v.table == "demand")


def test_depot_network_marks_best_pick_and_changes():
    q = catalog.question("scenario", "depot", 1)
    db = catalog.database(q)
    kind = scenarios.get("depot")
    effect = decision.what_if(q, db, "DC-BRO", "default")
    fig = kind.network(q, db, best="DC-ASH", pick="DC-BRO", change=effect.deltas)
    names = {t.name for t in fig.data if t.name}
    assert {"best decision", "agent's pick", "falls"} <= names
    best = next(t for t in fig.data if t.name == "best decision")
    assert list(best.customdata) == ["Ashford"]  # the candidate drawn at its town
    assert set(kind.node_rows(db, "Ashford")) >= {"town", "road", "site", "demand"}
    [towns] = [t for t in fig.data if t.mode == "markers+text"]
    assert "Ashford" in towns.text and towns.textfont.size >= 12  # labels as readable as the DQA networks'


def test_plugin_network_can_be_searched_and_centred_on_a_node(monkeypatch):
    """Issue 15 for plugins: find a node by name, open on its neighbourhood; a big network opens on its
    candidates'."""
    from core.scenarios.plugins import network

    q = catalog.question("scenario", "depot", 1)
    db = catalog.database(q)
    kind = scenarios.get("depot")
    names = kind.node_names(q, db)
    assert "Ashford" in names and len(names) == len(db.tables["town"].rows)

    def drawn(fig):
        [towns] = [t for t in fig.data if t.mode == "markers+text"]
        return set(towns.customdata), (fig.layout.meta or {}).get("caption")

    whole, caption = drawn(kind.network(q, db))
    assert whole == set(names) and caption is None
    around, caption = drawn(kind.network(q, db, around="Ashford"))
    links = [(r["town_a"], r["town_b"]) for r in db.tables["road"].records()]
    within = network.neighbourhood(links, ["Ashford"])
    assert around == set(within) and "Ashford" in around and len(around) < len(whole)
    assert caption.startswith("Showing the neighbourhood of Ashford") and f"of {len(whole)} nodes" in caption
    monkeypatch.setattr(network, "WHOLE_LIMIT", 5)  # as if the network were big
    opened, caption = drawn(kind.network(q, db, best="DC-ASH"))
    assert "Ashford" in opened and caption.startswith("Showing the candidates' neighbourhood")  # 6 of 16 reach all


@pytest.mark.parametrize("backend, text", [("sqlite", "SELECT site FROM site WHERE status = 'candidate'"),
                                           ("ladybug", "MATCH (s:Site) WHERE s.status = 'candidate' RETURN s.site"),
                                           ("ladybug", "MATCH (a:Town)-[r:ROAD]-(b:Town) WHERE a.town = 'Ashford' "
                                                       "RETURN b.town, r.km")])
def test_depot_in_the_embedded_backends(backend, text):
    from core.backends.registry import open_backend

    q = catalog.question("scenario", "depot", 1)
    be = open_backend(backend, catalog.database(q))
    try:
        rows = be.query(text).rows
    finally:
        be.close()
    assert len(rows) in (5, 6)


def test_replayed_run_on_depot_is_graded(tmp_path, monkeypatch):
    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings
    from core.llm.replays import replays

    found = replays("scenario", "depot", 1, "sql", "planrag")
    assert found, "the shipped scripted transcript"
    runtime = AgentRuntime(tmp_path)
    try:
        result = runtime.start(RunSettings("depot", 1, "sqlite", "planrag", found[0].spec, source="scenario"))
    finally:
        runtime.close()
    assert result.status == "finished"
    assert result.outcome.decision == "DC-ASH" and result.outcome.correct is True
    assert result.outcome.placement["rank"] == 1


def test_benchmark_over_depot_questions(tmp_path):
    from core.benchmark.results import read_all
    from core.benchmark.runner import Bench, BenchConfig
    from core.llm.replays import REPLAY_DIR

    bench = Bench(BenchConfig(["planrag"], f"replay:{REPLAY_DIR}", scenario="depot", source="scenario",
                              questions="1-2", out=tmp_path / "bench", cache=False, home=tmp_path))
    bench.run()
    results = read_all(tmp_path / "bench")
    assert sorted((r["question"], r["decision"], r["correct"]) for r in results) == [(1, "DC-ASH", True),
                                                                                     (2, "DC-BRO", True)]
    from core.benchmark.reports import paper_layout

    layout = paper_layout(results)
    assert layout.iloc[0]["depot RDB sqlite"] == 100.0 and layout.iloc[0]["depot average"] == 100.0
    assert not [c for c in layout.columns if "paper" in c]  # the paper never ran the depot scenario


def test_run_settings_name_the_sources_a_scenario_has():
    from core.model.run_settings import RunSettings

    with pytest.raises(ValueError, match="choose scenario"):
        RunSettings("depot", 1, "sqlite", "planrag", "x", source="dqa").validate()
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        RunSettings("nope", 1, "sqlite", "planrag", "x").validate()


def test_shipped_scenario_passes_check():
    problems, facts = checks.check(DEPOT)
    assert problems == [] and any("best DC-ASH" in f for f in facts)


def test_new_writes_a_skeleton_that_checks_and_is_listed(user_scenarios, capsys):
    from core.cli.main import main

    assert main(["scenario", "new", "supplier-pick"]) == 0
    folder = user_scenarios / "supplier-pick"
    assert {p.name for p in folder.iterdir()} == {"scenario.toml", "rules.md", "simulator.py", "data"}
    assert main(["scenario", "check", str(folder)]) == 0
    assert "ok" in capsys.readouterr().out
    scenarios.reload()
    assert "supplier-pick" in scenarios.names()
    q = catalog.question("scenario", "supplier-pick", 2)
    assert q.answer == "Cobalt" and scenarios.target(q) == "1000 units"
    assert main(["scenario", "new", "supplier-pick"]) == 1  # never overwrites
    assert main(["scenario", "new", "Bad_Name"]) == 2


def copy_depot(tmp_path: Path) -> Path:
    folder = tmp_path / "depot2"
    shutil.copytree(DEPOT, folder)
    toml = folder / "scenario.toml"
    toml.write_text(toml.read_text().replace('name = "depot"', 'name = "depot2"'))
    return folder


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def only_problem(folder: Path) -> str:
    problems, _ = checks.check(folder)
    assert len(problems) == 1, problems
    return problems[0]


def test_check_names_file_and_line_of_a_bad_declaration(tmp_path):
    folder = copy_depot(tmp_path)
    toml = folder / "scenario.toml"
    edit(toml, 'direction = "min"', 'direction = "lowest"')
    line = next(i for i, t in enumerate(toml.read_text().splitlines(), 1) if t.startswith("direction"))
    assert only_problem(folder).startswith(f"{toml}, line {line}: simulator.direction must be")
    edit(toml, 'direction = "lowest"', 'direction = "min"\n[broken')
    assert "not valid TOML" in only_problem(folder) and f"{toml}, line" in only_problem(folder)


def test_check_reports_an_undeclared_parameter_and_a_bad_query(tmp_path):
    folder = copy_depot(tmp_path)
    toml = folder / "scenario.toml"
    edit(toml, 'season = "summer"', 'season = "summer"\nweek = 3')
    assert "question 2: parameter week is not declared" in only_problem(folder)
    edit(toml, 'season = "summer"\nweek = 3', 'season = "summer"')
    edit(toml, "FROM site WHERE status", "FROM sites WHERE status")
    assert "candidates.query query failed: SQLite: no such table: sites" in only_problem(folder)


def test_check_reports_simulator_errors_with_their_line(tmp_path):
    folder = copy_depot(tmp_path)
    sim = folder / "simulator.py"
    edit(sim, 'rate = float(tables["tariff"].records()[0]["cost_per_parcel_km"])',
         'rate = float(tables["tariff"].records()[0]["cost_per_km"])')
    line = next(i for i, t in enumerate(sim.read_text().splitlines(), 1) if "cost_per_km" in t)
    assert only_problem(folder) == f"{sim}, line {line}: KeyError: 'cost_per_km'"
    edit(sim, "def score(", "def score(:")
    with pytest.raises(ScenarioError, match=r"simulator.py, line \d+: SyntaxError"):
        FolderScenario(folder).questions()


def test_check_reports_bad_data_file_and_line(tmp_path):
    folder = copy_depot(tmp_path)
    (folder / "data" / "road.csv").write_text("town_a,town_b,km\nAshford,Brookmere\n")
    problem = only_problem(folder)
    assert "road.csv, line 2: 2 values for 3 columns" in problem


def test_broken_user_scenario_is_reported_not_fatal(user_scenarios):
    (user_scenarios / "broken").mkdir()
    (user_scenarios / "broken" / "scenario.toml").write_text('name = "broken"\n')
    assert "depot" in scenarios.names() and "broken" not in scenarios.names()
    assert any("broken" in p and "[data]" in p for p in scenarios.problems())


NO_SIMULATOR = '''name = "hunch"
[data]
csv = "data"
[questions]
template = "Which product should we discount?"
[[questions.ask]]
[candidates]
query = "SELECT product FROM product"
'''


def test_scenario_without_simulator_runs_and_records_answers(user_scenarios, tmp_path):
    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings

    folder = user_scenarios / "hunch"
    (folder / "data").mkdir(parents=True)
    (folder / "scenario.toml").write_text(NO_SIMULATOR)
    (folder / "data" / "product.csv").write_text("product,price\ntea,3.5\ncoffee,4.0\n")
    problems, facts = checks.check(folder)
    assert problems == [] and any("cannot be checked" in f for f in facts)
    scenarios.reload()
    q = catalog.question("scenario", "hunch", 1)
    db = catalog.database(q)
    assert candidates(q, db) == ["tea", "coffee"] and q.answer is None
    with pytest.raises(InputError, match="no simulator"):
        ranking(q, db)
    assert evidence.deciding_values(q, db) == ()
    transcript = tmp_path / "reply.json"
    # the improved setting tells an agent answering before any query that it has not queried yet (issue 29): sure,
    # it answers again
    transcript.write_text(json.dumps(["Thought: I know the answer.\nFinal answer: coffee",
                                      "Thought: I am sure.\nFinal answer: coffee"]))
    runtime = AgentRuntime(tmp_path)
    try:
        result = runtime.start(RunSettings("hunch", 1, "sqlite", "iterrag", f"replay:{transcript}",
                                           source="scenario"))
    finally:
        runtime.close()
    assert result.status == "finished" and result.outcome.decision == "coffee"
    assert result.outcome.correct is None and result.outcome.placement is None


def test_user_mysql_database_is_read_as_a_read_only_snapshot(tmp_path):
    """A scenario on the user's own MariaDB: the tables are read (keys and types kept) and the scenario checks;
    the URL's password never shows in a message."""
    import pymysql

    from core.backends import mysql
    from core.config.settings import DatabaseSettings
    from tests.conftest import require

    reason = mysql.unavailable(DatabaseSettings())
    if reason:
        require("mysql", f"needs a MySQL/MariaDB server: {reason}")
    con = pymysql.connect(host="127.0.0.1", user="root", autocommit=True)
    with con.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS planrag_plugin_test")
        cur.execute("CREATE DATABASE planrag_plugin_test")
        cur.execute("CREATE TABLE planrag_plugin_test.supplier (supplier VARCHAR(20) PRIMARY KEY, "
                    "unit_price DECIMAL(6,2), delivery_charge INT)")
        cur.execute("INSERT INTO planrag_plugin_test.supplier VALUES ('Acme', 4.20, 150), ('Borealis', 3.90, 420)")
        cur.execute("CREATE TABLE planrag_plugin_test.`odd``name` (a INT)")  # a backtick in a name is quoted
        cur.execute("INSERT INTO planrag_plugin_test.`odd``name` VALUES (7)")
    try:
        folder = copy_depot(tmp_path)
        shutil.rmtree(folder / "data")
        (folder / "scenario.toml").write_text(NO_SIMULATOR.replace('name = "hunch"', 'name = "own-db"').replace(
            'csv = "data"', 'mysql = "mysql://root@127.0.0.1:3306/planrag_plugin_test"').replace(
            "SELECT product FROM product", "SELECT supplier FROM supplier"))
        kind = FolderScenario(folder)
        table = kind.database().tables["supplier"]
        assert table.primary_key == ("supplier",) and table.rows == [("Acme", 4.2, 150), ("Borealis", 3.9, 420)]
        assert kind.database().tables["odd`name"].rows == [(7,)]
        assert checks.check(folder)[0] == []
        assert kind.questions()[0].database_ref == "a MySQL database (read-only snapshot)"  # never its address
        (folder / "scenario.toml").write_text((folder / "scenario.toml").read_text().replace(
            "root@127.0.0.1:3306", "root:hunter2secret@127.0.0.1:1"))
        problem = only_problem(folder)
        assert "cannot connect" in problem and ", line 3: data:" in problem and "hunter2secret" not in problem
    finally:
        with con.cursor() as cur:
            cur.execute("DROP DATABASE planrag_plugin_test")
        con.close()


def test_smoke_benchmark_on_plugin_scenarios(tmp_path):
    from core.benchmark.smoke import smoke_config
    from core.benchmark.results import read_all
    from core.benchmark.runner import Bench

    config = smoke_config(source="scenario", db="sqlite", home=tmp_path)
    assert config.name == "smoke-scenario"
    bench = Bench(config)
    bench.run()
    out = bench.directory
    got = sorted((r["scenario"], r["technique"], r["decision"], r["correct"]) for r in read_all(out))
    assert got == [("depot", "iterrag", "DC-BRO", False), ("depot", "planrag", "DC-ASH", True)]


def test_candidates_from_a_python_function(tmp_path):
    folder = copy_depot(tmp_path)
    edit(folder / "scenario.toml", '''query = "SELECT site FROM site WHERE status = 'candidate' ORDER BY rowid"''',
         'function = "cheap_sites"')
    (folder / "simulator.py").write_text((folder / "simulator.py").read_text() + '''

def cheap_sites(tables, question):
    return [r["site"] for r in tables["site"].records() if r["status"] == "candidate" and r["weekly_fixed_cost"] < 2500]
''')
    kind = FolderScenario(folder)
    q = kind.questions()[0]
    assert kind.candidates(q, kind.database()) == ["DC-ASH", "DC-BRO", "DC-NOR"] and q.answer == "DC-ASH"
    assert checks.check(folder)[0] == []


def test_planner_examples_come_from_the_declaration(user_scenarios):
    """REAPER's planner examples are the scenario's own ([planner]), never looked up by scenario name."""
    from core.model.run_settings import RunSettings
    from core.techniques.reaper.examples import examples
    from core.benchmark import fidelity

    folder = copy_depot(user_scenarios)
    toml = folder / "scenario.toml"
    toml.write_text(toml.read_text() + '\n[planner]\nquestion = "Which site for the spring season?"\n'
                    'sql = "Step 1: the sites - #E1 = Relational DB[SELECT site, town FROM site]"\n')
    scenarios.reload()
    assert examples("depot2", "sql").endswith("#E1 = Relational DB[SELECT site, town FROM site]")
    assert examples("depot2", "cypher") == "" and examples("depot", "sql") == ""
    assert "Valdoria" in examples("locating", "sql")
    recorded = {(name, db): fidelity.result_fields(RunSettings(name, 1, db, "reaper", "x"), [])["reaper_planner"]
                for name in ("depot", "depot2") for db in ("sqlite", "ladybug")}
    assert recorded == {("depot", "sqlite"): "zero-shot", ("depot", "ladybug"): "zero-shot",
                        ("depot2", "sqlite"): "examples", ("depot2", "ladybug"): "zero-shot"}
    toml.write_text(toml.read_text().replace('question = "Which site for the spring season?"\n', ""))
    with pytest.raises(ScenarioError, match=r"line \d+: \[planner\] needs a question"):
        FolderScenario(folder)


@pytest.mark.parametrize("technique, decision", [("singlerag", "DC-BRO"), ("iterrag", "DC-BRO"),
                                                 ("planrag", "DC-ASH"), ("planrag-norp", "DC-ASH"),
                                                 ("reaper", "DC-ASH")])
def test_every_technique_runs_on_depot_from_its_shipped_transcript(tmp_path, technique, decision):
    """Every technique with a shipped scripted transcript of depot question 1 (SQL) runs to its decision, graded
    by the depot's simulator, with no failed query."""
    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings
    from core.llm.replays import replays

    [found] = replays("scenario", "depot", 1, "sql", technique)
    runtime = AgentRuntime(tmp_path)
    try:
        result = runtime.start(RunSettings("depot", 1, "sqlite", technique, found.spec, source="scenario"))
        events = runtime.store.get(result.run_id).events
    finally:
        runtime.close()
    assert result.status == "finished" and result.outcome.decision == decision
    assert result.outcome.correct is (decision == "DC-ASH")
    assert not [e for e in events if e.kind == "observation" and e.error]


def test_autoplan_learns_a_depot_plan_and_runs_from_it(tmp_path, monkeypatch, capsys):
    """AutoPlan on a plugin scenario: a plan trained on question 2 (scripted transcript), then question 1 run
    from it (the shipped PlanRAG transcript)."""
    from core.cli.main import main
    from core.llm.replays import REPLAY_DIR
    from tests.page_app import isolate

    isolate(monkeypatch, tmp_path)
    train = Path(__file__).parent / "transcripts" / "autoplan" / "depot_sql_train.json"
    assert main(["autoplan", "train", "--scenario", "depot", "--source", "scenario", "--db", "sqlite", "--llm",
                 f"replay:{train}", "--train", "2", "--batch", "1", "--iterations", "1",
                 "--reflection", "one-call"]) == 0
    assert "saved depot plan v1" in capsys.readouterr().out
    assert main(["run", "--scenario", "depot", "--source", "scenario", "--question", "1", "--db", "sqlite",
                 "--technique", "autoplan", "--llm",
                 f"replay:{REPLAY_DIR / 'scenario_depot_1_sql_planrag.json'}"]) == 0
    assert "finished: decision DC-ASH (correct, rank 1 of 6)" in capsys.readouterr().out


# --- issue 44 section C: a plugin's files are bounded as an agent's queries and a person's inputs are ---------


def test_a_template_field_wider_than_its_bound_is_refused_before_it_is_formatted(tmp_path):
    """``{season:>1500000000}`` made ``scenario check`` reach 3 GB: a field's width is bounded."""
    folder = copy_depot(tmp_path)
    edit(folder / "scenario.toml", "in the {season} season", "in the {season:>1500000000} season")
    assert re.search(r"scenario\.toml, line \d+: questions\.template: the format \{:>1500000000\} is wider than "
                     r"100 characters$", only_problem(folder))
    edit(folder / "scenario.toml", "{season:>1500000000}", "{season.__class__}")
    assert "is not a parameter's name (no attribute, no index)" in only_problem(folder)
    edit(folder / "scenario.toml", "{season.__class__}", "{season:>12}")
    assert checks.check(folder)[0] == []  # a modest width is fine


@pytest.mark.parametrize("query, says", [
    ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT 'DC-KEL' FROM n",
     "ran longer than 0.5 s and was stopped"),
    ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) SELECT 'DC-KEL' FROM n",
     "gives more than 10,000 rows"),
])
def test_an_endless_or_huge_candidates_query_stops_at_an_agent_querys_caps(tmp_path, monkeypatch, query, says):
    """An endless recursive CTE reached 3.7 GB with no time limit: a plugin's query runs as an agent's does."""
    from core.scenarios.plugins import folder as plugin_folder

    monkeypatch.setattr(plugin_folder, "QUERY_TIMEOUT_S", 0.5)
    folder = copy_depot(tmp_path)
    edit(folder / "scenario.toml", "SELECT site FROM site WHERE status = 'candidate' ORDER BY rowid", query)
    problem = only_problem(folder)
    assert "candidates.query" in problem and says in problem, problem


def test_a_names_query_of_a_huge_text_is_refused(tmp_path):
    """A 900 M-character ``names`` query reached 3.6 GB: SQLite's length limit of an agent's queries holds, here for
    100 M characters, 100 times the limit. (SQLite 3.40 spends time linear in the width asked within one function
    call, which no progress check interrupts: 0.6 s here for 100 M, 5.5 s for 900 M, then no value; on a loaded
    machine the query's time limit may stop it first, a refusal as good, after holding a core up to that limit.)"""
    folder = copy_depot(tmp_path)
    edit(folder / "scenario.toml", "SELECT site, site || ' (' || town || ')' FROM site",
         "SELECT site, printf('%.*c', 100000000, 'x') FROM site")
    problems, _ = checks.check(folder)  # refused (too big, or too long), or cut by SQLite's length limit to no value
    assert all("candidates.names query failed" in p and ("too big" in p or "ran longer than" in p)
               for p in problems), problems
    kind = FolderScenario(folder)
    if not problems:
        question = kind.questions()[0]
        assert all(len(n) < 100 for n in kind.candidate_names(question, kind.database()).values())


def test_too_many_questions_is_a_clear_error(tmp_path):
    folder = copy_depot(tmp_path)
    toml = folder / "scenario.toml"
    toml.write_text(toml.read_text() + '\n[[questions.ask]]\nseason = "winter"\n' * 25_000)
    assert re.search(r"25,003 questions: a scenario has at most 1,000", only_problem(folder))


#: Writes a plugin's query might attempt: every one refused by the read-only connection its queries run on.
PLUGIN_WRITES = ["DELETE FROM site", "UPDATE site SET status = 'candidate' RETURNING site", "DROP TABLE site",
                 "ATTACH DATABASE ':memory:' AS other", "PRAGMA writable_schema = 1",
                 "INSERT INTO site (site) VALUES ('DC-NEW') RETURNING site"]


@pytest.mark.parametrize("backend", ["sqlite", "mysql", "ladybug", "neo4j"])
def test_a_plugins_writing_query_is_refused_whichever_backend_the_run_queries(backend, request, tmp_path):
    """Issue 44 section C: a plugin's candidates and names queries run on the plugin's own data through an agent
    query's path (core.backends.sqlite.query_file: a read-only SQLite worker, its timeout, rows and character
    caps), whichever database the run's agent queries; every write is refused, and the data the agent queries on
    its backend is unchanged."""
    from core.backends.registry import open_backend, unavailable

    if backend == "neo4j":
        request.getfixturevalue("neo4j_server")
    elif unavailable(backend):
        pytest.skip(unavailable(backend))
    kind = FolderScenario(copy_depot(tmp_path))
    question, database = kind.questions()[0], kind.database()
    original = dict(kind.spec["candidates"])
    opened = open_backend(backend, database)
    count = {"sql": "SELECT COUNT(*) FROM site", "cypher": "MATCH (s:Site) RETURN count(s)"}[opened.language]
    try:
        before = opened.query(count).rows
        for write in PLUGIN_WRITES:
            for key, ask in (("query", kind.candidates), ("names", kind.candidate_names)):
                kind.spec["candidates"] = {**original, key: write}
                with pytest.raises(ScenarioError, match=rf"candidates\.{key} query failed: refused by the read-only "
                                                        "connection"):
                    ask(question, database)
        kind.spec["candidates"] = original
        assert kind.candidates(question, database) and opened.query(count).rows == before
    finally:
        opened.close()
