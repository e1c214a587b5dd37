"""Shared fixtures. Outside resources (DQA data, MariaDB, Neo4j) are skipped with a reason when absent,
unless REQUIRE_<NAME>=1 is set (as CI does), which turns the skip into a failure."""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ui import threads  # noqa: E402 (after the checkout is importable)

# The test process is the app's server here (AppTest sessions, runs on threads): the same guards as app.py installs.
threads.guard()

# Runs start in this process's threads (PLANRAG_JOBS=threads), as AppTest sessions follow them: the embedded default,
# a local run process per home (core.jobs.local), is tested where a test asks for it (tests/test_jobs_local.py, a
# server stopped mid-run in tests/test_shutdown.py, the browser's run in tests/test_e2e_local_runs.py).
os.environ["PLANRAG_JOBS"] = "threads"

# Each new AppTest scans every installed distribution for Streamlit components (0.1 CPU-s each; 30 s of a whole
# run's py-spy samples); what is installed does not change while the tests run, so one scan serves all.
from streamlit.components.v2 import manifest_scanner  # noqa: E402

manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def _uses_neo4j(item) -> bool:
    """Whether ``item`` queries the Neo4j-protocol server: it asks for the server, or is a case of backend neo4j."""
    spec = getattr(item, "callspec", None)
    return "neo4j_server" in item.fixturenames or any(v == "neo4j" for v in (spec.params.values() if spec else ()))


#: Files whose tests share an expensive set-up made once per process (a Phoenix server, 301 scripted transcripts, the
#: DQA databases loaded, an app server): each goes to one process whole, so the set-up is made once, not on every
#: process. The test files of the job queue and of budgets share a set-up too, but are long enough to be spread.
ONE_PROCESS_EACH = ("tests/test_telemetry.py", "tests/test_benchmark_dqa.py", "tests/test_paper_exact.py",
                    "tests/test_generator.py", "tests/test_inspect.py", "tests/test_agents_dqa.py",
                    "tests/test_agents_guards_dqa.py", "tests/test_agents_reaper.py", "tests/test_autoplan.py",
                    "tests/test_benchmark_epochs.py", "tests/test_backends_sql.py", "tests/test_backends_graph.py",
                    "tests/test_backends_conformance.py", "tests/test_isolation.py", "tests/test_mysql_isolation.py",
                    "tests/test_observation_cap.py", "tests/test_sims_locating.py", "tests/test_e2e_peers.py")


def _scope(nodeid: str) -> str:
    """Under pytest-xdist, what goes to one worker as one unit: every test whose id names neo4j (the Neo4j-protocol
    server holds one graph in single-database mode, which each such test loads, checks and clears: one after
    another), the tests of a file of ``ONE_PROCESS_EACH``, else the test alone (to whichever worker is free)."""
    if "neo4j" in nodeid.lower():
        return "neo4j"
    file = nodeid.split("::")[0]
    return file if file in ONE_PROCESS_EACH else nodeid


#: The longest tests, longest first (seconds of a whole run on 3 processes at load 10, 2 cores, 2026-11-28): started
#: first, so that under pytest-xdist none of them begins near the end and keeps one process busy after the others
#: are done. Only the order depends on this list, never what runs.
LONGEST_FIRST = (
    "tests/test_benchmark_dqa.py::test_sweep_of_all_questions_gives_the_crafted_numbers",  # 257 s
    "tests/test_e2e_gate.py::test_the_gate_in_the_browser",  # 255 s
    "tests/test_e2e_untrusted.py::test_no_page_fetches_or_links_outside_with_hostile_data",  # 175 s
    "tests/test_e2e_signin.py::test_each_role_sees_and_does_what_it_may",  # 163 s
    "tests/test_e2e_team.py::",  # 132 s
    "tests/test_benchmark_budget.py::test_the_smoke_benchmark_takes_the_budget_and_the_run_limits",  # 125 s
    "tests/test_e2e_compile.py::",  # 124 s
    "tests/test_e2e_links.py::",  # 111 s
    "tests/test_benchmark_budget.py::test_two_workers_of_one_benchmark_share_its_budget",  # 102 s
    "tests/test_jobs_queue.py::test_an_outage_of_the_store",  # 68-93 s each
    "tests/test_e2e_run_control.py::",  # 83 s
    "tests/test_e2e_inbox.py::",  # 74 s
    "tests/test_e2e_peers.py::",
    "tests/test_e2e_browser.py::",  # 30-70 s each
    "tests/test_benchmark_budget.py::test_the_command_line_caps_the_calls",  # 67 s
    "tests/test_benchmark_dqa.py::test_cli_resumes_after_a_kill",  # 63 s
    "tests/test_auth_keys.py::",  # 33-58 s each
    "tests/test_run_control.py::test_cli_branch_prints_the_new_run_and_stop_closes_a_paused_run",  # 57 s
    "tests/test_benchmark_compare.py::test_the_benchmark_page_compares_two_result_sets",  # 54 s
    "tests/test_cli_identity.py::",  # 53 s
    "tests/test_benchmark_page.py::test_a_benchmark_another_process_runs_is_followed_live_from_this_app",  # 47 s
    "tests/test_telemetry.py::",  # 36-45 s each
    "tests/test_e2e_views.py::",  # 37 s
)


