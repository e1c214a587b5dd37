"""Scenarios: pick a scenario (DQA's, the demos, a plugin's), a source and a question, read its rules and question,
see its database as a network (when the scenario draws one) and as tables; clicking a node shows its rows."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

import streamlit as st

from core.actions import choices
from core.scenarios import catalog
from core import scenarios
from core.scenarios.dqa.source import DQAError
from core.analysis.trace import row_count
from core.scenarios import candidates
from ui.common import (
    DEFAULT_QUESTION, answers_hidden, decision_metric, dqa_root, linked_question, question_label, select_question
)
from ui import access
from ui.untrusted import md, md_code


def show(table, height: int, own=None) -> None:
    """A table; the rows ``own(record)`` holds true for highlighted."""
    import pandas as pd  # heavy: loaded when a table is first shown, not before the page's question and network

    data = pd.DataFrame({c: table.column(c) for c in table.column_names})
    marks = [bool(own(r)) for r in table.records()] if own else []
    if any(marks):
        data = data.style.apply(lambda row: [OWN_ROW if marks[row.name] else ""] * len(row), axis=1)
    st.dataframe(data, hide_index=True, height=height)



def explore_from(key: str, node_id: str, defaults: dict) -> None:
    st.session_state[key] = node_id
    show_default_view(defaults)


def show_default_view(defaults: dict) -> None:
    """Back to the view's default choices (widget key -> value; a Locating network's neighbourhood, now around the
    node found)."""
    st.session_state.update(defaults)


OWN_ROW = "background-color: #fefcbf"  # the question's own rows (the deciding country's) among a node's rows

st.title("Scenarios")
scenarios.use_folder(st.session_state.get("scenarios_dir"))  # the session's (Settings), also when run alone

def first_with_questions(sources: list[str], scenario: str) -> str:
    """The first of ``sources`` that has questions of ``scenario`` here (DQA only when its directory is set), else
    the first."""
    for source in sources:
        try:
            if catalog.questions(source, scenario, dqa_root()):
                return source
        except DQAError:
            continue
    return sources[0]


# Keyed widgets keep the user's choice while their defaults follow the session's question (set on other pages too);
# a link naming another question (``?q=``, a bookmark or a colleague's link) opens the pickers on it.
shown = st.session_state.get("question_ref")
if linked_question(stop=False) and st.session_state["question_ref"] != shown:
    for picker in ("scenarios_scenario", "scenarios_source", "scenarios_question"):
        st.session_state.pop(picker, None)
ref = st.session_state.get("question_ref") or DEFAULT_QUESTION
kinds = {k.name: k for k in scenarios.all_types()}
left, right = st.columns(2)
scenario = left.segmented_control("Scenario", list(kinds), format_func=lambda n: md(kinds[n].title),
                                  default=ref[1] if ref[1] in kinds else None, required=True,
                                  key="scenarios_scenario")
if not scenario:
    st.info("Choose a scenario.")
    st.stop()
kind = kinds[scenario]
offered = {s.key: s.title for s in kind.sources}
if st.session_state.get("scenarios_source") not in (None, *offered):  # kept from a scenario with other sources
    del st.session_state["scenarios_source"]
source = right.segmented_control("Source", list(offered), format_func=offered.get,
                                 default=ref[0] if ref[0] in offered else first_with_questions(list(offered), scenario),
                                 required=True, key="scenarios_source")
if kind.description:
    st.caption(md(kind.description) + ("" if kind.origin == "built-in" else f" Plugin folder: {md_code(kind.origin)}."))
if not kind.can_check:
    st.warning("This scenario declares no simulator: agents run and answers are recorded, but decisions cannot be "
               "checked.", icon=":material/block:")
not_loaded = scenarios.problems()
if not_loaded:
    with st.expander(f"Scenario folders not loaded ({len(not_loaded)})", icon=":material/error:"):
        st.markdown("\n".join(f"- {md(p)}" for p in not_loaded))
        st.caption(f"Scenarios folder: {md_code(scenarios.scenarios_dir())}; `python -m core scenario check PATH` says more.")
try:
    questions = catalog.questions(source, scenario, dqa_root())
except DQAError as e:
    st.info(f"{md(e)}. The **Settings** page sets the DQA directory for this session.", icon=":material/folder_off:")
    st.stop()
if not questions:
    st.info(f"This question set has no {md(scenario)} questions.", icon=":material/folder_off:")
    st.stop()

same_list = (source, scenario) == tuple(ref[:2]) and ref[2] <= len(questions)
question = st.selectbox("Question", questions, index=ref[2] - 1 if same_list else 0,
                                 format_func=question_label, key="scenarios_question",
                                 help="Type to search by number, country, home node or goods.")
hidden = answers_hidden()
try:
    database = catalog.database(question, dqa_root())
except DQAError as e:
    st.info(md(e), icon=":material/folder_off:")
    st.stop()
select_question(question)

text, facts = st.columns([3, 1])
with text:
    with st.container(border=True):
        st.markdown(md(question.question.strip().replace("<Question>", "").strip("=\n ")))
        if question.goal:
            st.markdown(f"*{md(question.goal.strip())}*")
    with st.expander("Business rules"):
        st.markdown(md(question.business_rules.strip()))
    notes = kind.notes(question, dqa_root())
    if notes:
        with st.expander(f"Repaired data defects ({len(notes)})", icon=":material/build:"):
            st.markdown("\n".join(f"- {md(n)}" for n in notes))
with facts:
    st.metric("Candidate decisions", len(candidates(question, database)))
    if hidden:
        st.metric("Labelled best decision", "hidden", help="Answers are hidden in this session (toggle above).")
    else:
        if question.answer is None:
            st.metric("Labelled best decision", "none")
        else:
            decision_metric(st, "Labelled best decision", kind, question, question.answer, database)
    st.caption(f"{md_code(question.id)} · question {md(question.question_num)} as the benchmark's files number it"
               + (f" · database {md(question.database_ref)}" if question.database_ref else ""),
               help=f"Database content key {md_code(database.key)}.")

st.subheader("Database")
# Only the open tab is drawn (a tab switch reruns the page): the first look waits for no table.
network, tables = st.tabs(["Network", "Tables"], key="scenarios_database_tab", on_change="rerun")
if network.open:
    with network:
        options = kind.view_options()
        names = kind.node_names(question, database)
        find_key = f"scenarios_find-{question.id}"
        chosen = {}
        defaults = {f"scenarios_view_{kind.name}_{o.name}": o.default for o in options if o.widget == "buttons"}
        controls = st.columns(len(options) + bool(names)) if options or names else []
        for column, option in zip(controls, options):
            if option.widget == "buttons":
                chosen[option.name] = column.segmented_control(
                    option.label, list(option.choices), default=option.default, format_func=option.choices.get,
                    required=True, help=option.help or None, key=f"scenarios_view_{kind.name}_{option.name}")
            else:
                chosen[option.name] = column.select_slider(option.label, list(option.choices), value=option.default,
                                                           format_func=option.choices.get, help=option.help or None)
        around = None
        if names:
            around = controls[-1].selectbox(f"Find a node ({len(names)})", list(names), index=None,
                                            format_func=names.get, key=find_key, placeholder="Type a name",
                                            on_change=show_default_view, args=(defaults,),
                                            help="Show the node and its upstream nodes (its neighbourhood).")
        figure = kind.network(question, database, best=None if hidden else question.answer, around=around, **chosen)
        if figure is None:
            st.info("This scenario declares no network view: its data is in the **Tables** tab.", icon=":material/table:")
        else:
            meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
            if meta.get("caption"):
                st.caption(md(meta["caption"]))
            event = st.plotly_chart(figure, key=f"network-{question.id}", on_select="rerun", selection_mode="points",
                                    config={"displaylogo": False, "scrollZoom": False})
            picked = [p["customdata"] for p in event["selection"]["points"] if p.get("customdata")]
            rows = kind.node_rows(database, picked[0]) if picked else {}
            if rows:
                title, explore = st.columns([4, 1], vertical_alignment="center")
                title.markdown(f"**{md((names or {}).get(picked[0], picked[0]))}**")  # its name, not its id
                if names and picked[0] in names and picked[0] != around:
                    explore.button("Explore from here", icon=":material/center_focus_strong:", on_click=explore_from,
                                   args=(find_key, picked[0], defaults), help="Centre the view on this node")
                for table in rows.values():
                    st.caption(f"{md(table.name)}: {row_count(len(table.rows))}")
                    show(table, min(320, 38 + 35 * max(1, len(table.rows))),
                         lambda r, name=table.name: kind.own_row(question, name, r))
            else:
                st.caption("Click a node to see its rows (the question's own highlighted). Drag to pan, zoom with "
                           "the chart's toolbar, double-click to reset.")
if tables.open:
    with tables:  # one table at a time: a big database's every table would be sent to the browser at each rerun
        by_name = {t.name: t for t in database.tables}
        shown = st.segmented_control("Table", list(by_name), default=next(iter(by_name)), required=True,
                                     format_func=lambda n: f"{md(n)} ({len(by_name[n].rows)})", key=f"scenarios_table_{kind.name}")
        show(by_name.get(shown) or next(iter(by_name.values())), 360)

note, rescan = st.columns([5, 1], vertical_alignment="center")
note.caption(f"Your own decision problems: scenario folders in {md_code(scenarios.scenarios_dir())} (`python -m core "
             "scenario new NAME` writes one; docs/scenarios.md).")
if rescan.button("Rescan", icon=":material/refresh:", help="Look for new or changed scenario folders",
                 **access.disabled("rescan")):
    with access.asking():
        choices.rescan(who=access.current())
        st.rerun()
