"""Sign-in and roles end to end (issue 26): a real OpenID Connect provider (the npm package oidc-provider, run by the
machine's Node.js from tests/oidc) on localhost, the app started with sign-in configured in a secrets file, driven
in headless Chromium. A viewer, an analyst and an admin sign in through the provider's login form; each sees and can
do exactly what the role allows. A viewer's forged request to approve a pause (the approve button's trigger sent on
the app's WebSocket, as a modified client would) is run by the server and leaves the pause untaken (Streamlit drops
a disabled widget's value); an analyst whose role is taken away while the page is open clicks the still-enabled
approve button and is refused by the app's own check where the review is applied; the analyst's approval is recorded
under the analyst's e-mail. The admin sees the model endpoint and whether its key is
set, never the key. The app's WebSocket refuses a Host that is not configured (DNS rebinding)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.store.runs import RunStore
from tests.conftest import require
from ui.untrusted import JOINER
from tests.test_e2e_browser import chromium, free_port, wait_healthy  # noqa: F401 (chromium: a fixture)

ROOT = Path(__file__).resolve().parent.parent
OIDC = Path(__file__).parent / "oidc"
REPLAY = ROOT / "assets" / "replays" / "demo_locating_1_sql_planrag.json"
TEAM_KEY = "sk-team-endpoint-NEVER-SHOWN-0123456789"
USERS = {  # login -> claims: roles come from the [planrag.roles] mapping below
    "vera": {"email": "vera@example.test", "name": "Vera Viewer", "groups": []},
    "anna": {"email": "anna@example.test", "name": "Anna Analyst", "groups": ["analysts"]},
    "adam": {"email": "adam@example.test", "name": "Adam Admin", "groups": ["ops"]},
}
WAIT_S = 60  # a hang guard, never a speed target


def shown(email: str) -> str:
    """An e-mail address as the pages show untrusted text (ui.untrusted.md): a word joiner after the @, so it is
    never made a link."""
    return email.replace("@", "@" + JOINER)


def _node() -> str:
    node = shutil.which("node")
    if not node:
        require("node", "Node.js not found (the test's OpenID Connect provider runs on it)")
    if not (OIDC / "node_modules" / "oidc-provider").is_dir():
        require("node", f"oidc-provider is not installed: run `npm ci --prefix {OIDC}`")
    return node


def _wait_line(process: subprocess.Popen, text: str) -> None:
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        line = process.stdout.readline()
        if text in line:
            return
        assert process.poll() is None, f"the provider exited: {line}"
    raise AssertionError(f"no {text!r} from the provider")


@contextlib.contextmanager
def _provider(port: int, redirect: str, users: dict | Path = USERS):
    """The provider knowing ``users`` (a dict, or a JSON file it reads again at each sign-in)."""
    given = str(users) if isinstance(users, Path) else json.dumps(users)
    process = subprocess.Popen([_node(), str(OIDC / "provider.mjs"), str(port), redirect, given],
                               cwd=OIDC, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_line(process, "ready")
        yield f"http://localhost:{port}"
    finally:
        process.terminate()
        process.wait(120)  # a hang guard: a loaded machine may take a while to stop a server


def _paused_run(home: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "core", "run", "--source", "demo", "--scenario", "locating",
                           "--question", "1", "--db", "sqlite", "--technique", "planrag", "--llm",
                           f"replay:{REPLAY}", "--hitl", "approve-every-plan", "--json"],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PLANRAG_HOME": str(home)})
    assert done.returncode == 3, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])["run_id"]


@pytest.fixture
def signin_app(tmp_path):
    """(app URL, run store, paused run id, secrets file): the app with sign-in against a local provider, a run paused at p1."""
    with signin_server(tmp_path) as found:
        yield found


@contextlib.contextmanager
def signin_server(tmp_path: Path, users: dict = USERS):
    """The app with sign-in against a local provider knowing ``users`` (kept in ``tmp_path/users.json``: a change
    there is the provider's at the next sign-in), a run paused at p1: (app URL, run store, paused run id, secrets
    file)."""
    app_port, op_port = free_port(), free_port()
    app = f"http://127.0.0.1:{app_port}"
    home = tmp_path / "home"
    run_id = _paused_run(home)
    (tmp_path / "users.json").write_text(json.dumps(users))
    with _provider(op_port, f"{app}/oauth2callback", tmp_path / "users.json") as issuer:
        secrets = tmp_path / "secrets.toml"
        secrets.write_text(f"""
