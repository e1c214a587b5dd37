"""The job queue trusts no row (issue 44 section A): a job carries ids and a checked, versioned payload
(core.jobs.payload); hostile rows inserted straight into procrastinate's table on the real PostgreSQL are failed by
a real worker with the reason, and touch nothing: no key sent to a server the job names, no file outside the
worker's home, no run driven. A NUL in a branch's note is refused before anything is recorded or queued."""
from __future__ import annotations

import json
import re
import time

import pytest

from core.auth.gate import asked_by
from core.auth.roles import local_admin
from core.jobs import payload, queue, runs
from core.jobs.code import code_version
from core.model.run_settings import RunSettings
from tests.stub_server import StubServer
from tests.test_jobs_queue import team, workers  # noqa: F401 - the fixtures: the team store, real workers

RUN_ID, CODE = "0123456789ab", "0123456789ab"
ASKED = {"who": {"name": "local user", "role": "admin"}, "action": "start", "at": 1.0}


def run_job(**changes) -> dict:
    return {"v": 1, "action": "start", "run_id": RUN_ID, "llm": {"model": "m"}, "branch": None, "asked": ASKED,
            "code": CODE, **changes}


def bench_job(**changes) -> dict:
    config = {"techniques": ["iterrag"], "llm": "m", "scenario": "all", "db": "sqlite", "questions": "all",
              "name": "b", "limits": {}, "source": "demo", "llm_settings": {"model": "m"},
              "asked": {**ASKED, "action": "benchmark_start"}, **changes}
    return {"v": 1, "config": config, "key": "demo:locating/1/sqlite/iterrag/m", "code": CODE}


@pytest.mark.parametrize("job, field", [
    (run_job(llm={"model": "m", "base_url": "http://evil:1/v1", "key_url": "http://evil:1/v1"}), "llm.base_url"),
    (run_job(llm={"model": "http://evil:1/v1"}), "llm.model"),
    (run_job(code=""), "code"),
    (run_job(v=2), "v"),
    (run_job(out="/tmp/x"), "out"),
    (run_job(run_id="../../etc"), "run_id"),
    (run_job(llm={"model": "m", "temperature": float("nan")}), "llm.temperature"),
    (run_job(llm={"model": "m", "max_retries": 10**9}), "llm.max_retries"),
    (run_job(llm={"model": "replay:/etc/passwd"}), "llm.model"),
    (run_job(action="branch", branch={"parent": RUN_ID, "step": 1, "changes": {"note": "a\x00b"}}),
     "branch.changes.note"),
    (run_job(action="branch"), "the job"),
    (run_job(action="start", branch={"parent": RUN_ID, "step": 1, "changes": {"note": "n"}}), "the job"),
    ({k: v for k, v in run_job().items() if k != "asked"}, "asked"),  # a job names who asked for it
    (run_job(asked={**ASKED, "action": "settings"}), "asked.action"),
    (run_job(asked={**ASKED, "action": "benchmark_start"}), "the job"),
    (run_job(asked={**ASKED, "who": {"name": "", "role": "admin"}}), "asked.who.name"),
])
def test_a_run_job_that_does_not_fit_its_schema_is_refused_naming_the_field(job, field):
    with pytest.raises(payload.PayloadError) as refused:
        payload.run_payload(job)
    line = str(refused.value)
    assert line.startswith(f"refused drive_run job: {field}") and "\n" not in line


@pytest.mark.parametrize("job, field", [
    (bench_job(out="/tmp/out"), "config.out"), (bench_job(home="/tmp/home"), "config.home"),
    (bench_job(dqa_root="/tmp"), "config.dqa_root"), (bench_job(base_url="http://evil:1/v1"), "config.base_url"),
    (bench_job(epochs=10**9), "config.epochs"), (bench_job(vote=10**9), "config.vote"),
    (bench_job(budget_calls=10**23), "config.budget_calls"), (bench_job(budget_cost=float("nan")), "config.budget_cost"),
    (bench_job(name="../../elsewhere"), "config.name"), (bench_job(name="/tmp/abs"), "config.name"),
    (bench_job(limits={"max_llm_calls": 10**9}), "config.limits"), (bench_job(limits={"x": 1}), "config.limits"),
    (bench_job(llm_settings={"model": "m", "key_url": "http://evil:1/v1"}), "config.llm_settings.key_url"),
    ({**bench_job(), "code": ""}, "code"),
])
def test_a_bench_job_that_does_not_fit_its_schema_is_refused_naming_the_field(job, field):
    with pytest.raises(payload.PayloadError) as refused:
        payload.bench_payload(job)
    assert str(refused.value).startswith(f"refused bench_item job: {field}")


