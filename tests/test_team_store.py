"""The team store (issue 25 section 1): one store API on two engines. The grade overrides, benchmark results, the
reply cache, the benchmark lock and learned plans behave alike on SQLite files and on PostgreSQL (store_engine,
conftest); the schema is Alembic's, checked at start-up with a clear message; ``db copy`` moves a home's history
into the team store, idempotently, with counts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.benchmark.cache import ReplyCache
from core.benchmark.items import Item
from core.benchmark.lock import BenchBusy, DirectoryLock
from core.benchmark.results import ResultStore, read_not_run, read_results
from core.llm.client import Completion
from core.model.grade import Override
from core.model.run_settings import Review
from core.store import database
from core.store.overrides import OverrideStore
from core.store.plans import LearnedPlan, PlanStore
from core.store.runs import RunStore
from tests.page_app import APP, PageTest
from tests.test_agents_runtime import PLAN, FINAL, make_runtime, replay, settings

ROOT = Path(__file__).resolve().parent.parent


def plan_of(scenario: str, steps: list[str]) -> LearnedPlan:
    return LearnedPlan(scenario, steps, "demo", [1], 1, None, "t", {}, [], "", [])


def test_the_migrations_head_is_the_schema_the_code_checks_for():
    from core.store import schema

    assert schema.head() == database.SCHEMA_HEAD


@pytest.mark.usefixtures("store_engine")
def test_overrides_put_replace_clear(tmp_path):
    store = OverrideStore(tmp_path)
    store.put("r1", Override("krakow", True, "ana", 1.0, "looks right"))
    store.put("r1", Override("lubeck", False, "bo", 2.0))
    store.put("r2", Override(None, None, "bo", 3.0))
    got = OverrideStore(tmp_path).all()
    assert (got["r1"].decision, got["r1"].correct, got["r1"].by) == ("lubeck", False, "bo")
    assert got["r2"].decision is None and store.get("r3") is None
    assert store.clear("r1") and not store.clear("r1") and set(store.all()) == {"r2"}


def _result(question: int, status: str = "finished") -> dict:
    return {"scenario": "locating", "question": question, "db": "sqlite", "technique": "iterrag", "model": "m",
            "status": status, "correct": True, "finished": 1.0}


@pytest.mark.usefixtures("store_engine")
def test_benchmark_results_are_kept_per_benchmark(tmp_path):
    one, two = ResultStore(tmp_path / "one"), ResultStore(tmp_path / "two")
    one.check_params({"temperature": 0})
    with pytest.raises(Exception, match="other parameters"):
        ResultStore(tmp_path / "one").check_params({"temperature": 1})
    two.check_params({"temperature": 1})  # another benchmark: its own parameters
    item = Item("locating", 2, "sqlite", "iterrag", "m")
    one.put_not_run(item, "network", "down")
    assert [r["question"] for r in read_not_run(tmp_path / "one")] == [2] and read_not_run(tmp_path / "two") == []
    one.put(_result(1))
    one.put(_result(2))  # the item that could not run ran: no longer listed as not run
    one.put(_result(2, "failed"))  # a rerun replaces
    assert [(r["question"], r["status"]) for r in read_results(tmp_path / "one")] == [(1, "finished"), (2, "failed")]
    assert read_not_run(tmp_path / "one") == [] and read_results(tmp_path / "two") == [] and len(one.done()) == 2


@pytest.mark.usefixtures("store_engine")
def test_reply_cache_and_learned_plans(tmp_path):
    cache = ReplyCache(tmp_path / "bench" / "llm-cache.sqlite")
    assert cache.get("k") is None
    cache.put("k", "m", Completion("hello", 1, 2, 0.1, False))
    cache.put("k", "m", Completion("hello", 1, 2, 0.1, False))
    assert ReplyCache(tmp_path / "bench" / "llm-cache.sqlite").get("k").text == "hello"
    plans = PlanStore(tmp_path / "plans")
    first = plans.save(plan_of("locating", ["look", "answer"]))
    second = plans.save(plan_of("locating", ["answer"]))
    assert (first.version, second.version) == (1, 2) and plans.versions("locating") == [1, 2]
    assert plans.load("locating").steps == ["answer"] and plans.versions("building") == []


@pytest.mark.usefixtures("store_engine")
def test_one_benchmark_at_a_time(tmp_path):
    with DirectoryLock(tmp_path / "b"):
        with pytest.raises(BenchBusy, match="already running"):
            DirectoryLock(tmp_path / "b").acquire()
        with DirectoryLock(tmp_path / "other"):
            pass
    with DirectoryLock(tmp_path / "b"):
        pass


def test_a_team_store_behind_the_code_stops_the_app_and_the_commands_with_what_to_do(team_database, monkeypatch):
    import psycopg

    url = team_database.rsplit("/", 1)[0] + f"/{team_database.rsplit('/', 1)[1]}_empty"
    with psycopg.connect(team_database.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}"')
        admin.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
    try:
        env = {**os.environ, "PLANRAG_DATABASE_URL": url}
        monkeypatch.setenv("PLANRAG_DATABASE_URL", url)
        app = PageTest(APP, default_timeout=30).run()  # the app says it and shows no page
        assert [e.value for e in app.error] == [
            f"The team store {url} has no schema yet; this version of the workbench needs revision "
            f"{database.SCHEMA_HEAD}. Run: python -m core db upgrade"]
        out = subprocess.run([sys.executable, "-m", "core", "override", "--list"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and "has no schema yet" in out.stderr and "python -m core db upgrade" in out.stderr
        up = subprocess.run([sys.executable, "-m", "core", "db", "upgrade"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
        assert up.returncode == 0 and f"schema none -> {database.SCHEMA_HEAD}" in up.stdout, up.stderr
        again = subprocess.run([sys.executable, "-m", "core", "override", "--list"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
    finally:
        database.close_pools(url)
        with psycopg.connect(team_database.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def test_db_upgrade_makes_the_job_queues_tables_and_applies_procrastinates_later_migrations(team_database, tmp_path,
                                                                                              monkeypatch):
    """On a fresh database of the test's own: ``db upgrade`` makes the job queue's tables at this code's
    procrastinate level; a store made before the level was recorded is at the baseline; a procrastinate with one
    more migration (a migrations folder of the test's own) finds the store behind, ``db upgrade`` applies that one
    only (once), a migration that fails changes nothing, and older code then refuses the store as not its own."""
    import shutil

    import psycopg

    from core.store import schema

    admin_url = team_database.rsplit("/", 1)[0] + "/postgres"
    name = f"{team_database.rsplit('/', 1)[1]}_queue"
    url = team_database.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        up = subprocess.run([sys.executable, "-m", "core", "db", "upgrade", "--url", url], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
        assert up.returncode == 0 and f"schema none -> {database.SCHEMA_HEAD}" in up.stdout, up.stderr
        assert database.queue_level(url) == database.queue_head()
        healthy = subprocess.run([sys.executable, "-m", "core", "db", "check", "--url", url], cwd=ROOT,
                                 capture_output=True, text=True, timeout=120)
        assert healthy.returncode == 0, healthy.stdout
        with psycopg.connect(url, autocommit=True) as con:  # queue tables made by the earlier code: no level kept
            con.execute("DELETE FROM queue_schema")
        assert database.queue_level(url) == database.QUEUE_BASELINE
        assert schema.upgrade_queue(url) == []  # the pinned procrastinate's: nothing to apply

        newer = tmp_path / "migrations"
        shutil.copytree(database.queue_migrations()[0].parent, newer, ignore=shutil.ignore_patterns("__*"))
        (newer / "99.00.00_01_pre_note_jobs.sql").write_text(
            "COMMENT ON TABLE procrastinate_jobs IS 'migrated';\n"
            "CREATE FUNCTION procrastinate_test_marker() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n")
        monkeypatch.setattr(database, "QUEUE_MIGRATIONS", newer)
        database.close_pools(url)
        with pytest.raises(database.SchemaBehind, match="with the job queue at 03.04.00_50.*needs 99.00.00_01_pre_note_"
                                                        "jobs.*Run: python -m core db upgrade"):
            database.check_schema(url)
        assert schema.upgrade_queue(url) == ["99.00.00_01_pre_note_jobs"]
        assert schema.upgrade_queue(url) == []  # applied once
        database.check_schema(url)
        with psycopg.connect(url) as con:
            assert con.execute("SELECT obj_description('procrastinate_jobs'::regclass)").fetchone()[0] == "migrated"

        (newer / "99.00.01_01_pre_broken.sql").write_text(
            "COMMENT ON TABLE procrastinate_jobs IS 'half';\nSELECT no_such_column FROM procrastinate_jobs;\n")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            schema.upgrade_queue(url)
        assert database.queue_level(url) == "99.00.00_01_pre_note_jobs"
        with psycopg.connect(url) as con:  # rolled back with the level
            assert con.execute("SELECT obj_description('procrastinate_jobs'::regclass)").fetchone()[0] == "migrated"

        monkeypatch.setattr(database, "QUEUE_MIGRATIONS", None)  # the code before: its procrastinate is older
        database.close_pools(url)
        with pytest.raises(database.SchemaBehind, match="with the job queue at 99.00.00_01_pre_note_jobs"):
            database.check_schema(url)
    finally:
        database.close_pools(url)
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_copy_moves_a_home_into_the_team_store_once_and_its_paused_run_goes_on_there(team_database, tmp_path,
                                                                                     monkeypatch):
    from tests.conftest import empty_team_store

    empty_team_store(team_database)
    monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
    home = tmp_path / "home"
    runtime = make_runtime(home)
    done = runtime.start(settings(replay(tmp_path, [PLAN, "Re-plan: N\n" + FINAL]), "planrag"))
    paused = runtime.start(settings(replay(tmp_path, [PLAN, "Re-plan: N\n" + FINAL]), "planrag",
                                    hitl="approve-every-plan"))
    stopped = runtime.start(settings(replay(tmp_path, [PLAN]), "planrag", hitl="approve-every-plan"))
    runtime.store.request_stop(stopped.run_id, by="ana")  # recorded as a review without a pause
    OverrideStore(home).put(done.run_id, Override("lubeck", False, "ana", 5.0))
    PlanStore(home / "plans").save(plan_of("locating", ["look"]))
    ResultStore(home / "bench" / "b1").put(_result(1))
    runtime.close()
    kept = RunStore(home / "runs.sqlite")
    events = len(kept.get(done.run_id).events)
    total = sum(len(kept.get(r.run_id).events) for r in (done, paused, stopped))

    def copy():
        out = subprocess.run([sys.executable, "-m", "core", "db", "copy", "--from", str(home), "--to", team_database],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return {line.split(":")[0].strip(): line.split(":")[1].strip() for line in out.stdout.splitlines()[1:]}

    first = copy()
    assert first["runs"] == "3 new, 0 already there (3 read)" and first["overrides"].startswith("1 new")
    assert first["learned_plans"].startswith("1 new") and first["bench_results"].startswith("1 new")
    assert first["reviews"] == "1 new, 0 already there (1 read)" and first["events"] == f"{total} new, 0 already there ({total} read)"
    assert not first["checkpoints"].startswith("0 new")
    second = copy()
    assert all(v.startswith("0 new") for v in second.values()), second
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    team = make_runtime(tmp_path / "elsewhere")  # another machine's home: everything comes from the team store
    assert len(team.store.get(done.run_id).events) == events
    assert OverrideStore(tmp_path / "elsewhere").get(done.run_id).decision == "lubeck"
    assert PlanStore(tmp_path / "elsewhere" / "plans").versions("locating") == [1]
    assert [r["question"] for r in read_results(tmp_path / "x" / "b1")] == [1]
    assert team.store.reviews(stopped.run_id)[0]["reviewer"] == "ana"
    assert team.resume(paused.run_id, Review.approve(), pause_id="p1").status == "finished"


def test_patiently_says_the_store_is_away_waits_for_it_and_does_the_read_again(team_database):
    """What ``core bench`` does at its end (its accuracy and reports, read after the items): a read that finds the team
    store away is said, waited for and done again, not the command's failure (it failed after an outage with
    "couldn't get a connection after 5.00 sec", every item done). Here the first read meets a server that refuses
    connections (a closed port), the second the store."""
    import psycopg

    tries, said = [], []

    def read():
        url = "postgresql://postgres@127.0.0.1:1/none" if not tries else team_database
        tries.append(url)
        with psycopg.connect(url, connect_timeout=2) as con:
            return con.execute("SELECT 41 + 1").fetchone()[0]

    assert database.patiently(read, team_database, said.append) == 42
    assert len(tries) == 2 and len(said) == 1 and said[0].startswith("the team store cannot be reached (")
    with pytest.raises(ZeroDivisionError):  # any other error is the read's own: raised at once, not waited on
        database.patiently(lambda: 1 / 0, team_database, said.append)
    assert len(said) == 1
