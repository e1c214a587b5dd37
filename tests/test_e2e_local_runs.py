"""The app as an analyst starts it (issue 41: ``PLANRAG_JOBS`` unset, so its runs go to its local run process,
core.jobs.local), driven in headless Chromium, offline: on the demo Locating question 1, a PlanRAG replay with
approve-replans is started on the Run page, driven by a process the server started (not the server), paused at its
re-plan for the review; approved on the page, it goes on in that process to its final answer, shown on the page.
Screenshots go to a temporary folder, or to PLANRAG_SCREENSHOTS."""
from __future__ import annotations

import os
from pathlib import Path

from core.store.runs import RunStore
from tests.test_e2e_browser import app_server, approve_as, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)
from tests.test_e2e_run_end import PLAIN_STREAMLIT


def children(pid: int) -> list[str]:
    """The command lines of the processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except (OSError, IndexError, ValueError):  # a process gone meanwhile
            continue
    return found


def test_a_run_started_on_the_page_goes_on_in_the_run_process_through_its_review(chromium, tmp_path):  # noqa: F811
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and k not in ("PLANRAG_REPLAYS", "PLANRAG_JOBS")}
    env.update(PLANRAG_HOME=str(home))
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with app_server(PLAIN_STREAMLIT, env, tmp_path / "server.log") as (url, process):
        wait_healthy(url, process)
        page = chromium.new_page(viewport={"width": 1500, "height": 1300})
        page.set_default_timeout(60_000)
        page.goto(f"{url}/run")
        page.get_by_role("heading", name="Run").wait_for()
        page.get_by_text("Approve re-plans").click()
        page.get_by_role("button", name="Start").click()
        page.get_by_test_id("stAlert").filter(has_text="Waiting for your review — run").wait_for()
        assert any(c.endswith("-m core local-runs") for c in children(process.pid)), children(process.pid)
        [run] = RunStore(home / "runs.sqlite").list()
        assert run.status == "paused"

        approve_as(page, "Ana Costa")
        page.get_by_text("Final answer", exact=False).first.wait_for()
        store = RunStore(home / "runs.sqlite")
        page.wait_for_function("() => !document.body.innerText.includes('Waiting for your review')")
        record = store.get(run.id)
        assert record.status == "finished", log(tmp_path)
        assert [r["reviewer"] for r in store.reviews(run.id)] == ["Ana Costa"]
        assert not [e for e in record.events if e.kind == "error"]  # handed over, not interrupted on the way
        page.screenshot(path=shots / "run-local-process-finished.png", full_page=True)


def log(tmp_path: Path) -> str:
    return (tmp_path / "server.log").read_text()[-3000:]
