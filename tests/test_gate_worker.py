"""The gate asked again where a queued job is carried out (issue 36): a job of the team's queue carries who asked
for it, by which action and when, and the worker's job code (core.jobs.tasks) asks the gate with the role its
configuration gives now. An analyst whose role is taken away between queueing and running gets a failed job (a run
failed, a benchmark item not run) saying why; the job code itself in this process, and a real worker on the team
store."""
from __future__ import annotations

import time

import pytest

from core.auth.gate import Refused, asked_by, authorize_job
from core.auth.roles import identity_of, local_admin, local_operator
from core.jobs import payload, queue, runs
from core.jobs.code import code_version
from tests.test_jobs_queue import opener, settings, team, wait_for, workers  # noqa: F401 - fixtures and helpers
from tests.turn_stub import TurnStub

ISS = "https://idp.example.test"
GRANTED = '[planrag]\ndefault_role = "viewer"\n[planrag.roles]\nanalyst = ["anna@example.test"]\n'
TAKEN = '[planrag]\ndefault_role = "viewer"\n[planrag.roles]\nanalyst = []\n'


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    """The server's secrets file, naming anna an analyst (PLANRAG_SECRETS: the app's and its workers')."""
    path = tmp_path / "secrets.toml"
    path.write_text(GRANTED)
    monkeypatch.setenv("PLANRAG_SECRETS", str(path))
    return path


def anna():
    """Anna as she signed in: her verified e-mail, the role the secrets file gives her."""
    from core.auth import config

    now = int(time.time())
    return identity_of({"iss": ISS, "sub": "anna", "email": "anna@example.test", "email_verified": True,
                        "iat": now, "exp": now + 3600}, config.planrag())


def test_a_job_is_refused_once_its_role_was_taken_away(secrets):
    who = anna()
    assert who.role == "analyst"
    asked = asked_by(who, "start")
    assert authorize_job(who, "start", asked["at"]).role == "analyst"
    secrets.write_text(TAKEN)
    with pytest.raises(Refused, match="refused when a worker took the job up: anna@example.test is signed in as "
                                      "viewer, and only analyst or admin may start runs"):
        authorize_job(who, "start", asked["at"])
    # a sign-in that lapses after the job was asked does not undo it; one that had lapsed before does
    secrets.write_text(GRANTED)
    assert authorize_job(who, "start", who.valid_until - 1)
    with pytest.raises(Refused, match="had expired when the job was asked"):
        authorize_job(who, "start", who.valid_until)
    # the local user and the command line's operator are no one the configuration names: they stay admins
    secrets.write_text(TAKEN)
    assert authorize_job(local_operator(), "benchmark_start", time.time()).role == "admin"
    assert authorize_job(local_admin(), "branch", time.time()).name == "local user"
    secrets.write_text('[planrag\nbroken = "')  # fail closed: a configuration that cannot be read refuses
    with pytest.raises(Refused, match="sign-in configuration cannot be read"):
        authorize_job(who, "start", asked["at"])


def test_the_job_code_fails_a_run_whose_analyst_lost_her_role(secrets, tmp_path, monkeypatch):
    """In this process: tasks.drive_run, as a worker calls it, on a run queued while anna was an analyst."""
    from core.config import settings as config
    from core.jobs import tasks
    from core.model.run_settings import RunSettings
    from tests.test_e2e_signin import REPLAY

    monkeypatch.setattr(config, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path / "home"))
    store = runs.open_store()
    replay = RunSettings("locating", 1, "sqlite", "planrag", f"replay:{REPLAY}", source="demo")
    jobs = {}
    for run_id in ("0123456789ab", "ba9876543210"):
        store.create(run_id, replay.validate(), queued=True)
        jobs[run_id] = queue.run_job("start", run_id, None, asked=asked_by(anna(), "start"))
    assert tasks.drive_run(**jobs["0123456789ab"]) == "finished"  # still an analyst: driven
    secrets.write_text(TAKEN)  # her role taken away before a worker took the second job up
    with pytest.raises(Refused, match="anna@example.test is signed in as viewer"):
        tasks.drive_run(**jobs["ba9876543210"])
    record = store.get("ba9876543210")
    assert record.status == "failed" and "refused when a worker took the job up" in record.outcome.error
    assert [e.kind for e in record.events] == ["error"]  # nothing of the run ran


def test_the_job_code_runs_no_benchmark_item_for_a_lost_role(secrets, tmp_path, monkeypatch):
    from core.benchmark.results import read_not_run, read_results
    from core.benchmark.runner import bench_home
    from core.config import settings as config
    from core.jobs import tasks

    monkeypatch.setattr(config, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path / "home"))
    spec = {"techniques": ["iterrag"], "llm": "m", "scenario": "locating", "db": "sqlite", "questions": "1",
            "name": "anna-set", "limits": {}, "source": "demo", "llm_settings": {"model": "m"},
            "asked": asked_by(anna(), "benchmark_start")}
    key = "demo:locating/1/sqlite/iterrag/m"
    secrets.write_text(TAKEN)
    with pytest.raises(Refused, match="may start benchmarks"):
        tasks.bench_item(v=payload.VERSION, config=spec, key=key, code=code_version())
    assert not read_results(bench_home() / "anna-set")
    [kept] = read_not_run(bench_home() / "anna-set")
    assert "refused when a worker took the job up" in str(kept)


def test_a_worker_fails_the_queued_run_of_an_analyst_whose_role_was_taken_away(team, workers, secrets):  # noqa: F811
    """On the team store with a real worker: anna queues a run, loses her role, then a worker comes up."""
    stub = TurnStub(["Thought: I now know the answer.\nFinal answer: You should allocate the merchant to krakow."])
    run = runs.start(settings(stub.url), opener(stub.url), who=anna())
    assert run.status() == "queued"
    secrets.write_text(TAKEN)
    workers("w1")
    wait_for(lambda: run.status() == "failed")
    record = runs.open_store().get(run.run_id)
    assert "anna@example.test is signed in as viewer, and only analyst or admin may start runs" in \
        record.outcome.error
    assert runs.open_store().started_by(run.run_id) == "anna@example.test"
    assert sum(stub.calls.values()) == 0  # no model call was made for her
    wait_for(lambda: queue.counts().get(queue.RUNS) == {"failed": 1})
    stub.close()


def test_a_benchmark_in_this_process_runs_no_item_once_its_analysts_role_was_taken_away(secrets, tmp_path,
                                                                                         monkeypatch):
    """Without the queue the app's own threads run the items: each asks the gate again before it runs."""
    from dataclasses import replace

    from core.benchmark.runner import Bench
    from core.benchmark.smoke import smoke_config
    from core.config import settings as config

    monkeypatch.setattr(config, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path / "home"))
    asked = asked_by(anna(), "benchmark_start")  # as core.jobs.benchmarks.start gives it
    bench = Bench(replace(smoke_config(techniques=["iterrag"]), started_by="anna@example.test", asked=asked))
    secrets.write_text(TAKEN)
    progress = bench.run()
    assert "anna@example.test is signed in as viewer, and only analyst or admin may start benchmarks" in \
        progress.stopped
    assert bench.results() == [] and progress.done == 0
    secrets.write_text(GRANTED)
    assert Bench(bench.config).run().done == len(bench.work.items)  # her role back: it runs