def test_what_the_app_queues_fits_the_schema():
    from core.llm.client import LLMSettings

    llm = LLMSettings(model="m", base_url="http://127.0.0.1:1/v1", api_key="sk-app-only-1234567890")
    checked = payload.run_payload({"v": 1, "action": "start", "run_id": RUN_ID, "llm": payload.model_of(llm),
                                   "branch": None, "code": code_version(),
                                   "asked": asked_by(local_admin(), "start")})
    assert "sk-app" not in checked.model_dump_json() and "127.0.0.1" not in checked.model_dump_json()
    payload.run_payload(run_job(llm={"model": "m", "endpoint": "team-llama"}))
    payload.run_payload(run_job(action="branch", branch={"parent": RUN_ID, "step": 2, "changes": {
        "note": "любой текст ✓ \u200b", "plan": ["a", "b"], "reviewer": "ann"}}))


def _insert(url: str, queue_name: str, task: str, args: dict) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return con.execute("INSERT INTO procrastinate_jobs (queue_name, task_name, args) VALUES (%s, %s, %s::jsonb) "
                           "RETURNING id", (queue_name, task, json.dumps(args))).fetchone()[0]


def test_hostile_rows_are_failed_by_a_worker_and_touch_nothing(team, workers, tmp_path):  # noqa: F811
    evil = StubServer({"POST *": {}, "GET *": {}})
    settings = RunSettings("locating", 1, "sqlite", "iterrag", "m", base_url=None, source="demo")
    runs.open_store().create(RUN_ID, settings, queued=True)
    code = code_version()
    outside = tmp_path / "outside"
    hostile = {
        "key sent elsewhere": ("runs", "drive_run", run_job(code=code, llm={
            "model": "m", "base_url": evil.url, "key_url": evil.url})),
        "no code check": ("runs", "drive_run", run_job(code="")),
        "old shape": ("runs", "drive_run", {"action": "start", "run_id": RUN_ID, "llm": None, "branch": None,
                                            "code": code}),
        "paths": ("bench", "bench_item", bench_job(out=str(outside / "out"), home=str(outside / "home"),
                                                   dqa_root=str(outside))),
        "endless epochs": ("bench", "bench_item", {**bench_job(epochs=10**9), "code": code}),
        "a name out of the home": ("bench", "bench_item", {**bench_job(name="../../../outside"), "code": code}),
    }
    ids = {what: _insert(team, *row) for what, row in hostile.items()}
    worker = workers("w1", OPENAI_API_KEY="sk-worker-secret-1234567890", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and set(queue.job_states(list(ids.values())).values()) != {"failed"}:
        time.sleep(0.2)
    assert queue.job_states(list(ids.values())) == {i: "failed" for i in ids.values()}
    log = "".join(worker.lines)
    assert re.search(r"refused drive_run job: llm\.(key|base)_url: Extra inputs are not permitted", log)
    assert "refused drive_run job: code: String should match pattern" in log
    assert "refused drive_run job: v: Field required" in log
    assert "refused bench_item job: config.out: Extra inputs are not permitted" in log
    assert "refused bench_item job: config.epochs: Input should be less than or equal to 50" in log
    assert "refused bench_item job: config.name: String should match pattern" in log
    assert evil.asked == []  # no request, so no key, went to the server the row named
    assert not outside.exists() and not (tmp_path / "w1" / "bench").exists()
    record = runs.open_store().get(RUN_ID)
    assert record.status == "queued" and record.events == []  # the run itself untouched
    evil.close()


def test_a_nul_in_a_branch_note_is_refused_before_anything_is_recorded_or_queued(team):  # noqa: F811
    parent = "fedcba987654"
    store = runs.open_store()
    store.create(parent, RunSettings("locating", 1, "sqlite", "iterrag", "m", source="demo"))
    for changes in ({"note": "look again\x00"}, {"plan": ["one", "t\x00wo"]}, {"query": "SELECT '\x00'"}):
        with pytest.raises(ValueError, match=r"may hold any character but NUL"):
            runs.branch(store.get(parent), 1, runs.Opener(), who=local_admin(), **changes)
    assert [r.id for r in store.list()] == [parent] and queue.counts() == {}


def test_a_nul_in_a_branch_note_is_refused_at_the_run_pages_form_with_the_queue(team, monkeypatch, tmp_path):  # noqa: F811
    """Issue 44 section A, on the page: with the team store and its queue, the Run page's branch form given a note
    with a NUL left the branch queued with no job and showed the raw exception. It says why in one line; no run is
    recorded, no job queued."""
    from tests.test_page_run_control import branch_with_a_nul, finished_run
    from tests.page_app import isolate, shown

    isolate(monkeypatch, tmp_path / "app")
    parent = finished_run()
    at = branch_with_a_nul(parent)
    assert not at.exception, at.exception
    assert [shown(e.value) for e in at.error] == ["the note may hold any character but NUL (\\x00): remove it"]
    assert [r.id for r in runs.open_store().list()] == [parent] and queue.counts() == {}
