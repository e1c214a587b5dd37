"""Issue 27, section 2: text from databases, models, plugins, replays and links is shown as text on every page
(AppTest): a hostile run (cells, column names, thoughts, the final answer written as Markdown images and links),
hostile URL parameters echoed in the pages' error boxes, and a plugin whose question text is hostile never give
Markdown that would render as a link or an image. The browser check (no request leaves localhost) is
tests/test_e2e_untrusted.py."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from core import scenarios
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from ui.untrusted import md, md_code, md_table
from tests.conftest import ROOT
from tests.page_app import isolate, on_tab
from tests.test_page_state import linked

HOST = "evil.test"
PAYLOAD = (f"![x](http://{HOST}/img.png) [login](http://{HOST}/phish) <img src=http://{HOST}/i.png> www.{HOST} "
           f"$x$ :red[x] # h")
#: The link of the issue: a backtick that closes the page's code span, then a link and an image.
URL_PARAM = f"x` [login](http://{HOST}/phish) ![](http://{HOST}/u.png) `"


def live(markdown: str) -> bool:
    """Whether Markdown source could render a link, an image or an autolink: outside code spans, an unescaped
    ``](``, ``![`` or ``<``, or (GitHub's autolinks are found in the text after its escapes are read) a URL,
    ``www.`` name or e-mail address left whole."""
    text = re.sub(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown, flags=re.S)
    if re.search(r"(?<!\\)(\]\(|!\[|<)", text):
        return True
    return bool(re.search(r"(?i)https?:|www\.|@" + re.escape(HOST), re.sub(r"\\(.)", r"\1", text)))


def shown_markdown(at) -> list[str]:
    """The Markdown source of every element the page renders as Markdown."""
    values = [e.value for kind in ("markdown", "caption", "error", "warning", "info", "success", "subheader", "title")
              for e in getattr(at, kind)]
    values += [e.label for e in at.expander] + [e.label for e in at.metric] + [e.help or "" for e in at.metric]
    for table in at.table:
        frame = table.value
        values += [str(c) for c in frame.columns] + [str(v) for v in frame.to_numpy().ravel()]
    return values


def assert_text_only(at) -> None:
    assert not at.exception, at.exception
    hot = [v for v in shown_markdown(at) if live(v)]
    assert not hot, hot[:3]


def test_md_escapes_every_markup_character_and_md_code_cannot_be_closed():
    assert not live(md(PAYLOAD)) and not live(md(URL_PARAM))
    assert not re.search(r"(?<!\\)[\[\]()<>!`*_$:#]", md(PAYLOAD))
    assert not live(md(f"mail a@{HOST}")) and live(f"mail a@{HOST}") and live(f"see www.{HOST}")
    span = md_code(URL_PARAM)
    fence = re.match(r"`+", span).group()
    assert span.endswith(fence) and fence not in span[len(fence):-len(fence)] and not live(span)
    assert md_code("plain") == "`plain`"
    table = md_table(__import__("pandas").DataFrame({PAYLOAD: [PAYLOAD], "n": [-1.5]}))
    assert not live(table.columns[0]) and not live(table.iloc[0, 0]) and table.iloc[0, 1] == -1.5


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def hostile_run(home, tmp_path) -> str:
    """A finished IterRAG run on demo Locating q1 whose replies, cells and column names are hostile."""
    query = f"SELECT '{PAYLOAD}' AS \"{PAYLOAD}\", source FROM flow LIMIT 2"
    replies = [f"Thought: {PAYLOAD}\nAction: Relational DB\nAction input: {query}",
               f"Thought: I now know the answer. {PAYLOAD}\nFinal answer: doab {PAYLOAD}"]
    replay = tmp_path / "hostile.json"
    replay.write_text(json.dumps(replies))
    runtime = jobs.open_runtime()
    try:
        result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{replay}", source="demo"))
    finally:
        runtime.close()
    return result.run_id


@pytest.mark.parametrize("page", ["pages/run.py", "pages/history.py", "pages/decision.py", "pages/compare.py"])
def test_a_hostile_run_is_shown_as_text(hostile_run, page):
    params = {"runs": hostile_run} if page.endswith("compare.py") else {"run": hostile_run}
    at = linked(page, q="demo/locating/1", **params)
    assert_text_only(at)
    if page.endswith("run.py"):
        assert at.table and any("evil" in str(c) for c in at.table[0].value.columns)  # shown, as text


@pytest.mark.parametrize("page, params", [("pages/run.py", {"q": URL_PARAM}), ("pages/run.py", {"run": URL_PARAM}),
                                          ("pages/history.py", {"run": URL_PARAM}),
                                          ("pages/decision.py", {"q": URL_PARAM}),
                                          ("pages/compare.py", {"runs": URL_PARAM})])
def test_a_hostile_link_is_echoed_as_text(home, page, params):
    at = linked(page, **params)
    assert_text_only(at)
    echoed = [v for v in shown_markdown(at) if "phish" in v]
    assert echoed, "the page says which link it could not open"


@pytest.fixture
def hostile_plugin(home, tmp_path, monkeypatch):
    folder = tmp_path / "scenarios"
    shutil.copytree(ROOT / "assets" / "scenarios" / "depot", folder / "depot")
    manifest = folder / "depot" / "scenario.toml"
    text = manifest.read_text()
    text = text.replace('name = "depot"', 'name = "hostile"')
    text = text.replace('title = "Distribution centre"', f'title = "Depot {PAYLOAD}"')
    text = text.replace("We deliver parcels", f"We deliver parcels {PAYLOAD}")
    manifest.write_text(text)
    (folder / "depot" / "rules.md").write_text(f"Rules {PAYLOAD}\n")
    monkeypatch.setenv("PLANRAG_SCENARIOS", str(folder))
    scenarios.reload()
    yield ("scenario", "hostile", 1)
    monkeypatch.delenv("PLANRAG_SCENARIOS")
    scenarios.reload()


@pytest.mark.parametrize("page", ["pages/scenarios.py", "pages/run.py", "pages/decision.py"])
def test_a_plugins_hostile_question_text_is_shown_as_text(hostile_plugin, page):
    at = linked(page, q="scenario/hostile/1")
    assert_text_only(at)
    if page.endswith("scenarios.py"):
        assert any("deliver parcels" in v and "login" in v for v in shown_markdown(at))  # shown, as text


def test_the_benchmark_results_of_a_hostile_plugin_and_set_are_shown_as_text(hostile_plugin, home, tmp_path):
    """Issue 44 section E: the Results tab drew a plugin's title (and, by the code, the benchmark's name) as
    Markdown, so an outside image was fetched. A benchmark of the hostile plugin, named with emphasis and answered
    with markup, is shown as text on every tab of its results and in the comparison of sets."""
    from core.benchmark.runner import Bench, BenchConfig

    replay = tmp_path / "answer.json"
    replay.write_text(json.dumps([f"Thought: I now know the answer. {PAYLOAD}\nFinal answer: {PAYLOAD}"]))
    # results names are names (letters, digits, space, -_.: issue 36), still Markdown-active with underscores
    for name in ("set __bold__ _em_", "other ___x___ 1.2"):
        bench = Bench(BenchConfig(["iterrag", "planrag"], f"replay:{replay}", scenario="hostile", source="scenario",
                                  questions="1", name=name, cache=False))
        bench.run()
        assert bench.results()
    at = on_tab(linked("pages/benchmark.py"), "Results")
    assert_text_only(at)
    assert any("evil" in v and "Depot" in v for v in shown_markdown(at))  # the plugin's title: shown, as text
    assert_text_only(on_tab(at, "Compare sets"))


@pytest.mark.parametrize("page, params", [
    ("pages/run.py", {"q": "dqa/locating/" + "9" * 30_000}), ("pages/run.py", {"q": "demo/locating/" + "9" * 50}),
    ("pages/run.py", {"q": "demo/locating/²"}), ("pages/run.py", {"q": "demo/locating/0"}),
    ("pages/decision.py", {"q": "demo/building/" + "1" * 5000}), ("pages/run.py", {"run": "a" * 30_000}),
    ("pages/history.py", {"run": "f" * 30_000}), ("pages/compare.py", {"runs": ",".join(["abc"] * 10_000)})])
def test_a_url_parameter_out_of_bounds_is_one_clear_line(home, page, params):
    """Issue 44 section E: ``/run?q=dqa/locating/`` and 30,000 digits showed a ValueError traceback. Every URL
    parameter is read with bounds: a clear message, no exception, the page goes on."""
    at = linked(page, **params)
    assert not at.exception, at.exception
    said = " ".join(shown_markdown(at))
    assert "cannot be opened here" in said or "characters long; at most" in said
    assert all(len(v) < 2000 for v in shown_markdown(at))  # not echoed whole
