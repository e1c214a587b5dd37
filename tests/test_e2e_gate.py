"""The gate in the browser (issue 36), with the project's OpenID Connect provider (tests/oidc) and Chromium: the
buttons of the gate's table (tests/gate_table.py) as a viewer and an analyst see them; a viewer's "Run N times"
(finding 1); an analyst whose role is taken away while her inbox is open (2); an unverified e-mail in another case
(3) and a display name that is an analyst's address (4) sign in as no one else; sign-out in one tab refuses the
next action of another tab and of a cookie saved before it, and claims older than ``claims_max_age_s`` ask for a
new sign-in (5); a results name that is a path creates nothing there (6); a secrets file broken while the app runs
stops every page, naming its file and line (7); "Go on with this run store", like every button of the table, is
disabled below its role and works for an admin (10)."""
from __future__ import annotations

import json

import pytest

from core.auth.gate import ACTIONS
from core.auth.roles import ROLES
from tests.gate_table import TABLE
from tests.test_e2e_browser import after_its_run, chromium  # noqa: F401 (a fixture)
from tests.test_e2e_signin import USERS, _sign_in, shown, signin_server

GATE_USERS = {
    **USERS,
    "mallory": {"email": "ADAM@example.test", "email_verified": False, "name": "Mallory", "groups": []},
    "nemo": {"name": "anna@example.test", "groups": ["ops"]},  # no e-mail: the display name is an analyst's address
}


@pytest.fixture
def gate_app(tmp_path):
    with signin_server(tmp_path, GATE_USERS) as found:
        yield found


def _caption(page) -> str:
    from playwright.sync_api import expect

    signed = page.get_by_text("Signed in as")
    expect(signed).to_be_visible()
    return signed.inner_text()


