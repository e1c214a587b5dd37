"""The authorization gate (core.auth.gate) through core: every action by every role from one table
(tests/gate_table.py), the job functions asking it where they act (issue 36 findings 1, 2, 9 of the run and
benchmark paths), identities that cannot be borrowed (3, 4), sessions that end (5), names that are not paths (6)
and no key on a redirect to another origin (8)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.auth import gate, sessions
from core.auth.gate import ACTIONS, Refused, authorize
from core.auth.roles import (CLAIMS_MAX_AGE_S, LOCAL_USER, ROLES, Identity, identity_of, local_admin,
                             local_operator)
from core.model.run_settings import Review, RunSettings
from core.backends.registry import BACKENDS
from tests.gate_table import TABLE

NOW = int(time.time())
ISS = "https://idp.example.test"
MAPPING = {"roles": {"analyst": ["group:analysts", "bob@example.test"], "admin": ["adam@example.test"]}}


def person(role: str, login: str | None = None, **claims) -> Identity:
    """A signed-in identity of ``role`` from a verified token of ``login`` (default: the role's name), signed in now
    (not when the module was imported: a suite on several processes reaches a test long after, and claims older than
    15 minutes have expired)."""
    now = int(time.time())
    base = {"iss": ISS, "sub": login or role, "iat": now, "exp": now + 3600, "email": f"{login or role}@example.test",
            "email_verified": True, "roles": [role]}
    return identity_of({**base, **claims}, {})


@pytest.fixture
def home(tmp_path, monkeypatch):
    from core.config import settings

    monkeypatch.setattr(settings, "DATA_HOME", tmp_path)
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path))
    return tmp_path


class Opened(Exception):
    """The action went past the gate and asked for its runtime (none is opened in these tests)."""


def no_runtime():
    raise Opened("past the gate")


RUN = "0123456789ab"
DEMO = RunSettings("locating", 1, "sqlite", "planrag", "m", source="demo", hitl="approve-every-plan")
DEMO_RUN = RunSettings("locating", 1, "sqlite", "iterrag", "m", source="demo")


def paused(kind: str = "plan"):
    """Set-up: a run stored as paused at a ``kind`` pause (p1), without running anything; its record."""
    import core.jobs.runs as jobs

    store = jobs.open_store()
    store.create(RUN, DEMO)
    store.update(RUN, "paused", pause={"id": "p1", "kind": kind, "plan": ["look"], "query": "SELECT 1"})
    return store.get(RUN, events=False)


def nothing():
    return None


def _start(who, _):
    import core.jobs.runs as jobs

    job = jobs.start(DEMO_RUN, no_runtime, who=who)
    job.join(30)
    assert jobs.open_store().started_by(job.run_id) == who.name


def _samples(who, _):
    import core.jobs.runs as jobs

    for run_id in jobs.samples(DEMO_RUN, 2, no_runtime, who=who):
        jobs.job(run_id).join(30)


def _review(action: str):
    def act(who, record):
        import core.jobs.runs as jobs

        with pytest.raises(Opened):  # past the gate: on to the runtime
            jobs.resume(record, Review.approve(), no_runtime, pause_id="p1", who=who, action=action)
    return act


def _resume(who, record):
    import core.jobs.runs as jobs

    with pytest.raises(Opened):
        jobs.proceed(record, no_runtime, who=who)


def _branch(who, record):
    import core.jobs.runs as jobs

    with pytest.raises(Opened):
        jobs.branch(record, 1, no_runtime, who=who, note="x")


def _stop(action: str):
    def act(who, record):
        import core.jobs.runs as jobs

        assert jobs.stop(record.id, who=who, action=action) == "stopped"
        assert jobs.open_store().reviews(record.id)[-1]["reviewer"] == who.name
    return act


def _override(who, _):
    from core.actions.grades import override, restore

    assert override(RUN, DEMO, None, who=who, note="none named").by == who.name
    assert restore(RUN, who=who)


def _bench(who, _):
    import core.jobs.benchmarks as benchmarks
    from core.benchmark.smoke import smoke_config

    benchmarks.start(smoke_config(techniques=["iterrag"]), who=who).join(120)


def benchmarked():
    """Set-up: a results set with results (starting into it again is a rerun)."""
    _bench(local_admin(), None)


def benchmark_job():
    """Set-up: a benchmark's job (not started)."""
    import core.jobs.benchmarks as benchmarks
    from core.benchmark.runner import Bench
    from core.benchmark.smoke import smoke_config

    return benchmarks.BenchJob(Bench(smoke_config()))


def _bench_stop(who, job):
    import core.jobs.benchmarks as benchmarks

    benchmarks.stop(job, who=who)


def _test_connections(who, _):
    from core.actions import choices
    from core.config.settings import DatabaseSettings

    db = DatabaseSettings(neo4j_uri=None)
    assert {a.backend for a in choices.test_connections(db, db, who=who)} == set(BACKENDS)


def _settings(who, _):
    from core.actions import choices
    from core.model.run_settings import Limits

    assert choices.use_limits(Limits(), who=who) == Limits()


def _endpoints(who, _):
    from dataclasses import replace

    from core.actions import choices
    from core.config.settings import LLMSettings

    current = LLMSettings()
    chosen = replace(current, model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-own-0123456789")
    assert choices.use_model(chosen, current, who=who) is chosen


def _databases(who, _):
    from core.actions import choices
    from core.config.settings import DatabaseSettings

    choices.use_databases(DatabaseSettings(), who=who)


def _server_paths(who, _):
    from core import scenarios
    from core.actions import choices

    try:
        assert choices.use_scenarios_folder("/nonexistent-scenarios", who=who).name == "nonexistent-scenarios"
    finally:
        scenarios.use_folder(None)


def _rescan(who, _):
    from core.actions import choices

    choices.rescan(who=who)


def replaced_store():
    """Set-up: the run store as a page finds it after it was replaced outside the app (its notice)."""
    import core.jobs.runs as jobs

    store = jobs.open_store()
    store.notice = "replaced outside the app"
    return store


def _store_switch(who, store):
    import core.jobs.runs as jobs

    jobs.go_on_with_store(store, who=who)
    assert store.notice is None


#: Every action of the gate: a set-up, and the action carried out as ``who`` by the core function that does it.
THROUGH_CORE = {
    "start": (nothing, _start),
    "samples": (nothing, _samples),
    "review": (paused, _review("review")),
    "query_decision": (lambda: paused("query"), _review("review")),  # a review of a query pause decides the query
    "inbox_approve": (paused, _review("inbox_approve")),
    "inbox_reject": (paused, _review("inbox_reject")),
    "inbox_close": (paused, _stop("inbox_close")),
    "stop": (paused, _stop("stop")),
    "resume": (paused, _resume),
    "branch": (paused, _branch),
    "override": (nothing, _override),
    "benchmark_start": (nothing, _bench),
    "benchmark_stop": (benchmark_job, _bench_stop),
    "benchmark_rerun": (benchmarked, _bench),
    "test_connections": (nothing, _test_connections),
    "rescan": (nothing, _rescan),
    "store_switch": (replaced_store, _store_switch),
    "settings": (nothing, _settings),
    "endpoints": (nothing, _endpoints),
    "databases": (nothing, _databases),
    "server_paths": (nothing, _server_paths),
}


def _traces(home) -> tuple:
    """What an action leaves behind: runs, their starts, reviews and stops, overrides, benchmark results."""
    import core.jobs.runs as jobs
    from core.store.overrides import OverrideStore

    store = jobs.open_store()
    bench = sorted(str(p.relative_to(home)) for p in (home / "bench").rglob("*")) if (home / "bench").exists() else []
    return ([(r.id, r.status) for r in store.list()], store.db.rows("SELECT run_id, action, reviewer FROM reviews"),
            OverrideStore().all(), bench)


def test_the_table_has_a_row_for_every_action_and_no_other():
    assert set(TABLE) == set(ACTIONS) == set(gate.NEEDS) == set(THROUGH_CORE)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("role", ROLES)
def test_every_action_by_every_role_through_core_as_the_table_says(action, role, home):
    """Each action carried out by its core function as a signed-in ``role``: refused below the table's least
    role, leaving nothing behind; past the gate from it on."""
    least, _ = TABLE[action]
    assert gate.NEEDS[action][0] == least
    who = person(role)
    setup, act = THROUGH_CORE[action]
    ready = setup()
    before = _traces(home)
    if ROLES.index(role) >= ROLES.index(least):
        act(who, ready)
    else:
        with pytest.raises(Refused, match=f"{role}@example.test is signed in as {role}, and only"):
            act(who, ready)
        assert _traces(home) == before
    with pytest.raises(Refused, match="not signed in"):
        authorize(None, action)
    assert authorize(local_admin(), action).name == LOCAL_USER  # single-user mode: the local user, an admin
    assert authorize(local_operator(), action).name == "local operator"  # the command line: the machine's operator


def test_an_unknown_action_is_an_error():
    with pytest.raises(ValueError, match="unknown action 'run'"):
        authorize(local_admin(), "run")


# ---------------------------------------------------------------------------------------------- identities (3, 4)

def test_an_unverified_email_in_another_case_is_not_the_admin():
    """Finding 3: email_verified false and the admin's address in capitals signed in as admin."""
    forged = identity_of({"iss": ISS, "sub": "mallory", "email": "ADAM@example.test", "email_verified": False},
                         MAPPING)
    assert (forged.role, forged.name, forged.email) == ("viewer", f"mallory at {ISS}", None)
    verified = identity_of({"iss": ISS, "sub": "adam", "email": "ADAM@example.test", "email_verified": True},
                           MAPPING)
    assert (verified.role, verified.name) == ("admin", "adam@example.test")  # case-blind once verified
    # a provider without email_verified, trusted by the operator for it
    trusted = {**MAPPING, "unverified_email_providers": ["corp"]}
    assert identity_of({"iss": ISS, "sub": "a", "email": "adam@example.test", "provider": "corp"},
                       trusted).role == "admin"
    assert identity_of({"iss": ISS, "sub": "a", "email": "adam@example.test", "provider": "other"},
                       trusted).role == "viewer"


def test_a_display_name_never_names_the_identity():
    """Finding 4: a user without e-mail whose name is an analyst's address was recorded as that analyst."""
    who = identity_of({"iss": ISS, "sub": "u-77", "name": "bob@example.test"}, MAPPING)
    assert (who.name, who.role) == (f"u-77 at {ISS}", "viewer")
    assert identity_of({"iss": ISS, "sub": "BOB"}, {"roles": {"admin": ["bob"]}}).role == "viewer"


# ---------------------------------------------------------------------------------------------- sessions (5)

def test_a_session_ends_at_sign_out_at_the_tokens_expiry_and_when_its_claims_are_old(home):
    analyst = person("analyst", iat=NOW, exp=NOW + 3600)
    assert analyst.valid_until == NOW + CLAIMS_MAX_AGE_S  # claims re-read at most every 15 minutes
    authorize(analyst, "review", now=NOW + 60)
    with pytest.raises(Refused, match="has expired: sign in again"):
        authorize(analyst, "review", now=NOW + CLAIMS_MAX_AGE_S)
    short = person("analyst", iat=NOW, exp=NOW + 300)  # the ID token's own expiry comes first
    with pytest.raises(Refused, match="has expired"):
        authorize(short, "review", now=NOW + 300)
    configured = identity_of({"iss": ISS, "sub": "a", "iat": NOW, "exp": NOW + 7200, "roles": ["analyst"]},
                             {"claims_max_age_s": 3600})
    assert configured.valid_until == NOW + 3600

    sessions.end(analyst)  # signed out in one tab: every tab and every copy of the cookie is refused
    with pytest.raises(Refused, match="signed out: sign in again"):
        authorize(analyst, "review", now=NOW + 60)
    again = person("analyst", iat=NOW + 120, exp=NOW + 3720)  # a new sign-in: a new token
    assert authorize(again, "review", now=NOW + 130) is again


# ---------------------------------------------------------------------------------------------- core.jobs (1, 2)

def _paused(home) -> tuple:
    """A run paused at its plan (the recorded replay), as the CLI leaves it; its record."""
    import core.jobs.runs as jobs
    from core.agents.runtime import AgentRuntime
    from tests.test_e2e_signin import REPLAY

    runtime = AgentRuntime(home)
    runtime.start(RunSettings("locating", 1, "sqlite", "planrag", f"replay:{REPLAY}", source="demo",
                              hitl="approve-every-plan"))
    runtime.close()
    store = jobs.open_store()
    return store, store.list()[0]


def test_a_viewer_starts_no_run_and_samples_none(home):
    """Finding 1: a viewer's "Run 2 times" started two runs on the operator's key; no run said who started it."""
    import core.jobs.runs as jobs

    settings = RunSettings("locating", 1, "sqlite", "iterrag", "m", source="demo")
    viewer = person("viewer")
    with pytest.raises(Refused, match="only analyst or admin may start samples"):
        jobs.samples(settings, 2, jobs.Opener(), who=viewer)
    with pytest.raises(Refused, match="may start runs"):
        jobs.start(settings, jobs.Opener(), who=viewer)
    store = jobs.open_store()
    assert store.list() == [] and not store.db.rows("SELECT * FROM reviews")

    from tests.test_e2e_signin import REPLAY
    analyst = person("analyst", "anna")
    replay = RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{REPLAY}", source="demo")
    job = jobs.start(replay, jobs.Opener(), who=analyst)
    job.join(60)
    assert store.started_by(job.run_id) == "anna@example.test"
    assert store.reviews(job.run_id) == []  # the start is not a review


def test_the_inbox_and_every_run_action_ask_the_gate_where_they_act(home):
    """Finding 2: an analyst whose role was removed approved a pause and closed a run from an open inbox."""
    import core.jobs.runs as jobs

    store, record = _paused(home)
    demoted = person("viewer", "anna")
    for action in ("inbox_approve", "inbox_reject", "review"):
        with pytest.raises(Refused, match="anna@example.test is signed in as viewer"):
            jobs.resume(record, Review.approve(), jobs.Opener(), pause_id="p1", who=demoted, action=action)
    with pytest.raises(Refused, match="may close runs from the inbox"):
        jobs.stop(record.id, who=demoted, action="inbox_close")
    with pytest.raises(Refused, match="may stop runs"):
        jobs.stop(record.id, who=demoted)
    with pytest.raises(Refused, match="may resume runs"):
        jobs.proceed(record, jobs.Opener(), who=demoted)
    with pytest.raises(Refused, match="may branch runs"):
        jobs.branch(record, 1, jobs.Opener(), who=demoted, note="x")
    assert store.get(record.id, events=False).status == "paused" and store.reviews(record.id) == []
    query = type(record)(**{**record.__dict__, "pause": {**record.pause, "kind": "query"}})
    with pytest.raises(Refused, match="may approve or reject a query"):
        jobs.resume(query, Review.approve(), jobs.Opener(), pause_id="p1", who=demoted)

    analyst = person("analyst", "anna", name="Someone Else")
    branched = jobs.branch(record, 1, jobs.Opener(), who=analyst, note="check the totals")
    branched.join(60)
    assert store.started_by(branched.run_id) == "anna@example.test"
    jobs.stop(record.id, who=analyst, action="inbox_close")
    assert [(r["action"], r["reviewer"]) for r in store.reviews(record.id)] == [("stop", "anna@example.test")]


def test_benchmarks_ask_the_gate(home):
    import core.jobs.benchmarks as benchmarks
    from core.benchmark.smoke import smoke_config
    from core.store.runs import RunStore

    with pytest.raises(Refused, match="may start benchmarks"):
        benchmarks.start(smoke_config(), who=person("viewer"))
    assert not (home / "bench").exists() or not any((home / "bench").iterdir())
    job = benchmarks.start(smoke_config(), who=person("analyst"))
    with pytest.raises(Refused, match="may stop benchmarks"):
        benchmarks.stop(job, who=person("viewer"))
    job.join(120)
    store = RunStore(home / "runs.sqlite")
    assert {store.started_by(r.id) for r in store.list()} == {"analyst@example.test"}  # its runs say who


# ---------------------------------------------------------------------------------------------- names (6)

@pytest.mark.parametrize("name", ["/some/abs/folder", "../../x", "..", "a/b", "a\\b", "x" * 65, " lead", ""])
def test_a_results_name_is_a_name_never_a_path(name, home):
    """Finding 6: "Results name" /some/abs/folder or ../../x made the server write there."""
    from core.benchmark.config import BenchConfig

    with pytest.raises(ValueError, match="is not a name"):
        BenchConfig(["planrag"], "m", name=name)
    assert BenchConfig(["planrag"], "m", name="my set-1_2.b").name == "my set-1_2.b"


def test_a_benchmark_reads_no_path_an_analyst_typed(home, tmp_path):
    """A question set or a replay named by path is a file of the server: the admin's (the gate's server_paths),
    asked where the benchmark starts; the shipped transcripts (the smoke benchmark) are anyone's who may start."""
    import core.jobs.benchmarks as benchmarks
    from core.benchmark.config import BenchConfig
    from core.benchmark.smoke import smoke_config
    from tests.test_e2e_signin import REPLAY

    analyst = person("analyst")
    typed = tmp_path / "elsewhere"
    typed.mkdir()
    (typed / "replay.json").write_text(REPLAY.read_text())
    for config in (BenchConfig(["iterrag"], "m", dqa_root=str(typed), name="set"),
                   BenchConfig(["iterrag"], f"replay:{typed / 'replay.json'}", source="demo", name="set")):
        with pytest.raises(Refused, match="may change the files and folders the server reads"):
            benchmarks.start(config, who=analyst, usual_root=None)
    assert not (home / "bench").exists()
    own = BenchConfig(["iterrag"], f"replay:{REPLAY.parent}", source="demo", questions="1", scenario="locating",
                      dqa_root=str(typed), name="own")
    benchmarks.start(own, who=analyst, usual_root=typed).join(120)  # the session's own folder: past the gate
    benchmarks.start(smoke_config(techniques=["iterrag"]), who=analyst).join(120)
    assert (home / "bench" / "smoke").is_dir()


# ---------------------------------------------------------------------------------------------- endpoint (9)

def test_a_benchmarks_runs_record_their_endpoint(home, monkeypatch):
    """Finding 9: a benchmark's runs did not record their endpoint, so a resume or branch did not use it."""
    from core.auth import endpoints
    from core.benchmark.runner import Bench, BenchConfig
    from core.store.runs import RunStore
    from tests.turn_stub import TurnStub

    stub = TurnStub(["Thought: I now know the answer.\nFinal answer: You should allocate the merchant to krakow."])
    secrets = home / "secrets.toml"
    secrets.write_text(f'[planrag.endpoints.team]\nmodel = "m"\nbase_url = "{stub.url}/v1"\n'
                       'key = "sk-team-0123456789abcdef"\n')
    monkeypatch.setenv("PLANRAG_SECRETS", str(secrets))
    try:
        team = endpoints.get("team")
        bench = Bench(BenchConfig(["iterrag"], "m", source="demo", scenario="locating", questions="1", name="team",
                                  llm_settings=team.llm_settings(), home=home, cache=False))
        bench.run()
    finally:
        stub.close()
    runs = RunStore(home / "runs.sqlite").list()
    assert [r.settings.endpoint for r in runs] == ["team"]


# ---------------------------------------------------------------------------------------------- redirects (8)

class _Recorder(BaseHTTPRequestHandler):
    seen: list = []
    target = ""

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).seen.append((self.server.server_port, self.path, self.headers.get("Authorization")))
        if type(self).target and self.server.server_port != int(type(self).target.rsplit(":", 1)[1]):
            self.send_response(307)
            self.send_header("Location", type(self).target + self.path)
            self.end_headers()
            return
        body = json.dumps({"default_generation_settings": {"n_ctx": 4096}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


def test_no_key_follows_a_redirect_to_another_origin():
    """Finding 8: a model server answering 307 to another host made the probes carry the key there."""
    from core.llm import server_info

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Recorder) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    configured, foreign = servers
    _Recorder.seen, _Recorder.target = [], f"http://localhost:{foreign.server_port}"
    try:
        key = "sk-operator-NEVER-ELSEWHERE-0123"
        server_info.context_window(f"http://127.0.0.1:{configured.server_port}/v1", "m", key)
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
    to_foreign = [auth for port, _, auth in _Recorder.seen if port == foreign.server_port]
    assert to_foreign, "the redirect was followed"
    assert all(key not in (auth or "") for auth in to_foreign)
    assert any(key in (auth or "") for port, _, auth in _Recorder.seen if port == configured.server_port)


def test_history_says_who_started_a_run(home, monkeypatch):
    """Finding 1's other half: no run recorded who started it."""
    import core.jobs.runs as jobs
    from tests.page_app import isolate, open_file
    from tests.test_e2e_signin import REPLAY

    isolate(monkeypatch, home)
    settings = RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{REPLAY}", source="demo")
    job = jobs.start(settings, jobs.Opener(), who=person("analyst", "anna"))
    job.join(60)
    at = open_file("pages/history.py", history_run=job.run_id)
    assert any("anna" in c.value and "Started by" in c.value for c in at.caption)
