"""The Neo4j backend on a Neo4j-protocol server (NEO4J_URI, else the local ArcadeDB server of core.backends.graph_server):
one database shared by questions and processes never answers from another question's graph; agent transactions
are rolled back; CALL only reaches schema procedures; the client bounds a query's time; a server without
CREATE DATABASE is used in single-database mode; the agents' replayed Cypher runs decide as on Ladybug.
Checks hold for real Neo4j too (they rest on no ArcadeDB quirk)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import neo4j
import pytest

from core.backends import cypher_dialect as cd
from core.backends import neo4j as nb
from core.backends.base import MAX_CELL_CHARS, BackendUnavailable, QueryTimeout, RefusedWrite
from core.backends.registry import open_backend
from core.config.settings import DatabaseSettings
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent
RUNAWAY = ("MATCH (a:Country), (b:Country), (c:Country), (d:Country) "
           "WHERE a.development + b.development > c.development + d.development RETURN count(*)")


def _one(backend, text: str):
    return backend.query(text).rows[0][0]


@pytest.fixture(scope="module")
def dbs(dqa):
    """Three questions with different graphs: Locating 1, Locating 82 and Building 1."""
    return {name: dqa.database(dqa.question(scenario, n))
            for name, scenario, n in (("loc1", "locating", 1), ("loc82", "locating", 82), ("bld1", "building", 1))}


def _counts(db) -> dict:
    return db.graph.counts()


def _graph_counts(backend, db) -> dict:
    got = {label: _one(backend, f"MATCH (x:{label}) RETURN count(x)") for label in db.graph.nodes}
    return got | {rel: _one(backend, f"MATCH ()-[x:{rel}]->() RETURN count(x)") for rel in db.graph.rels}


def _raw_driver() -> neo4j.Driver:
    s = DatabaseSettings()
    return neo4j.GraphDatabase.driver(s.neo4j_uri, auth=(s.neo4j_user, s.neo4j_password))


# --- no server needed ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "CALL apoc.merge.node(['Country'], {name: 'ZZY'})", "CALL apoc.periodic.iterate('MATCH (n) RETURN n', '', {})",
    "call `apoc`.`merge`.node(['Country'], {name: 'ZZY'}) YIELD node RETURN node",
    "MATCH (n) CALL apoc.create.addLabels(n, ['X']) YIELD node RETURN count(node)", "CALL dbms.killQuery('x')",
    "CALL db.createLabel('X')", "CALL db.labels.write()",
])
def test_call_refused_unless_a_known_read_procedure(text):
    with pytest.raises(RefusedWrite, match="CALL"):
        cd.check_neo4j(cd.prepare(text))


@pytest.mark.parametrize("text", [
    "CALL db.labels()", "CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType",
    "CALL db.schema.nodeTypeProperties()", "MATCH (n:Country) CALL { MATCH (t:Trade_node) RETURN count(t) AS c } "
    "RETURN n.name, c", "MATCH (n:Country) RETURN n.call LIMIT 1",
])
def test_read_procedures_and_subqueries_allowed(text):
    cd.check_neo4j(cd.prepare(text))


def test_graph_server_status_and_stop_without_a_server(tmp_path, monkeypatch, capsys):
    from core.cli.main import main

    monkeypatch.setenv("PLANRAG_GRAPH_SERVER_HOME", str(tmp_path))
    assert main(["graph-server", "status", "--bolt-port", "17999"]) == 1
    assert "no graph server started on port 17999" in capsys.readouterr().err
    assert main(["graph-server", "stop", "--bolt-port", "17999"]) == 0
    (tmp_path / "server-17999.json").write_text('{"pid": 1, "bolt_port": 17999, "http_port": 1, "password": "x", '
                                               '"root": "/nowhere"}')  # a stale state: pid 1 is not the server
    assert main(["graph-server", "status", "--bolt-port", "17999"]) == 1


class _FailingSession:
    def __init__(self, error):
        self.error = error

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def run(self, query, **params):
        raise self.error


class _FailingDriver:
    def __init__(self, error):
        self.error = error

    def session(self, **config):
        return _FailingSession(self.error)


@pytest.mark.parametrize("code", ["Neo.ClientError.Statement.SyntaxError", "Neo.DatabaseError.General.UnknownError",
                                  "Neo.TransientError.General.DatabaseUnavailable", "", "hang-up"])
def test_any_failure_of_create_database_means_single_database(code, monkeypatch):
    monkeypatch.setattr(nb, "_single", set())
    error = neo4j.exceptions.Neo4jError._hydrate_neo4j(code=code, message="no") if code.startswith("Neo.") else \
        neo4j.exceptions.SessionExpired("hung up") if code == "hang-up" else neo4j.exceptions.Neo4jError("no")
    assert nb._call(nb._target_database(_FailingDriver(error), "bolt://x", "k")) is None
    assert "bolt://x" in nb._single


# --- on a server ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(neo4j_server):
    return neo4j_server


def test_interleaved_questions_in_one_process_each_get_their_own_graph(server, dbs, monkeypatch):
    """Three threads open three questions on one database at the same moment (the first use of the driver
    included) and query them in turn: each query answers from its own graph (another's open or reload never
    leaks into it, and no two threads reload in turn for ever)."""
    drivers = {}
    monkeypatch.setattr(nb, "_drivers", drivers)  # a first use, from every thread at once
    label = {"loc1": "Country", "loc82": "Country", "bld1": "Building"}
    expected = {name: _counts(dbs[name])[label[name]] for name in label}
    got, errors, barrier = {name: [] for name in label}, [], threading.Barrier(len(label))

    def work(name):
        try:
            barrier.wait()
            backend = open_backend("neo4j", dbs[name])
            for _ in range(5):
                got[name].append(_one(backend, f"MATCH (x:{label[name]}) RETURN count(x)"))
            backend.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(name,)) for name in label]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for driver in drivers.values():
            nb._call(driver.close())
    assert errors == []
    assert got == {name: [expected[name]] * 5 for name in label}


def test_another_process_loading_another_question_is_never_read(server, dbs):
    """A long-lived backend keeps answering for its question after `core query` in another process loaded
    another question's graph into the same database; reopening reloads it."""
    loc1, loc82 = dbs["loc1"], dbs["loc82"]
    assert _counts(loc1) != _counts(loc82)
    backend = open_backend("neo4j", loc1)
    try:
        assert _graph_counts(backend, loc1) == _counts(loc1)
        done = subprocess.run([sys.executable, "-m", "core", "query", "--scenario", "locating", "--question", "82",
                               "--db", "neo4j", "--json", "MATCH (n:Country) RETURN count(n)"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300, env=os.environ.copy())
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["rows"] == [[_counts(loc82)["Country"]]]
        result = backend.query("MATCH (n:Country) RETURN count(n)")
        assert result.rows == [[_counts(loc1)["Country"]]] and "loaded again" in result.notes[0]
        assert _graph_counts(backend, loc1) == _counts(loc1)
        reopened = open_backend("neo4j", loc82)
        assert _graph_counts(reopened, loc82) == _counts(loc82)
        assert _graph_counts(open_backend("neo4j", loc1), loc1) == _counts(loc1)
    finally:
        backend.close()


READER = """
import sys
from core.backends.base import BackendUnavailable
from core.backends.registry import open_backend
from core.scenarios.dqa.source import DQA
from core.config.settings import dqa_dir

dqa = DQA(dqa_dir())
backend = open_backend("neo4j", dqa.database(dqa.question("locating", int(sys.argv[1]))))
for _ in range(4):
    try:
        print(backend.query("MATCH (n:Country) RETURN count(n)").rows[0][0], flush=True)
    except BackendUnavailable as e:
        print("unavailable", e, flush=True)
"""


def test_processes_reading_different_questions_at_once_each_read_their_own(server, dqa):
    """Three processes query three questions' graphs in one database at the same time: every answer is from the
    process's own question (or, when others keep replacing it, an error saying so), never from another's."""
    numbers = (1, 82, 141)
    expected = {n: dqa.database(dqa.question("locating", n)).graph.counts()["Country"] for n in numbers}
    assert len(set(expected.values())) == len(numbers)
    procs = {n: subprocess.Popen([sys.executable, "-c", READER, str(n)], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=os.environ.copy()) for n in numbers}
    for n, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        lines = out.split("\n")[:-1]
        assert len(lines) == 4
        assert all(line == str(expected[n]) or line.startswith("unavailable another client keeps replacing")
                   for line in lines), (n, expected[n], lines)


@pytest.mark.parametrize("fails", [False, True], ids=["rows", "error"])
def test_a_load_starting_during_a_read_discards_the_read(server, dbs, monkeypatch, fails):
    """Another client claims the database while a query's rows are being read: the rows (or the error the
    query met on the graph being replaced) are thrown away and the query answers from its own graph, loaded
    again."""
    backend = open_backend("neo4j", dbs["loc1"])
    real_plain, calls = nb.plain, []

    def plain_and_interfere(value):
        if not calls:
            with _raw_driver() as driver:
                driver.execute_query("MATCH (m:PlanRAGGraph {id: 1}) SET m.state = 'loading', m.key = 'other', "
                                     "m.beat = 0, m.generation = m.generation + 1")
            if fails:
                calls.append(value)
                raise neo4j.exceptions.Neo4jError._hydrate_neo4j(code="Neo.DatabaseError.General.UnknownError",
                                                                 message="record deleted")
        calls.append(value)
        return real_plain(value)

    monkeypatch.setattr(nb, "plain", plain_and_interfere)
    result = backend.query("MATCH (n:Trade_node) RETURN n.name ORDER BY n.name", row_cap=1000)
    assert sorted(r[0] for r in result.rows) == sorted(r[0] for r in dbs["loc1"].graph.nodes["Trade_node"].rows)
    assert len(calls) > 80 and "loaded again" in result.notes[0]


def test_a_foreign_database_is_never_cleared(server, dbs):
    """A database holding data without PlanRAG's marker is refused, and left as it was. (The test only deletes
    what it made: the database holds PlanRAG's graph of Locating 1 when it removes the marker.)"""
    open_backend("neo4j", dbs["loc1"]).close()
    with _raw_driver() as driver:
        driver.execute_query("MATCH (m:PlanRAGGraph {id: 1}) DELETE m")
        driver.execute_query("CREATE (:Precious {name: 'keep me'})")
        try:
            with pytest.raises(BackendUnavailable, match="did not load"):
                open_backend("neo4j", dbs["bld1"])
            assert driver.execute_query("MATCH (n:Precious) RETURN n.name AS name").records[0]["name"] == "keep me"
            assert driver.execute_query("MATCH (n:Trade_node) RETURN count(n) AS n").records[0]["n"] == 80
        finally:
            driver.execute_query("MATCH (n) DETACH DELETE n")
    assert _one(open_backend("neo4j", dbs["loc1"]), "MATCH (n:Trade_node) RETURN count(n)") == 80


def test_agent_transactions_are_rolled_back(server, dbs, monkeypatch):
    """With the keyword and CALL checks out of the way, a write in an agent query changes nothing: a Neo4j server
    refuses it (read access mode), and the transaction is never committed anyway."""
    backend = open_backend("neo4j", dbs["loc1"])
    monkeypatch.setattr(nb, "prepare", lambda text: text)
    monkeypatch.setattr(nb, "check_neo4j", lambda text: None)
    for text in ("CREATE (:Country {name: 'ZZY'})", "MATCH (n:Trade_node) SET n.local_value = -1 RETURN count(n)",
                 "MERGE (c:Country {name: 'ZZY'}) RETURN c.name"):
        try:
            backend.query(text)
        except RefusedWrite:
            pass
    monkeypatch.undo()
    assert _one(backend, "MATCH (c:Country {name: 'ZZY'}) RETURN count(c)") == 0
    assert _one(backend, "MATCH (n:Trade_node) WHERE n.local_value = -1 RETURN count(n)") == 0
    with pytest.raises(RefusedWrite, match="CALL apoc.merge.node"):
        backend.query("CALL apoc.merge.node(['Country'], {name: 'ZZY'})")
    labels = backend.query("CALL db.labels() YIELD label RETURN label").rows
    assert {"Country", "Trade_node"} <= {r[0] for r in labels}


def test_client_side_deadline_stops_a_query_the_server_lets_run(server, dbs, monkeypatch):
    """The client gives up before the server-side timeout (as when a server ignores it) and kills the connection;
    the backend is usable afterwards."""
    backend = open_backend("neo4j", dbs["loc1"])
    monkeypatch.setattr(nb, "CLIENT_GRACE_S", -2.0)  # client deadline 1 s, server-side timeout 3 s
    with pytest.raises(QueryTimeout, match="by the client"):
        backend.query(RUNAWAY, timeout_s=3.0)
    monkeypatch.undo()
    assert _one(backend, "MATCH (n:Trade_node) RETURN count(n)") == 80


def test_wide_cells_are_cut_as_they_arrive(server, dbs):
    """A wide result is cut in the backend as its rows arrive (cells, then rows past the result size), marked."""
    r = open_backend("neo4j", dbs["loc1"]).query(
        "UNWIND range(1, 6) AS i RETURN [x IN range(1, 40000) | 'wwwwwwww'] AS l, i", row_cap=6)
    assert r.total_rows == 6 and 0 < len(r.rows) < 6
    assert r.rows[0][0].endswith("…[cut: a longer list or map]") and r.rows[0][1] == 1
    assert len(r.rows[0][0]) < MAX_CELL_CHARS + 100


def _depot_db():
    from core.scenarios import catalog

    return catalog.database(catalog.question("scenario", "depot", 1))


@pytest.fixture
def frees_types(server):
    """The depot's graph after Building's needs a type dropped on ArcadeDB (README): on an ArcadeDB server other
    than the local graph server, ARCADEDB_COMMAND_URL must be set, else the test is skipped (or fails with
    REQUIRE_NEO4J=1). Neo4j keeps labels and types apart: nothing to drop."""
    from core.backends import arcadedb

    settings = DatabaseSettings()
    with _raw_driver() as driver:
        agent = driver.get_server_info().agent
    if "ArcadeDB" in agent and arcadedb.command_url(settings, None) is None:
        require("neo4j", f"{agent} at {settings.neo4j_uri} is not the local graph server and ARCADEDB_COMMAND_URL is "
                         "not set: the depot's graph cannot follow Building's there (see the README)")


def test_a_label_left_over_as_a_relationship_type_is_freed(server, dbs, frees_types):
    """Building's relationship type Demand, then the depot's node label Demand, then Building again: a server with
    one namespace for labels and relationship types (ArcadeDB keeps a type after its data is cleared) still loads
    each graph whole."""
    depot = _depot_db()
    for db, label in ((dbs["bld1"], "Building"), (depot, "Demand"), (dbs["bld1"], "Building")):
        backend = open_backend("neo4j", db)
        assert _graph_counts(backend, db) == _counts(db), label
        backend.close()


def test_a_clash_it_cannot_free_is_a_clear_error(server, dbs, monkeypatch):
    """On a server whose left-over types the workbench cannot drop (another ArcadeDB server than the local one),
    a clash is reported with the names and the way out; on Neo4j (no clash) the graph loads."""
    from core.backends import arcadedb

    open_backend("neo4j", dbs["bld1"]).close()
    monkeypatch.setattr(arcadedb, "local_server", lambda settings: None)
    depot = _depot_db()
    try:
        backend = open_backend("neo4j", depot)
    except BackendUnavailable as e:
        assert "Demand" in str(e) and "ARCADEDB_COMMAND_URL" in str(e) and "empty database" in str(e)
    else:
        assert _graph_counts(backend, depot) == _counts(depot)
        backend.close()


def test_an_arcadedb_server_of_ones_own_frees_a_clash_through_its_command_url(server, dbs, monkeypatch):
    """On an ArcadeDB server the workbench did not start, ARCADEDB_COMMAND_URL (here the local server's, which the
    workbench is made not to recognise) lets it drop the left-over type: the depot's graph loads after Building's."""
    from core.backends import arcadedb

    settings = DatabaseSettings()
    if arcadedb.local_server(settings) is not None:
        monkeypatch.setenv("ARCADEDB_COMMAND_URL", arcadedb.command_url(settings, None)[0])
    elif not os.environ.get("ARCADEDB_COMMAND_URL"):
        pytest.skip("a server of one's own without ARCADEDB_COMMAND_URL (on Neo4j nothing clashes: see the test above)")
    open_backend("neo4j", dbs["bld1"]).close()
    monkeypatch.setattr(arcadedb, "local_server", lambda settings: None)
    dropped, drop = [], arcadedb.drop_types
    monkeypatch.setattr(arcadedb, "drop_types", lambda *a: dropped.append(a[2]) or drop(*a))
    depot = _depot_db()
    backend = open_backend("neo4j", depot)
    assert _graph_counts(backend, depot) == _counts(depot)
    backend.close()
    assert ["Demand"] in dropped


@pytest.mark.parametrize("bolt, url, database, taken", [
    ("bolt://db.example:7687", "http://db.example:2480/api/v1/command/graphs", None, True),
    ("bolt://db.example:7687", "https://db.example/api/v1/command/graphs", None, True),
    ("bolt://db.example:7687", "http://elsewhere.example:2480/api/v1/command/graphs", None, False),  # not the host
    ("bolt://db.example:7687", "file:///etc/passwd", None, False),
    ("bolt://db.example:7687", "http://db.example:2480/api/v1/command/graphs", "planrag-x", False),  # not its default
    ("bolt://db.example:7687", "", None, False),
    ("bolt://db.example:7687", "http://[::1", None, False),
])
def test_the_command_url_is_taken_only_for_the_bolt_servers_host_and_default_database(monkeypatch, bolt, url,
                                                                                        database, taken):
    """No server needed: the Bolt user and password go only to the host the Bolt URI names, over HTTP(S)."""
    from core.backends import arcadedb

    monkeypatch.setenv("ARCADEDB_COMMAND_URL", url)
    settings = DatabaseSettings(neo4j_uri=bolt, neo4j_user="u", neo4j_password="p-secret-1")
    assert arcadedb.command_url(settings, database) == ((url, "u", "p-secret-1") if taken else None)


# --- the agents' replayed Cypher runs -----------------------------------------------------------------
REPLAYS = sorted([pytest.param(p.name, p.stem.split("_")[0], p, id=p.name)
                  for p in (ROOT / "assets" / "replays").glob("*_cypher_*.json")]
                 + [pytest.param(p.name, "dqa", p, id=p.name)
                    for p in (ROOT / "tests" / "transcripts").glob("*_cypher_*.json") if "malformed" not in p.name],
                 key=lambda param: param.values[0])


@pytest.fixture(scope="module")
def runtime(tmp_path_factory, dqa_dir):
    from core.agents.runtime import AgentRuntime

    runtime = AgentRuntime(tmp_path_factory.mktemp("planrag_home"))
    yield runtime
    runtime.close()


def _run(runtime, source: str, path: Path, backend: str):
    from core.model.run_settings import RunSettings

    parts = path.stem.split("_")  # assets/replays: {source}_{scenario}_{number}_{language}_{technique}
    shipped = source != "dqa"
    scenario, technique = (parts[1], parts[4]) if shipped else (parts[0], "_".join(parts[2:]))
    number = int(parts[2]) if shipped else 1
    technique = technique.replace("planrag_norp", "planrag-norp")
    result = runtime.start(RunSettings(scenario, number, backend, technique, f"replay:{path}", source=source))
    observations = [e for e in runtime.store.get(result.run_id).events if e.kind == "observation"]
    return result, observations


@pytest.mark.parametrize("name, source, path", REPLAYS)
def test_replayed_cypher_runs_decide_as_on_ladybug(server, runtime, name, source, path, request):
    if "depot" in name:
        request.getfixturevalue("frees_types")
    on_ladybug, seen_ladybug = _run(runtime, source, path, "ladybug")
    on_neo4j, seen_neo4j = _run(runtime, source, path, "neo4j")
    assert on_neo4j.status == on_ladybug.status == "finished"
    assert on_neo4j.outcome.decision == on_ladybug.outcome.decision
    assert [o.error is None for o in seen_neo4j] == [o.error is None for o in seen_ladybug]



# --- a scenario on the user's own Neo4j-protocol database ------------------------------------------------
def test_a_scenario_reads_the_users_own_neo4j_database(server, tmp_path, frees_types):
    """A plugin scenario whose data is a Neo4j-protocol database (here the server holding the depot's graph, as a
    user's own database would): every label and relationship type becomes a table, read in read sessions, and the
    scenario checks and lists its candidates; a wrong password is a clear error that does not show it."""
    from core.scenarios.plugins.checks import check
    from core.scenarios.plugins.folder import FolderScenario

    depot = _depot_db()
    open_backend("neo4j", depot).close()  # the graph the "user's database" holds
    s = DatabaseSettings()
    if s.neo4j_uri not in nb._single:
        pytest.skip("the server gave the depot's graph a database of its own: the default one is not it")
    folder = tmp_path / "own-graph"
    folder.mkdir()
    manifest = (f'name = "own-graph"\n[data]\nneo4j = "{s.neo4j_uri}"\nuser = "{s.neo4j_user}"\n'
                f'password = "{s.neo4j_password}"\n[questions]\ntemplate = "Which site should we open?"\n'
                '[[questions.ask]]\n[candidates]\n'
                "query = \"SELECT site FROM Site WHERE status = 'candidate' ORDER BY site\"\n")
    (folder / "scenario.toml").write_text(manifest)
    kind = FolderScenario(folder)
    tables = kind.database().tables
    assert len(tables["Town"].rows) == len(depot.tables["town"].rows) and nb.MARKER not in tables
    assert len(tables["ROAD"].rows) == len(depot.tables["road"].rows)
    assert tables["ROAD"].column_names[:2] == ["source_id", "target_id"] and "km" in tables["ROAD"].column_names
    expected = sorted(r["site"] for r in depot.tables["site"].records() if r["status"] == "candidate")
    assert kind.candidates(kind.questions()[0], kind.database()) == expected
    assert check(folder)[0] == []
    (folder / "scenario.toml").write_text(manifest.replace(s.neo4j_password, "wrong-Secret-123"))
    problems, _ = check(folder)
    assert len(problems) == 1 and "neo4j" in problems[0] and "wrong-Secret-123" not in problems[0]


def test_two_claims_of_the_marker_at_once_make_one_client_wait(server, dbs, monkeypatch):
    """Two clients MERGE-ing the load marker at the same moment: a server may refuse one as a clash on the marker's
    unique id (ArcadeDB did, with ``ConstraintValidationFailed``, as two test processes loaded at once). That client
    waits and claims again, as after a transient error, instead of failing the load with the server's message."""
    claim, clashes = nb._claim, []

    async def clashing_once(tx, *args):
        if not clashes:
            clashes.append(1)
            raise neo4j.exceptions.ConstraintError("Duplicated key [1] found on index 'PlanRAGGraph[id]'")
        return await claim(tx, *args)

    open_backend("neo4j", dbs["loc1"]).close()  # the server holds another graph: opening Building 1 loads it
    monkeypatch.setattr(nb, "_claim", clashing_once)
    backend = open_backend("neo4j", dbs["bld1"])
    try:
        assert clashes and _one(backend, "MATCH (n:Trade_node) RETURN count(n)") == 0
    finally:
        backend.close()
