"""What the pages share: this session's settings and the selected question, kept in ``st.session_state``.

Keys (set by the Scenarios and Settings pages, read by the others):
- ``question_ref``: (source, scenario, number) of the selected question;
- ``hide_answers``: hide the labelled answers (question pickers, network stars, correct and rank of runs, the
  Decision check) for demos and blind review, on every page (the sidebar's switch);
- ``dqa_dir``: the DQA directory chosen on Settings (else DQA_DIR / ../shared/dqa);
- ``llm``: a core.llm.client.LLMSettings for this session (the key stays in the session only);
- ``db_settings``: a core.config.settings.DatabaseSettings for this session (MySQL, Neo4j; passwords stay in the session);
- ``limits``: a core.model.run_settings.Limits for this session's runs (set on Settings);
- ``run_id``: the run last opened in the Run view (the Decision check marks its pick);
- ``reviewer``: the name this session's actions and presence are recorded under without sign-in, given once (the
  sidebar of every page, or where an action asks for it; until then ``local user``, never the Unix account); with
  sign-in, the signed-in identity (ui/access.py).

The URL carries the question (``?q=source/scenario/number``) and, on the pages that show one, the run (``&run=ID``),
so a view can be bookmarked or sent: a link's question and run win over the session's.
"""
from __future__ import annotations

import re
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from core.analysis.format import number
from core.scenarios import catalog
from core.model.bounds import NUMBERS
from core.model.run_settings import Limits
from core.scenarios.dqa.source import DQAError
from core.model.question import Database, Question
from core.config.settings import DatabaseSettings, LLMSettings, dqa_dir

from ui import access
from ui.kept import kept  # noqa: F401 - the pages' one helper for choices that stay
from core import scenarios
from ui.untrusted import md, md_code

DEFAULT_QUESTION = ("demo", "locating", 1)  # a page opened with no question in the link or the session


def _use_app_navigation() -> None:
    """On a fresh server, Streamlit serves a deep link (e.g. /run) by running the page file alone, with the files of
    pages/ as the menu, until app.py has run once. Every page imports this module: switch such a run over to
    app.py's navigation and rerun it, keeping the requested page. A run of app.py itself goes on: it routes below
    (its first run on a fresh server was run twice)."""
    ctx = get_script_run_ctx()
    if not PagesManager.uses_pages_directory or ctx is None:
        return
    running = ctx.pages_manager.get_pages().get(ctx.page_script_hash, {}).get("script_path")
    if running and Path(running).resolve() == Path(ctx.main_script_path).resolve():
        return
    PagesManager.uses_pages_directory = False
    st.rerun()


_use_app_navigation()


def dqa_root():
    """The DQA directory of this session: the Settings page's value, else the configured default."""
    return st.session_state.get("dqa_dir") or dqa_dir()


def answers_hidden() -> bool:
    """Whether this session hides the questions' labelled answers (for demos and blind review; Scenarios page)."""
    return bool(st.session_state.get("hide_answers"))


ANSWER_COLUMNS = ("correct", "rank")  # what a table of runs shows of the labelled answer


def shown_columns(columns: list[str]) -> list[str]:
    """A table's columns as this session shows them: without correct and rank while answers are hidden."""
    return [c for c in columns if not (answers_hidden() and c in ANSWER_COLUMNS)]


def _switch_answers() -> None:
    st.session_state["hide_answers"] = st.session_state["hide_answers_switch"]
    if "scenarios_question" in st.session_state:  # set again, so the picker shows its question as now labelled
        st.session_state["scenarios_question"] = st.session_state["scenarios_question"]


def answers_switch() -> None:
    """The session's one Hide answers switch, in the sidebar of every page."""
    st.session_state["hide_answers_switch"] = answers_hidden()
    st.sidebar.toggle("Hide answers", key="hide_answers_switch", on_change=_switch_answers,
                      help="For demos and blind review, on every page of this session: the labelled best decisions, "
                           "whether runs are correct and their ranks are not shown.")


def question_label(q) -> str:
    """A question in a picker: its number and target, and its labelled answer (``1485 furniture manufactories``)
    unless the session hides them."""

    if q.answer is None or answers_hidden():
        return f"{q.number}. {scenarios.target(q)}"
    kind = scenarios.get(q.scenario)
    try:  # the databases stay loaded: only a picker's first display reads them
        database = catalog.database(q, dqa_root()) if kind.titles_need_data else None
    except DQAError:
        database = None
    return f"{q.number}. {scenarios.target(q)} — label: {kind.decision_title(q, q.answer, database)}"


def decision_metric(column, label: str, kind, question, decision, database, **metric) -> None:
    """A decision as a metric: its id as the value and its type beside it when the scenario names decisions by
    both (``1485`` and ``furniture manufactories``: under the value, or in the label when the metric has a delta),
    else its name as the value."""
    title, key = kind.decision_title(question, decision, database), str(decision)
    named = title[len(key):].strip() if title.startswith(key) else ""
    if not named:
        column.metric(label, title, **metric)
    elif metric.get("delta") is None:
        column.metric(label, key, **{**metric, "delta": named, "delta_color": "off", "delta_arrow": "off"})
    else:
        column.metric(f"{label} · {md(named)}", key, **metric)


def session_llm() -> LLMSettings:
    """This session's model settings (from Settings), else the environment's."""
    return st.session_state.get("llm") or LLMSettings()


def session_db() -> DatabaseSettings:
    """This session's database servers (from Settings), else the environment's."""
    return st.session_state.get("db_settings") or DatabaseSettings()


def session_limits() -> Limits:
    """The limits of this session's runs (from Settings), else the defaults."""
    return st.session_state.get("limits") or Limits()


