"""Small helpers shared by the pages: the session's settings."""
import streamlit as st

from core.settings import dqa_dir


def dqa_root():
    """The DQA directory of this session: the Settings page's value, else the configured default."""
    return st.session_state.get("dqa_dir") or dqa_dir()