def test_the_gate_in_the_browser(chromium, gate_app, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    assert set(TABLE) == set(ACTIONS)  # a new action without a row fails here too

    app, store, run_id, secrets = gate_app
    paused = f"{app}/run?q=demo/locating/1&run={run_id}"

    # 3, 4: neither an unverified e-mail nor a display name names anyone; both are viewers known by their subject.
    for login in ("mallory", "nemo"):
        page = _sign_in(chromium, app, login, shown_as=login)
        said = _caption(page)
        assert "viewer" in said and "adam" not in said.lower() and "anna" not in said
        page.context.close()

    # The table's buttons, as a viewer and as an analyst see them (the core test asks the gate for every row);
    # History shows "Go on with this run store" when the store holds fewer runs than its marker recorded.
    marker = json.loads(store.marker_path.read_text())
    store.marker_path.write_text(json.dumps({**marker, "runs": 99}))
    by_page: dict[str, list[tuple[str, str, str]]] = {}  # each page opened once, its buttons looked at there
    for action, (least, where) in TABLE.items():
        if where is not None:
            by_page.setdefault(where[0], []).append((action, least, where[1]))
    for login, role in (("vera", "viewer"), ("anna", "analyst")):
        page = _sign_in(chromium, app, login)
        for path, buttons in by_page.items():
            page.goto(f"{app}/{path}")
            for action, least, name in buttons:
                button = page.get_by_role("button", name=name, exact=True)
                if ROLES.index(role) >= ROLES.index(least):
                    expect(button, f"{action} as {role}").to_be_enabled()
                else:
                    expect(button, f"{action} as {role}").to_be_disabled()
        if role == "analyst":  # 6: a results name that is a path is refused, nothing made there
            for name in ("../../outside-x", str(tmp_path / "abs" / "folder")):
                page.goto(f"{app}/benchmark")
                page.get_by_label("Model", exact=True).fill("m")
                page.get_by_label("Results name").fill(name)
                page.get_by_role("button", name="Start", exact=True).click()
                expect(page.get_by_text("is not a name").first).to_be_visible()
            assert not (tmp_path / "outside-x").exists() and not (tmp_path / "abs").exists()
        if role == "viewer":  # 1: "Run N times" was never disabled
            page.goto(f"{app}/run?q=demo/locating/1")
            samples = page.get_by_role("spinbutton", name="Samples")
            samples.fill("2")
            samples.press("Enter")
            expect(page.get_by_role("button", name="Run 2 times")).to_be_disabled()
        page.context.close()

    # 10: the admin goes on with the run store: the notice is gone
    page = _sign_in(chromium, app, "adam")
    page.goto(f"{app}/history")
    page.get_by_role("button", name="Go on with this run store").click()
    expect(page.get_by_role("button", name="Go on with this run store")).to_have_count(0)
    assert json.loads(store.marker_path.read_text())["runs"] == 1
    page.context.close()

    # 2: an analyst's inbox is open when her role is taken away: approve and close are refused where they act.
    page = _sign_in(chromium, app, "anna")
    page.goto(paused)
    # Opening the inbox reruns the page: the role is taken away only once that run has drawn Approve (enabled), or
    # the run would draw it disabled and the click below never reach the core (failed at load 8, 1 in 1).
    approve = page.get_by_role("button", name="Approve", exact=True)
    closed = page.locator(f".st-key-inbox-approve-{run_id}")  # in the closed inbox: not yet a button to a reader
    after_its_run(page, page.get_by_text("Inbox: 1 waiting for review").click, closed)
    expect(approve).to_be_enabled()
    granted = secrets.read_text()
    secrets.write_text(granted.replace('analyst = ["group:analysts"]', "analyst = []"))
    try:
        approve.click()
        expect(page.get_by_text("anna@" + "\u2060" + "example.test is signed in as viewer").first).to_be_visible()
        assert store.get(run_id, events=False).status == "paused" and not store.reviews(run_id)
    finally:
        secrets.write_text(granted)
    page.context.close()

    # 5: sign-out in one tab ends the session on the server: another tab's next action and a saved cookie are refused.
    page = _sign_in(chromium, app, "anna")
    saved = page.context.storage_state()
    other = page.context.new_page()
    other.goto(paused)
    expect(other.get_by_role("button", name="Approve as proposed")).to_be_enabled()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Yes, sign me out").click()  # the provider's own confirmation
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    other.get_by_role("button", name="Approve as proposed").click()
    expect(other.get_by_text("signed out: sign in again").first).to_be_visible()
    expect(other.get_by_role("button", name="Sign in")).to_be_visible()
    assert store.get(run_id, events=False).status == "paused" and not store.reviews(run_id)
    page.context.close()
    copied = chromium.new_context(storage_state=saved)
    revived = copied.new_page()
    revived.goto(f"{app}/settings")
    expect(revived.get_by_role("button", name="Sign in")).to_be_visible()
    expect(revived.get_by_text(f"{shown('anna@example.test')} signed out")).to_be_visible()
    expect(revived.get_by_role("heading", name="Settings")).to_have_count(0)
    revived.get_by_role("button", name="Sign in").click()  # asked to sign in: a new sign-in is a new session
    revived.locator("input[name=login]").fill("anna")
    revived.locator("input[name=password]").fill("any")
    revived.locator("button[type=submit]").click()
    expect(revived.get_by_text(f"Signed in as {shown('anna@example.test')}")).to_be_visible()
    revived.goto(f"{app}/settings")
    expect(revived.get_by_role("heading", name="Settings")).to_be_visible()

    # 5: claims are trusted only so long (claims_max_age_s; 15 minutes by default), then sign-in brings the
    # provider's roles again: anna removed from the analysts group at the provider is a viewer from then on.
    users = tmp_path / "users.json"
    people = json.loads(users.read_text())
    users.write_text(json.dumps({**people, "anna": {**people["anna"], "groups": []}}))
    granted = secrets.read_text()
    secrets.write_text(granted.replace('default_role = "viewer"', 'default_role = "viewer"\nclaims_max_age_s = 1'))
    try:
        revived.wait_for_timeout(1100)  # the claims are now older than a second (a precondition, not a measure)
        revived.goto(f"{app}/settings")
        expect(revived.get_by_text("has expired: sign in again")).to_be_visible()
        expect(revived.get_by_role("heading", name="Settings")).to_have_count(0)
        revived.get_by_role("button", name="Sign in").click()  # a new sign-in: the provider's claims of now
        revived.locator("input[name=login]").fill("anna")
        revived.locator("input[name=password]").fill("any")
        revived.locator("button[type=submit]").click()
        revived.wait_for_url(f"{app}/**")
        expect(revived.get_by_text("has expired").or_(revived.get_by_text("Signed in as")).first).to_be_visible()
    finally:
        secrets.write_text(granted)
    revived.goto(f"{app}/settings")  # the new sign-in, within the default age: a viewer now
    expect(revived.get_by_text(f"Signed in as {shown('anna@example.test')} · viewer")).to_be_visible()
    copied.close()

    # 7: a secrets file broken while the app runs (one missing quote) stops every page, naming its file and line;
    # it never means "no sign-in" (everyone an admin)
    broken = granted.replace('default_role = "viewer"', 'default_role = "viewer')
    secrets.write_text(broken)
    try:
        page = chromium.new_page()
        page.goto(f"{app}/settings")
        said = page.get_by_text("cannot be read")
        expect(said).to_be_visible()
        assert str(secrets) in said.inner_text() and "line" in said.inner_text()
        expect(page.get_by_role("heading", name="Settings")).to_have_count(0)
        expect(page.get_by_role("button", name="Sign in")).to_have_count(0)
        page.close()
    finally:
        secrets.write_text(granted)
