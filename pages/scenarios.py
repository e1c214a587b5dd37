"""Scenarios: pick a source and a question, read its rules and question, browse its database."""
import pandas as pd
import streamlit as st

from core import catalog
from core.dqa import DQAError
from core.scenario import SCENARIOS, candidates
from pages.common import dqa_root, select_question

st.title("Scenarios")

sources = list(catalog.SOURCES)
source = st.segmented_control("Source", sources, format_func=catalog.SOURCES.get, default="demo")
scenario = st.segmented_control("Scenario", SCENARIOS, format_func=str.title, default="locating")
if not source or not scenario:
    st.info("Choose a source and a scenario.")
    st.stop()

try:
    questions = catalog.questions(source, scenario, dqa_root())
except DQAError as e:
    st.info(str(e))
    st.stop()

question = st.selectbox("Question", questions,
                        format_func=lambda q: f"{q.number}. {q.target}" + (f" (answer: {q.answer})" if q.answer else ""))
database = catalog.database(question, dqa_root())
select_question(question)

left, right = st.columns([3, 2])
with left:
    st.subheader("Question")
    st.markdown(f"**{question.question.strip()}**")
    if question.goal:
        st.markdown(question.goal)
    with st.expander("Business rules"):
        st.text(question.business_rules.strip())
with right:
    st.subheader("Decision")
    st.metric("Candidate decisions", len(candidates(question, database)))
    st.metric("Labelled best decision", str(question.answer) if question.answer is not None else "-")
    st.caption(f"Question id `{question.id}` · source id {question.question_num} · database `{database.key}`")

st.subheader("Database")
tabs = st.tabs([f"{t.name} ({len(t.rows)})" for t in database.tables])
for tab, table in zip(tabs, database.tables):
    with tab:
        st.dataframe(pd.DataFrame(table.rows, columns=table.column_names), hide_index=True, height=320)
