"""Choices that stay for the session. Streamlit drops a widget's value when its page is left (the widget is not drawn
on the next run), so a widget made with ``key=kept(...)`` has its value copied to a plain session key each time it is
about to be drawn, and put back from there when it is drawn again after its page was left."""
from __future__ import annotations

import streamlit as st

_VALUES = "_kept_values"  # widget key -> its last value


def kept(key: str) -> str:
    """``key``, for a widget whose value stays when its page is left and opened again in this session (call it
    where the widget is made: ``st.selectbox(..., key=kept("history_Status"))``)."""
    values = st.session_state.setdefault(_VALUES, {})
    if key in st.session_state:
        values[key] = st.session_state[key]  # the value the widget had (or was given) since its last drawing
    elif key in values:
        st.session_state[key] = values[key]
    return key

