"""The project home (``PLANRAG_HOME``, ``core.config.settings.DATA_HOME``) in a bad state, and the SQLite stores in it.

A home that is a file, cannot be made or is read-only is reported by ``problem`` (``check`` raises HomeError with
it, which the command line prints as an error); the app then works in a fallback home (``use_fallback``) and says
so on every page. A store file that is not a database or is damaged is set aside by core.store.sqlite; what was
set aside is listed by ``notices`` for the pages to show. The home is always read from core.config.settings when called, so that a test or the
app pointing it elsewhere is followed.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from core.config import settings

_lock = threading.Lock()
_notices: list[str] = []
_fallback_reason: str | None = None  # why this process uses the fallback home


class HomeError(Exception):
    """The project home cannot hold the project's files. The message says what to change."""

    kind = "config"


def data_home() -> Path:
    """The project home now (``core.config.settings.DATA_HOME``)."""
    return Path(settings.DATA_HOME)


def problem(home: str | Path | None = None, what: str = "the project home {} (PLANRAG_HOME)") -> str | None:
    """Why folder ``home`` (default the project home; ``what`` names it) cannot hold the project's files: a file,
    not creatable, not writable; None when it can."""
    home = Path(home) if home is not None else data_home()
    what = what.format(home)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{what} is a file, not a folder"
    except OSError as e:
        return f"cannot make {what}: {e.strerror or e}"
    try:
        with tempfile.NamedTemporaryFile(dir=home, prefix=".planrag-probe-"):
            pass
    except OSError as e:
        return f"{what} is not writable: {e.strerror or e}"
    return None


def check(home: str | Path | None = None) -> Path:
    """``home`` (default the project home), made if needed; HomeError saying what is wrong when it cannot be used."""
    home = Path(home) if home is not None else data_home()
    reason = problem(home)
    if reason:
        raise HomeError(f"{reason}; set PLANRAG_HOME to a writable folder")
    return home


def fallback_home() -> Path:
    """Where the app keeps its files when the project home cannot be used: a folder in the temporary directory."""
    return Path(tempfile.gettempdir()) / f"planrag-fallback-home-{os.getuid() if hasattr(os, 'getuid') else 0}"


def use_fallback() -> str | None:
    """For the app: when the project home cannot be used, point this process at ``fallback_home()`` and say why
    (the message to show on every page, as long as the process lives); None when the home is fine. HomeError when
    the fallback cannot be used either."""
    global _fallback_reason
    with _lock:
        if _fallback_reason and data_home() == fallback_home():
            return _fallback_reason
        home = data_home()
        reason = problem(home)
        if reason is None:
            return None
        fallback = check(fallback_home())
        settings.DATA_HOME = fallback
        _fallback_reason = (f"{reason}. This app keeps runs, benchmarks and plans in {fallback} instead (temporary); "
                            f"what is stored in {home} is not shown. Set PLANRAG_HOME to a writable folder and "
                            "restart the app.")
        return _fallback_reason


def add_notice(text: str) -> None:
    """Say ``text`` on every page and on the command line: a store set aside, something left behind and cleaned
    up, ..."""
    with _lock:
        _notices.append(text)


def notices(since: int = 0) -> list[str]:
    """What this process found wrong in the home and set aside, or left behind and cleaned up (from the
    ``since``-th on), for the pages to show."""
    with _lock:
        return list(_notices[since:])
