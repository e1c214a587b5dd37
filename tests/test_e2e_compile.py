"""Many sessions opening pages at once on a fresh server: no session sees a script compilation error. CPython 3.11
fails ("AST constructor recursion depth mismatch") when two threads build syntax trees at once; the app compiles
its pages under one lock with every other tree built in the process (core.config.interpreter, ui.threads).

Each round starts a fresh server and opens every page from 8 sessions at once (session k opens page k + round, so
across the rounds each session opens each page first), in headless Chromium, offline, as analysts' tabs, or as
sessions opened without a browser (tests/streamlit_client.py: the websocket and request a tab sends, all 8 in the
same instant, without the browsers' JavaScript on the machine's two cores; a round of these found a deadlock
Chromium's slower start had hidden, tests/test_interpreter_guards.py). The default suite runs a round of each,
`.ci/run`'s long step 20 rounds of sessions.
"""
from __future__ import annotations

import asyncio
import os

import pytest

from tests import streamlit_client
from tests.browser import CHROMIUM_ARGS
from tests.test_e2e_browser import CHROMIUM, WAIT_MS, app_server, wait_healthy
from tests.conftest import require

SESSIONS = 8
PAGES = {"": "Scenarios", "run": "Run", "decision": "Decision check", "compare": "Compare", "history": "History",
         "benchmark": "Benchmark", "plans": "Learned plans", "settings": "Settings"}
LAUNCHER = "import sys\nfrom streamlit.web.cli import main\nsys.argv[0] = 'streamlit'\nmain()\n"


async def open_in_chromium(url: str, paths: list[str]) -> list[str]:
    """Open ``url/path`` for each path at once, each in a browser context of its own (a session each); the text of
    each page's errors once its title shows (or an error does)."""
    from playwright.async_api import async_playwright

    async def open_one(browser, path):
        context = await browser.new_context()
        page = await context.new_page()  # nothing leaves localhost (tests/browser.py)
        # 8 tabs loading the app's scripts from a fresh server busy with their first runs: on a loaded machine its
        # "load" event may take longer than a page's usual wait, and the page's title is what counts
        await page.goto(f"{url}/{path}", wait_until="commit", timeout=WAIT_MS * 3)
        shown = page.get_by_role("heading", name=PAGES[path], exact=True).or_(page.get_by_test_id("stException"))
        await shown.first.wait_for(timeout=WAIT_MS * 3)
        texts = await page.get_by_test_id("stException").all_inner_texts()
        await context.close()
        return "\n".join(texts)

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            return await asyncio.gather(*(open_one(browser, path) for path in paths))
        finally:
            await browser.close()


async def open_as_sessions(url: str, paths: list[str]) -> list[str]:
    """Open each path as a session without a browser, all at once; each page's errors (its exceptions, or that its
    run did not finish, or that it lacks its title)."""
    runs = await streamlit_client.open_pages(url, paths, timeout=WAIT_MS / 1000 * 3)
    return ["\n".join(run.exceptions + ([f"ended {run.ended or 'never'}"] if run.ended != "FINISHED_SUCCESSFULLY"
                                        else []) + ([] if PAGES[run.page] in run.headings else ["no title"]))
            for run in runs]


@pytest.mark.parametrize("rounds, opener", [pytest.param(1, open_in_chromium, id="1-round-in-chromium"),
                                            pytest.param(1, open_as_sessions, id="1-round"),
                                            pytest.param(20, open_as_sessions, id="20-rounds",
                                                         marks=pytest.mark.long)])
def test_sessions_opening_every_page_at_once_on_a_fresh_server_see_no_compilation_error(rounds, opener, tmp_path):
    if opener is open_in_chromium and not CHROMIUM.exists():
        require("browser", f"Chromium not found at {CHROMIUM} (install Debian's chromium package)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    paths = list(PAGES)
    errors = []
    for r in range(rounds):
        env["PLANRAG_HOME"] = str(tmp_path / f"home{r}")
        log = tmp_path / f"server{r}.log"
        with app_server(LAUNCHER, env, log) as (url, process):
            wait_healthy(url, process)
            chosen = [paths[(k + r) % len(paths)] for k in range(SESSIONS)]
            shown = asyncio.run(opener(url, chosen))
        errors += [f"round {r}, /{path}: {text}" for path, text in zip(chosen, shown) if text]
        errors += [f"round {r}, server log: {line}" for line in log.read_text().splitlines()
                   if "compilation error" in line.lower() or "recursion depth mismatch" in line]
    assert not errors, "\n".join(errors)
