"""Whether each database backend can be used here, checked in the background and remembered for a while, so that
no page waits on a server to render: an unreachable or silent server takes a check a few seconds (its connect
timeout), which a page would otherwise spend before showing anything."""
from __future__ import annotations

import threading
import time

from core.backends.registry import unavailable
from core.config.settings import DatabaseSettings

FRESH_S = 30.0  # a result is reused this long
WAIT_S = 0.3  # how long a caller waits for a check it started (the embedded backends answer within it)

_lock = threading.Lock()
_results: dict[tuple, tuple[float, str | None]] = {}  # key -> (when checked, why unavailable or None)
_running: dict[tuple, threading.Thread] = {}


def _key(name: str, settings: DatabaseSettings) -> tuple:
    return name, settings.mysql_url, settings.neo4j_uri, settings.neo4j_user, settings.neo4j_password


def _check(key: tuple, name: str, settings: DatabaseSettings) -> None:
    try:
        reason = unavailable(name, settings)
    except Exception as e:  # noqa: BLE001 - a check that fails says why
        reason = f"{name}: the check failed ({e})"
    with _lock:
        _results[key] = (time.monotonic(), reason)
        _running.pop(key, None)


def status(name: str, settings: DatabaseSettings | None = None, wait_s: float = WAIT_S) -> tuple[bool, str | None]:
    """(known, why backend ``name`` cannot be used or None). A check older than FRESH_S, or none, is started in
    the background and waited for ``wait_s`` at most; until it ends the last result is given, or (False, None)."""
    settings = settings or DatabaseSettings()
    key = _key(name, settings)
    with _lock:
        found = _results.get(key)
        if found and time.monotonic() - found[0] < FRESH_S:
            return True, found[1]
        thread = _running.get(key)
        if thread is None:
            thread = _running[key] = threading.Thread(target=_check, args=(key, name, settings), daemon=True,
                                                      name=f"planrag-available-{name}")
            thread.start()
    thread.join(wait_s)
    with _lock:
        found = _results.get(key)
    return (True, found[1]) if found else (False, None)
