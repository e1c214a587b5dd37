"""How the browser tests and the bench scripts start Debian's Chromium, and how they see a page reach outside.

No page reaches beyond this machine: ``CHROMIUM_ARGS`` send every request but a loopback one to a dead proxy (Chromium
goes to loopback addresses directly, whatever the proxy), so a fetch or a WebSocket to the outside fails at once, IP
addresses included. What a test asserts (that no page tried) it learns from ``outside_attempts``, which listens and
never routes: a Playwright route turns the browser's HTTP cache off and passes every request through the driver
(measured: one load of the Scenarios page took 2.5 s of Chromium's CPU routed against 1.3 s, and the app 0.35 s more
to serve its files again).
"""
from __future__ import annotations

from urllib.parse import urlsplit

#: Port 9 (discard) of loopback: no proxy answers there, so every request sent to it fails.
DEAD_PROXY = "http://127.0.0.1:9"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--proxy-server={DEAD_PROXY}"]
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def outside(url: str) -> bool:
    """Whether a page's request to ``url`` would leave this machine (data: and blob: URLs never do; one that cannot
    be read is counted as leaving)."""
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS
    except ValueError:
        return True


def outside_attempts(context) -> list[str]:
    """The list, filled as they happen, of the requests and WebSockets that the pages the Playwright ``context`` opens
    from now on send beyond this machine (each refused by ``CHROMIUM_ARGS``'s proxy)."""
    attempted: list[str] = []

    def note(url: str) -> None:
        if outside(url):
            attempted.append(url)

    context.on("request", lambda request: note(request.url))
    context.on("page", lambda page: page.on("websocket", lambda ws: note(ws.url)))
    return attempted