[auth]
redirect_uri = "{app}/oauth2callback"
cookie_secret = "test-cookie-secret-0123456789abcdef"
client_id = "workbench"
client_secret = "workbench-test-secret"
server_metadata_url = "{issuer}/.well-known/openid-configuration"
client_kwargs = {{ prompt = "login" }}  # oidc-provider knows no select_account prompt (Streamlit's default)

[planrag]
default_role = "viewer"

[planrag.roles]
analyst = ["group:analysts"]
admin = ["adam@example.test"]

[planrag.endpoints.team]
model = "team-model"
base_url = "http://127.0.0.1:9/v1"
key_env = "TEAM_KEY"
""")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
        env.update(PLANRAG_HOME=str(home), PLANRAG_SECRETS=str(secrets), TEAM_KEY=TEAM_KEY)
        with (tmp_path / "server.log").open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(app_port),
                 "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
                 "--secrets.files", str(secrets)],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_healthy(app, process)
                yield app, RunStore(home / "runs.sqlite"), run_id, secrets
            finally:
                process.terminate()
                process.wait(120)  # a hang guard: a loaded machine may take a while to stop a server


def _sign_in(browser, app: str, login: str, forge: dict | None = None, shown_as: str | None = None):
    """A new browser context signed in as ``login`` through the provider's form; its page. ``forge``: filled with
    the WebSocket route's parts so a test can send a message the page never would; ``shown_as``: the name the page
    says is signed in (default the user's e-mail)."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1500, "height": 1300})
    if forge is not None:
        context.route_web_socket("**/_stcore/stream", lambda ws: _relay(ws, forge))
    page = context.new_page()
    page.set_default_timeout(WAIT_S * 1000)
    page.goto(app)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("any")
    page.locator("button[type=submit]").click()
    expect(page.get_by_text(f"Signed in as {shown_as or shown(USERS[login]['email'])}")).to_be_visible()
    return page


def _relay(ws, forge: dict) -> None:
    """Pass the page's WebSocket through, keeping its last rerun request and the approve buttons' widget ids."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    server = ws.connect_to_server()
    forge["server"] = server

    def from_page(message):
        if isinstance(message, bytes):
            back = BackMsg()
            back.ParseFromString(message)
            if back.WhichOneof("type") == "rerun_script":
                forge["rerun"] = back
        server.send(message)

    def from_server(message):
        if isinstance(message, bytes):
            forward = ForwardMsg()
            forward.ParseFromString(message)
            element = forward.delta.new_element
            if element.WhichOneof("type") == "button" and element.button.id.endswith("-approve"):
                forge["approve"] = element.button
            if forward.WhichOneof("type") == "script_finished":
                forge["runs"] = forge.get("runs", 0) + 1
        ws.send(message)

    ws.on_message(from_page)
    server.on_message(from_server)


def _until(page, condition) -> None:
    """Wait for ``condition()``, letting the browser's events through (a hang guard of WAIT_S, never a speed
    target)."""
    deadline = time.time() + WAIT_S
    while not condition():
        assert time.time() < deadline, "the condition never held"
        page.wait_for_timeout(50)


def _forge_click(forge: dict, widget_id: str) -> None:
    """Send the rerun a click on ``widget_id`` would send (its trigger), whatever the page shows."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    back = BackMsg()
    back.CopyFrom(forge["rerun"])
    state = back.rerun_script.widget_states.widgets.add()
    state.id, state.trigger_value = widget_id, True
    forge["server"].send(back.SerializeToString())