def _longest_first(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(items):
    """A test on the Neo4j-protocol server must say so in its id (its file's name, its name or a parameter), for
    the scheduler, which sees only ids, to keep it with the others. The longest tests go first (``LONGEST_FIRST``)."""
    hidden = [item.nodeid for item in items if _uses_neo4j(item) and "neo4j" not in item.nodeid.lower()]
    if hidden:
        raise pytest.UsageError(f"tests on the Neo4j-protocol server whose id does not say neo4j: {hidden[:5]}")
    items.sort(key=lambda item: _longest_first(item.nodeid))  # stable: the others keep their order


if importlib.util.find_spec("xdist"):
    from xdist.scheduler import LoadScopeScheduling

    class _OneGraphAtATime(LoadScopeScheduling):
        """pytest-xdist's load-by-scope scheduling with the scopes of ``_scope``."""

        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        """``make test``'s ``-n``: tests to whichever worker is free, those on the Neo4j server one after another."""
        return _OneGraphAtATime(config, log)


def require(name: str, reason: str):
    """Skip (or fail, when REQUIRE_<NAME>=1) because resource ``name`` is missing."""
    if os.environ.get(f"REQUIRE_{name.upper()}") == "1":
        pytest.fail(f"{reason} (REQUIRE_{name.upper()}=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def dqa_dir() -> Path:
    """The DQA data folder (DQA_DIR, default ../shared/dqa)."""
    from core.config.settings import dqa_dir as configured

    path = configured()
    if path is None or not (path / "locating").is_dir():
        require("dqa", f"DQA data not found (set DQA_DIR to the data/ folder of myeon9h/PlanRAG; looked at {path})")
    return path


@pytest.fixture(scope="session")
def dqa(dqa_dir):
    """The imported benchmark, shared by all tests of a session."""
    from core.scenarios.dqa.source import DQA

    return DQA(dqa_dir)


@pytest.fixture(scope="session")
def neo4j_server():
    """A Neo4j-protocol server for the session, put in the environment (NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD)
    where every backend open reads it: the one NEO4J_URI names, else the local ArcadeDB server (core.backends.graph_server)
    started on free ports when it is installed."""
    from core.backends import graph_server
    from core.backends.registry import unavailable

    if os.environ.get("NEO4J_URI"):
        reason = unavailable("neo4j")
        if reason:
            require("neo4j", reason)
        yield os.environ["NEO4J_URI"]
        return
    if not graph_server.installed():
        require("neo4j", "no Neo4j-protocol server: set NEO4J_URI (with NEO4J_USER, NEO4J_PASSWORD), or install the "
                         "local one with: python -m core graph-server install")
    server = graph_server.start(0, 0, heap_mb=512, command_timeout_s=20, die_with_parent=True)
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in server.env().items():
                mp.setenv(name, value)
            yield server.uri
    finally:
        graph_server.stop(server)


#: The PostgreSQL server the team-store tests use (POSTGRES_URL: a URL of its maintenance database).
POSTGRES_URL = os.environ.get("POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
#: Tables the team-store tests empty between tests (all but the schema's own records).
_KEPT_TABLES = ("alembic_version", "checkpoint_migrations", "queue_schema")


@pytest.fixture(scope="session")
def team_database():
    """A fresh PostgreSQL database for this test session (``<prefix>_test_<pid>``, prefix PLANRAG_TEST_DB_PREFIX,
    default teamstore2), at this code's schema (``python -m core db upgrade``'s), dropped at the end; its URL."""
    try:
        import psycopg
    except ImportError:
        require("postgres", "psycopg is not installed (pip install -r requirements.txt)")
    from core.store import database, schema

    name = f"{os.environ.get('PLANRAG_TEST_DB_PREFIX', 'teamstore2')}_test_{os.getpid()}"
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        require("postgres", f"no PostgreSQL server at {database.shown(POSTGRES_URL)} (set POSTGRES_URL): "
                            f"{str(e).strip()}")
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    schema.upgrade(url)
    yield url
    database.close_pools(url)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty_team_store(url: str) -> None:
    """Empty every table of the team store at ``url`` (its schema stays)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        tables = [r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                  if r[0] not in _KEPT_TABLES]
        con.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_engine(request, monkeypatch):
    """Each store test once per engine: the embedded SQLite files, and the team store (PLANRAG_DATABASE_URL set to
    the session's PostgreSQL database, emptied for each test): every store the test opens lives there."""
    if request.param == "sqlite":
        monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
        return "sqlite"
    url = request.getfixturevalue("team_database")
    empty_team_store(url)
    monkeypatch.setenv("PLANRAG_DATABASE_URL", url)
    return "postgresql"


@pytest.fixture(autouse=True, scope="session")
def _embedded_by_default():
    """Tests run on the embedded stores unless they ask for the team store (store_engine)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PLANRAG_DATABASE_URL", raising=False)
        yield


@pytest.fixture(autouse=True)
def _no_notices_of_other_tests(monkeypatch):
    """What a test found set aside or cleaned up (core.config.home's notices, one list a process) is said on its own
    pages, not on the pages of the tests after it."""
    from core.config import home

    monkeypatch.setattr(home, "_notices", [])


@pytest.fixture(autouse=True)
def _the_main_module_kept():
    """Streamlit's AppTest runs a page as ``__main__`` and leaves it in ``sys.modules``: a later test whose code starts
    processes by spawning (the generator's ``jobs``) would have each child run that page first, and die of it
    (BrokenProcessPool in test_generator after test_llm_limits' pages, 1 in 1). The real one is put back after each
    test."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
