"""Scenarios: pick a source and a question, read its rules and question, see its database as a network and as
tables; clicking a node shows its rows."""
import streamlit as st

from core import catalog, figures
from core.dqa import DQAError
from core.scenario import SCENARIOS, candidates
from pages.common import dqa_root, select_question


def question_label(q) -> str:
    return f"{q.number}. {q.target}" + (f" — label: {q.answer}" if q.answer is not None else "")


def show(table, height: int) -> None:
    st.dataframe({c: table.column(c) for c in table.column_names}, hide_index=True, height=height)


st.title("Scenarios")

# Keyed widgets keep the user's choice while their defaults follow the session's question (set on other pages too).
ref = st.session_state.get("question_ref") or ("demo", "locating", 1)
left, right = st.columns(2)
source = left.segmented_control("Source", list(catalog.SOURCES), format_func=catalog.SOURCES.get, default=ref[0],
                                key="scenarios_source")
scenario = right.segmented_control("Scenario", SCENARIOS, format_func=str.title, default=ref[1],
                                   key="scenarios_scenario")
if not source or not scenario:
    st.info("Choose a source and a scenario.")
    st.stop()
try:
    questions = catalog.questions(source, scenario, dqa_root())
except DQAError as e:
    st.info(f"{e}. The **Settings** page sets the DQA directory for this session.", icon=":material/folder_off:")
    st.stop()

same_list = (source, scenario) == tuple(ref[:2]) and ref[2] <= len(questions)
question = st.selectbox("Question", questions, index=ref[2] - 1 if same_list else 0, format_func=question_label,
                        key="scenarios_question", help="Type to search by number, country, home node or goods.")
try:
    database = catalog.database(question, dqa_root())
except DQAError as e:
    st.info(str(e), icon=":material/folder_off:")
    st.stop()
select_question(question)

text, facts = st.columns([3, 1])
with text:
    with st.container(border=True):
        st.markdown(question.question.strip().replace("<Question>", "").strip("=\n "))
        if question.goal:
            st.markdown(f"*{question.goal.strip()}*")
    with st.expander("Business rules"):
        st.markdown(question.business_rules.strip())
    notes = catalog.dqa_benchmark(dqa_root()).notes(question) if question.source == "dqa" else []
    if notes:
        with st.expander(f"Repaired data defects ({len(notes)})", icon=":material/build:"):
            st.markdown("\n".join(f"- {n}" for n in notes))
with facts:
    st.metric("Candidate decisions", len(candidates(question, database)))
    st.metric("Labelled best decision", str(question.answer) if question.answer is not None else "none")
    st.caption(f"`{question.id}` · source id {question.question_num} · database `{database.key}`")

st.subheader("Database")
network, tables = st.tabs(["Network", "Tables"])
with network:
    if question.scenario == "locating":
        figure = figures.trade_network(question, database, best=question.answer)
    else:
        detail, width = st.columns(2)
        hops = detail.select_slider("Detail around the goods", list(figures.MARKET_DETAIL), value=2,
                                    format_func=figures.MARKET_DETAIL.get)
        cap = width.slider("Buildings per column", 5, 100, 20, help="Those with the largest flows first.")
        figure = figures.market(question, database, hops=hops, max_per_column=cap, best=question.answer)
    event = st.plotly_chart(figure, key=f"network-{question.id}", on_select="rerun", selection_mode="points",
                            config={"displaylogo": False, "scrollZoom": True})
    picked = [p["customdata"] for p in event["selection"]["points"] if p.get("customdata")]
    rows = figures.node_rows(database, picked[0]) if picked else {}
    if rows:
        st.markdown(f"**{picked[0]}**")
        for table in rows.values():
            st.caption(f"{table.name}: {len(table.rows)} rows")
            show(table, min(320, 38 + 35 * max(1, len(table.rows))))
    else:
        st.caption("Click a node to see its rows. Drag to pan, scroll to zoom, double-click to reset.")
with tables:
    for tab, table in zip(st.tabs([f"{t.name} ({len(t.rows)})" for t in database.tables]), database.tables):
        with tab:
            show(table, 360)