def test_each_role_sees_and_does_what_it_may(chromium, signin_app, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    app, store, run_id, secrets = signin_app
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    paused = f"{app}/run?q=demo/locating/1&run={run_id}"

    # Not signed in: nothing but the sign-in screen, on any page.
    anonymous = chromium.new_page()
    anonymous.goto(f"{app}/settings")
    expect(anonymous.get_by_role("button", name="Sign in")).to_be_visible()
    expect(anonymous.get_by_role("heading", name="Settings")).to_have_count(0)
    anonymous.context.close()

    # A viewer reads the pause, cannot approve it, and a forged approval is refused on the server.
    forge: dict = {}
    page = _sign_in(chromium, app, "vera", forge)
    page.goto(paused)
    approve = page.get_by_role("button", name="Approve as proposed")
    expect(approve).to_be_disabled()
    expect(page.get_by_text("reviewing needs the analyst role")).to_be_visible()
    page.screenshot(path=shots / "signin-viewer-pause.png")
    assert forge["approve"].disabled
    _until(page, lambda: forge.get("runs"))  # the page's own run has finished
    runs = forge["runs"]
    _forge_click(forge, forge["approve"].id)
    _until(page, lambda: forge["runs"] > runs)  # the server ran the page with the forged click
    assert store.get(run_id, events=False).status == "paused" and not store.reviews(run_id)
    page.goto(f"{app}/settings")
    expect(page.get_by_role("textbox", name="DQA directory")).to_be_disabled()
    expect(page.get_by_role("button", name="Use this endpoint")).to_be_disabled()
    expect(page.get_by_text("Provider")).to_have_count(0)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Yes, sign me out").click()  # the provider's own confirmation
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    page.context.close()

    # An analyst whose role is taken away while the page shows an enabled Approve: the click is refused where the
    # review is applied.
    page = _sign_in(chromium, app, "anna")
    page.goto(paused)
    approve = page.get_by_role("button", name="Approve as proposed")
    expect(approve).to_be_enabled()
    granted = secrets.read_text()
    secrets.write_text(granted.replace('analyst = ["group:analysts"]', "analyst = []"))
    approve.click()
    expect(page.get_by_text(f"Refused: {shown('anna@example.test')} is signed in as viewer")).to_be_visible()
    assert store.get(run_id, events=False).status == "paused" and not store.reviews(run_id)
    secrets.write_text(granted)

    # An analyst approves; the review is recorded under the analyst's identity. No server paths, no own model.
    page.goto(paused)  # the same browser session: its last run drew Approve disabled (the role was taken away)
    expect(approve).to_be_enabled()  # drawn again for the analyst (a click on the old, disabled one is dropped)
    approve.click()
    _until(page, lambda: store.reviews(run_id))  # (the run may pause again at its re-plan: the page alone cannot tell)
    reviews = store.reviews(run_id)
    assert [(r["action"], r["reviewer"]) for r in reviews] == [("approve", "anna@example.test")]
    page.goto(f"{app}/history?run={run_id}")
    expect(page.get_by_text(shown("anna@example.test")).first).to_be_visible()
    page.goto(f"{app}/settings")
    expect(page.get_by_role("textbox", name="DQA directory")).to_be_disabled()
    expect(page.get_by_role("button", name="Use this endpoint")).to_be_enabled()
    expect(page.get_by_text("Provider")).to_have_count(0)
    page.screenshot(path=shots / "signin-analyst-settings.png")
    page.context.close()

    # An admin sets what the server reads; the endpoint's key is said to be set, never shown.
    page = _sign_in(chromium, app, "adam")
    page.goto(f"{app}/settings")
    expect(page.get_by_role("textbox", name="DQA directory")).to_be_enabled()
    expect(page.get_by_text("Provider")).to_be_visible()
    expect(page.get_by_role("combobox", name="Model endpoint")).to_have_value(
        "team: team-model at http://127.0.0.1:9/v1 · key from $TEAM_KEY: set")
    assert TEAM_KEY not in page.content()
    page.screenshot(path=shots / "signin-admin-settings.png")
    page.context.close()


def _upgrade(port: int, host: str) -> str:
    """The status line the app's WebSocket answers a handshake with ``host`` as its Host header."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
        s.sendall((f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   f"Origin: http://{host}\r\n\r\n").encode())
        return s.recv(4096).decode(errors="replace").splitlines()[0]


def test_a_host_not_configured_gets_no_websocket(tmp_path):
    """DNS rebinding: a page of rebind.test resolving to 127.0.0.1 reaches the port, but the app's WebSocket (where
    every action happens) answers only the loopback names of .streamlit/config.toml."""
    port = free_port()
    env = {**os.environ, "PLANRAG_HOME": str(tmp_path / "home")}
    with (tmp_path / "server.log").open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                    "--server.headless", "true"],
                                   cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", process)
            assert " 101 " in _upgrade(port, f"localhost:{port}") + " "
            assert " 101 " in _upgrade(port, f"127.0.0.1:{port}") + " "
            assert " 101 " not in _upgrade(port, f"rebind.test:{port}") + " "
        finally:
            process.terminate()
            process.wait(120)  # a hang guard: a loaded machine may take a while to stop a server
