"""What the page tests share: a run store of their own, and the app opened on one page with a question chosen."""
from __future__ import annotations

import html
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parent.parent / "app.py"


def isolate(monkeypatch, tmp_path: Path) -> Path:
    """Point DATA_HOME (read from core.config.settings when used) at ``tmp_path``, and leave out any configured model, so
    runs use the recorded replays."""
    from core.config import settings

    monkeypatch.setattr(settings, "DATA_HOME", tmp_path)
    for name in ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "PLANRAG_REPLAYS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def open_page(page: str, question_ref: tuple | None = ("demo", "locating", 1)) -> AppTest:
    """The app on ``page`` (e.g. ``pages/run.py``), run once, with ``question_ref`` as the current question."""
    at = AppTest.from_file(str(APP), default_timeout=30)
    if question_ref:
        at.session_state["question_ref"] = question_ref
    at.switch_page(page)
    return at.run()


def open_file(page: str, **state) -> AppTest:
    """One page file (e.g. ``pages/decision.py``) run on its own once, with ``state`` in its session state."""
    at = AppTest.from_file(str(APP.parent / page), default_timeout=30)
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def button(at: AppTest, label: str):
    """The one button labelled ``label``."""
    [found] = [b for b in at.button if b.label == label]
    return found


def keyed(elements, suffix: str) -> list:
    """The elements whose key ends with ``suffix``."""
    return [e for e in elements if (e.key or "").endswith(suffix)]


def shown(text: str) -> str:
    """Markdown source as a person reads it rendered: the backslash escapes of ui.untrusted.md read, its
    invisible word joiners left out."""
    return html.unescape(re.sub(r"\\(.)", r"\1", text)).replace("\u2060", "").replace("  \n", "\n")
