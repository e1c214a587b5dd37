"""Model credentials stay with the server they were configured for (issue 26): each key finding of the issue, with
a logging stub server on localhost that must never receive a key it was not configured with."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.auth import endpoints
from core.auth.config import ConfigError
from core.llm.checks import check_llm
from core.llm.client import LLMNotConfigured, bound_key, open_llm
from core.config.settings import LLMSettings
from tests.keystub import KeyStub

ROOT = Path(__file__).resolve().parent.parent
OPERATOR_KEY = "sk-operator-0123456789abcdef"
RESUMER_KEY = "sk-resumer-0123456789abcdef"
TEAM_KEY = "sk-team-endpoint-0123456789"
REPLAY = ROOT / "assets" / "replays" / "demo_locating_1_sql_planrag.json"


@pytest.fixture
def stub():
    servers = []

    def start(replies=None):
        servers.append(KeyStub(replies))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "PLANRAG_SECRETS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_settings_test_of_a_visitors_url_never_gets_the_operators_key(stub, clean_env):
    """Finding 1: on Settings, a visitor's own base URL with the key left empty, then Test."""
    clean_env.setenv("OPENAI_API_KEY", OPERATOR_KEY)  # the operator's key, for OpenAI's API
    visitor = stub()
    session = LLMSettings()  # what the page starts from: the environment's
    from dataclasses import replace

    check_llm(replace(session, model="gpt-4o", base_url=visitor.url))  # the page's "keep the key" form
    assert visitor.keys and not visitor.got(OPERATOR_KEY)
    assert visitor.keys == ["Bearer unused"] * len(visitor.keys)


def test_the_env_key_goes_to_the_env_base_url_and_nowhere_else(stub, clean_env):
    mine, other = stub(), stub()
    clean_env.setenv("OPENAI_API_KEY", OPERATOR_KEY)
    clean_env.setenv("OPENAI_BASE_URL", mine.url + "/")  # a trailing slash names the same server
    check_llm(LLMSettings(model="m"))
    assert mine.got(OPERATOR_KEY)
    from dataclasses import replace

    check_llm(replace(LLMSettings(model="m"), base_url=other.url))
    assert other.keys and not other.got(OPERATOR_KEY)


@pytest.mark.parametrize("other", ["http://127.0.0.1:1/v1", "http://localhost:8000/v1", "https://api.openai.com/v2",
                                   "http://api.openai.com/v1", "https://api.openai.com.evil.test/v1",
                                   "https://user@api.openai.com:444/v1"])
def test_a_key_for_openai_is_bound_to_openai_alone(other):
    settings = LLMSettings(api_key=OPERATOR_KEY, key_url=None)
    assert bound_key(settings, None) == OPERATOR_KEY
    assert bound_key(settings, "https://api.openai.com/v1/") == OPERATOR_KEY
    assert bound_key(settings, other) is None


def test_openai_itself_without_its_key_fails_clearly(clean_env):
    settings = LLMSettings(api_key=OPERATOR_KEY, key_url="http://127.0.0.1:9/v1", base_url=None)
    with pytest.raises(LLMNotConfigured, match="the key set is for http://127.0.0.1:9/v1"):
        open_llm("gpt-4o", settings)


def _core(*args, env: dict, check=True) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_SECRETS"}
    done = subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**base, **env}, timeout=300)
    if check and done.returncode not in (0, 3):
        raise AssertionError(done.stdout + done.stderr)
    return done


def _paused_run(home: Path, env: dict, *model: str) -> str:
    done = _core("run", "--source", "demo", "--scenario", "locating", "--question", "1", "--db", "sqlite",
                 "--technique", "planrag", *model, "--hitl", "approve-every-plan", "--json", env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])["run_id"]