def session_reviewer() -> str:
    """Who acts in this session, as reviews, overrides, stops and branches record it: the signed-in person, else
    (single-user mode) the name given in this session, else ``local user``."""
    who = access.current()
    return who.name if who else ""


def review_name(pause_id: str | None) -> str:
    """A pause of a run in plain words, as the pages name it: ``p2`` is ``review 2``."""
    pause_id = pause_id or ""
    return f"review {pause_id[1:]}" if re.fullmatch(r"p[0-9]+", pause_id) else f"review {pause_id}".strip()


def select_question(question: Question) -> None:
    """Make ``question`` the session's current question (and the URL's)."""
    st.session_state["question_ref"] = (question.source, question.scenario, question.number)
    st.query_params["q"] = question.id


MAX_PARAM_CHARS = 200  # the longest URL parameter a page reads (a question, a run id, a list of runs)


def url_param(name: str, max_chars: int = MAX_PARAM_CHARS) -> str | None:
    """The URL parameter ``name`` (None without one); one longer than ``max_chars`` is said so in one line, taken
    out of the URL and read as none."""
    value = st.query_params.get(name)
    if value and len(value) > max_chars:
        st.error(f"The link's {md_code(name)} parameter is {number(len(value))} characters long; at most "
                 f"{number(max_chars)} are read: it is left out.", icon=":material/link_off:")
        del st.query_params[name]
        return None
    return value


def _parse(linked: str) -> tuple[str, str, int] | None:
    """(source, scenario, number) of ``source/scenario/number``, the number within its bounds; None otherwise."""
    source, _, rest = linked.partition("/")
    scenario, _, number = rest.partition("/")
    if not (source and scenario and re.fullmatch(r"[0-9]{1,9}", number)):
        return None
    low, high = NUMBERS["question"]
    return (source, scenario, int(number)) if low <= int(number) <= high else None


def _load(ref: tuple) -> tuple[Question, Database]:
    question = catalog.question(*ref, root=dqa_root())
    return question, catalog.database(question, dqa_root())


def linked_question(stop: bool = True) -> tuple[Question, Database] | None:
    """The question the link names (``?q=``) and its database, made the session's question; None without one. A
    link naming no question there is is said so, and stops the page (``stop``) or is taken out of the URL."""
    linked = url_param("q")
    if not linked:
        return None
    ref = _parse(linked)
    try:
        if ref is None:
            low, high = NUMBERS["question"]
            raise DQAError(f"a question is written source/scenario/number, the number from {low} to {number(high)}, "
                           "e.g. demo/locating/1")
        question, database = _load(ref)
    except (DQAError, KeyError, ValueError) as e:
        st.error(f"The link names question {md_code(linked)}, which cannot be opened here: {md(e)}. Pick a question on the "
                 "**Scenarios** page.", icon=":material/link_off:")
        if stop:
            st.stop()
        del st.query_params["q"]
        return None
    st.session_state["question_ref"] = ref
    return question, database


def current_question() -> tuple[Question, Database]:
    """The current question and its database: the link's (``?q=``), else the session's, else the demo's first;
    stops the page with a clear message when the link names no question there is. A link naming a run alone opens
    the run's question."""
    linked_run()
    linked = linked_question()
    if linked:
        return linked
    ref = st.session_state.get("question_ref")
    if not ref:
        st.info("No question chosen in this session yet: showing the first demo Locating question (pick another "
                "on the **Scenarios** page).", icon=":material/hub:")
        ref = DEFAULT_QUESTION
    try:
        question, database = _load(ref)
    except (DQAError, KeyError) as e:
        st.info(md(e))
        st.stop()
    st.session_state["question_ref"] = ref
    st.query_params["q"] = question.id
    return question, database


def linked_run() -> str | None:
    """The run of the link (``?run=``) made the session's run (and, when the link names no question, the run's
    question the current one), else the session's run."""
    linked = url_param("run")
    if linked and linked != st.session_state.get("run_id"):
        st.session_state["run_id"] = linked
        if "q" not in st.query_params:
            import core.jobs.runs as jobs  # heavy: loads langchain_core

            try:
                s = jobs.open_store().get(linked, events=False).settings
            except KeyError:
                return linked
            st.session_state["question_ref"] = (s.source, s.scenario, s.question)
            st.query_params["q"] = f"{s.source}/{s.scenario}/{s.question}"
    return st.session_state.get("run_id")


def show_run_in_url(run_id: str | None) -> None:
    """Put the run shown into the URL (or take it out)."""
    if run_id:
        st.query_params["run"] = run_id
    else:
        st.query_params.pop("run", None)


def in_words(message: str, words: list[tuple[str, str]]) -> str:
    """A message from core with its command-line options (regular expressions in ``words``) named as the page's
    inputs are."""
    for flag, said in words:
        message = re.sub(flag, said, message)
    return message


LANDING = "_landing"  # a button switched pages (ui.run_view.open_run): the next page opens at its top
#: Scrolls the app's main area to its top (the browser keeps the last page's scroll position across a switch).
_TO_TOP = """<script>
for (const e of document.querySelectorAll('[data-testid="stAppViewContainer"], [data-testid="stAppViewContainer"] *'))
  if (e.scrollTop > 0 && !e.closest('[data-testid="stSidebar"]')) e.scrollTop = 0;
</script>"""


def land_at_top() -> None:
    """Open the next page at its top (a switch of pages by a button, not a rerun of this one)."""
    st.session_state[LANDING] = True


def landing() -> None:
    """On the page a button switched to: its top shown, not the last page's scroll position (once)."""
    if st.session_state.pop(LANDING, False):
        st.sidebar.html(_TO_TOP, unsafe_allow_javascript=True)
