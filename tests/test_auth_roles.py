"""core.auth: roles from the identity provider's claims or the configured mapping, least privilege by default, every
action's least role; and the refusal to serve a network without sign-in."""
from __future__ import annotations

import pytest

from core.auth import config, exposure
from core.auth.config import ConfigError
from core.auth.roles import identity_of

MAPPING = {"roles": {"analyst": ["group:Analysts", "bob@example.test"], "admin": ["root-sub"]}}


def test_a_role_claim_names_the_role():
    who = identity_of({"sub": "s1", "email": "a@example.test", "roles": ["viewer", "analyst"]}, {})
    assert (who.name, who.role, who.signed_in) == ("s1", "analyst", True)  # an unverified e-mail names no one
    assert identity_of({"sub": "s1", "grp": "admin"}, {"role_claim": "grp"}).role == "admin"


def test_the_mapping_matches_verified_emails_case_blind_subjects_and_groups():
    assert identity_of({"sub": "x", "email": "BOB@example.test", "email_verified": True}, MAPPING).role == "analyst"
    assert identity_of({"sub": "x", "groups": ["analysts"]}, MAPPING).role == "analyst"
    assert identity_of({"sub": "root-sub", "groups": ["analysts"]}, MAPPING).role == "admin"  # the highest wins


def test_anyone_else_is_a_viewer_or_nobody():
    assert identity_of({"sub": "x", "email": "eve@example.test"}, MAPPING).role == "viewer"
    assert identity_of({"sub": "x", "roles": ["superuser"]}, {}).role == "viewer"  # an unknown role name is none
    assert identity_of({"sub": "x"}, {**MAPPING, "default_role": "none"}) is None


def test_a_mapping_naming_no_role_is_an_error():
    with pytest.raises(ConfigError, match="'owner'"):
        identity_of({"sub": "x"}, {"roles": {"owner": ["x"]}})
    with pytest.raises(ConfigError, match="default_role"):
        identity_of({"sub": "x"}, {"default_role": "root"})


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]", "LOCALHOST"])
def test_loopback_addresses_are_served_without_sign_in(address, monkeypatch):
    monkeypatch.delenv(exposure.OPT_OUT, raising=False)
    assert exposure.refusal(address, signin=False) is None


@pytest.mark.parametrize("address", ["0.0.0.0", "", None, "::", "192.0.2.7", "workbench.example.org"])
def test_a_network_address_needs_sign_in_or_the_opt_out(address, monkeypatch):
    monkeypatch.delenv(exposure.OPT_OUT, raising=False)
    assert "PLANRAG_ALLOW_ANONYMOUS=1" in exposure.refusal(address, signin=False)
    assert exposure.refusal(address, signin=True) is None
    monkeypatch.setenv(exposure.OPT_OUT, "1")
    assert exposure.refusal(address, signin=False) is None


def test_a_missing_secrets_file_is_single_user_mode_and_a_broken_one_an_error(tmp_path, monkeypatch):
    path = tmp_path / "secrets.toml"
    monkeypatch.setenv("PLANRAG_SECRETS", str(path))
    assert config.load() == {} and config.planrag() == {}
    path.write_text("[auth\n")
    with pytest.raises(ConfigError, match="cannot be read"):
        config.load()


def test_a_stop_is_recorded_under_who_stopped_it(tmp_path):
    from core.model.run_settings import RunSettings
    from core.store.runs import RunStore

    store = RunStore(tmp_path / "runs.sqlite")
    store.create("r1", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    store.update("r1", "paused", pause={"kind": "plan"})
    assert store.request_stop("r1", by="anna@example.test") == "stopped"
    assert store.request_stop("r1", by="late@example.test") == "stopped"  # already ended: nothing recorded
    assert [(r["action"], r["reviewer"]) for r in store.reviews("r1")] == [("stop", "anna@example.test")]