def test_resuming_someone_elses_run_never_sends_my_key_to_their_server(stub, tmp_path):
    """Finding 2: a run started against the starter's server, resumed by another user with their own key."""
    starter = stub(json.loads(REPLAY.read_text()))
    home = {"PLANRAG_HOME": str(tmp_path)}
    run_id = _paused_run(tmp_path, {**home, "OPENAI_API_KEY": OPERATOR_KEY, "OPENAI_BASE_URL": starter.url},
                         "--llm", "stub")
    assert starter.got(OPERATOR_KEY)  # the starter's own key went to the starter's own server
    sent = len(starter.keys)
    done = _core("run", "--resume", run_id, "--pause", "p1", "--approve", "--json",
                 env={**home, "OPENAI_API_KEY": RESUMER_KEY})
    assert len(starter.keys) > sent  # the run went on against the starter's server...
    assert not starter.got(RESUMER_KEY)  # ...without the resumer's key
    assert done.returncode in (0, 3), done.stderr


def test_a_base_url_flag_alone_never_gets_the_env_key(stub, tmp_path):
    elsewhere = stub(json.loads(REPLAY.read_text()))
    _paused_run(tmp_path, {"PLANRAG_HOME": str(tmp_path), "OPENAI_API_KEY": OPERATOR_KEY},
                "--llm", "stub", "--base-url", elsewhere.url)
    assert elsewhere.keys and not elsewhere.got(OPERATOR_KEY)


def _secrets(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "secrets.toml"
    path.write_text(f'[planrag.endpoints.team]\nmodel = "stub"\nkey_env = "TEAM_KEY"\nbase_url = "{url}"\n')
    return path


def test_an_endpoint_run_resumed_by_anyone_uses_the_endpoints_own_key(stub, tmp_path):
    team = stub(json.loads(REPLAY.read_text()))
    secrets = _secrets(tmp_path, team.url)
    env = {"PLANRAG_HOME": str(tmp_path), "PLANRAG_SECRETS": str(secrets)}
    run_id = _paused_run(tmp_path, {**env, "TEAM_KEY": TEAM_KEY, "OPENAI_API_KEY": OPERATOR_KEY},
                         "--endpoint", "team")
    assert team.got(TEAM_KEY) and not team.got(OPERATOR_KEY)
    sent = len(team.keys)
    _core("run", "--resume", run_id, "--pause", "p1", "--approve", "--json",
          env={**env, "TEAM_KEY": TEAM_KEY, "OPENAI_API_KEY": RESUMER_KEY})
    assert len(team.keys) > sent and not team.got(RESUMER_KEY)
    assert all(k == f"Bearer {TEAM_KEY}" for k in team.keys)


def test_resuming_a_run_whose_endpoint_is_gone_fails_clearly_and_keeps_the_pause(stub, tmp_path):
    team = stub(json.loads(REPLAY.read_text()))
    secrets = _secrets(tmp_path, team.url)
    env = {"PLANRAG_HOME": str(tmp_path), "PLANRAG_SECRETS": str(secrets), "TEAM_KEY": TEAM_KEY}
    run_id = _paused_run(tmp_path, env, "--endpoint", "team")
    secrets.write_text("")  # the admin removed the endpoint
    sent = len(team.keys)
    done = _core("run", "--resume", run_id, "--pause", "p1", "--approve", env={**env, "OPENAI_API_KEY": RESUMER_KEY},
                 check=False)
    assert done.returncode not in (0, 3)
    assert "model endpoint 'team' is not configured on this server" in done.stderr
    assert len(team.keys) == sent
    from core.store.runs import RunStore

    assert RunStore(tmp_path / "runs.sqlite").get(run_id, events=False).status == "paused"  # still reviewable


def test_endpoints_are_checked_and_never_show_their_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAM_KEY", TEAM_KEY)
    entry = {"model": "m", "base_url": "http://h/v1", "key_env": "TEAM_KEY"}
    team = endpoints.endpoints({"endpoints": {"team": entry}})["team"]
    assert TEAM_KEY not in repr(team) and TEAM_KEY not in team.key_state() and "set" in team.key_state()
    settings = team.llm_settings()
    assert bound_key(settings) == TEAM_KEY and bound_key(settings, "http://elsewhere/v1") is None
    with pytest.raises(ConfigError, match="needs a model"):
        endpoints.endpoints({"endpoints": {"x": {"base_url": "http://h/v1"}}})
    with pytest.raises(ConfigError, match="unknown entries: api_key"):
        endpoints.endpoints({"endpoints": {"x": {"model": "m", "api_key": "k"}}})
