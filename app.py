"""PlanRAG Workbench: the Streamlit entry point and page router."""
import streamlit as st

st.set_page_config(page_title="PlanRAG Workbench", page_icon=":material/account_tree:", layout="wide")

pages = [
    st.Page("pages/scenarios.py", title="Scenarios", icon=":material/hub:", default=True),
    st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
]
st.navigation(pages).run()
