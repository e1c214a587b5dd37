"""What the page tests share: a run store of their own, and the app opened on one page with a question chosen."""
from __future__ import annotations

import html
import re
import time
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


class PageTest(AppTest):
    """An AppTest that, like an analyst watching the page, sees the agent runs it started or resumed through to their
    pause or end: in the browser the page follows them in a fragment that redraws itself (ui.live); here each run of
    the script while a run went on waits for it and runs the script once more."""

    def _run(self, widget_state=None, timeout=None) -> AppTest:
        from core.jobs.job import all_jobs
        from core.jobs.runs import RunJob

        began = time.time()
        result = super()._run(widget_state, timeout=timeout)
        followed = [job for job in all_jobs(RunJob.kind) if not job.done or job.ended >= began]
        if followed:
            for job in followed:
                assert job.join(120), f"run {job.key} did not pause or end within 120 s"
            result = super()._run(self._tree.get_widget_states(), timeout=timeout)
        return result


def open_page(page: str, question_ref: tuple | None = ("demo", "locating", 1), **state) -> AppTest:
    """The app on ``page`` (e.g. ``pages/run.py``), run once, with ``question_ref`` as the current question and
    ``state`` in its session state (e.g. ``bench_tab="Results"``: the Benchmark page opened on that tab)."""
    at = PageTest(APP, default_timeout=30)
    if question_ref:
        at.session_state["question_ref"] = question_ref
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    return at.run()


def on_tab(at: AppTest, label: str, key: str = "bench_tab") -> AppTest:
    """``at`` run again with the tab ``label`` of the tabs keyed ``key`` open, as a click on it does: tabs made with
    ``on_change="rerun"`` draw the open tab's content only (the Benchmark page's, ``bench_tab``)."""
    at.session_state[key] = label
    return at.run()


def open_file(page: str, **state) -> AppTest:
    """One page file (e.g. ``pages/decision.py``) run on its own once, with ``state`` in its session state."""
    at = PageTest(APP.parent / page, default_timeout=30)
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


def ended(job, timeout: float = 60.0):
    """``job`` (a page's benchmark job) once it has ended, or after ``timeout`` seconds (a hang guard)."""
    deadline = time.time() + timeout
    while not job.done and time.time() < deadline:
        time.sleep(0.1)
    return job
