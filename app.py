"""PlanRAG Workbench: the Streamlit entry point and page router."""
import streamlit as st

# An emoji icon: the browser would fetch a :material/...: favicon from fonts.gstatic.com (the app works offline).
st.set_page_config(page_title="PlanRAG Workbench", page_icon="🧭", layout="wide")

pages = {
    "Decide": [
        st.Page("pages/scenarios.py", title="Scenarios", icon=":material/hub:", default=True),
        st.Page("pages/run.py", title="Run", icon=":material/play_circle:"),
        st.Page("pages/decision.py", title="Decision check", icon=":material/fact_check:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
    "Review": [
        st.Page("pages/history.py", title="History", icon=":material/history:"),
        st.Page("pages/benchmark.py", title="Benchmark", icon=":material/leaderboard:"),
        st.Page("pages/plans.py", title="Learned plans", icon=":material/route:"),
        st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
    ],
}
st.navigation(pages).run()
