"""Choices that stay for the session: Streamlit drops a widget's value when its page is left (the widget is not
drawn on the next run), so the value of a widget made with ``key=kept(...)`` is copied to a plain session key at the
start of every run (``keep_choices``, called by app.py) and put back before the widget is made again."""
from __future__ import annotations

import streamlit as st

_KEYS = "_kept_keys"  # the widget keys kept
_VALUES = "_kept_values"  # widget key -> its last value


def kept(key: str) -> str:
    """``key``, for a widget whose value stays when its page is left and opened again in this session."""
    st.session_state.setdefault(_KEYS, set()).add(key)
    values = st.session_state.setdefault(_VALUES, {})
    if key not in st.session_state and key in values:
        st.session_state[key] = values[key]
    return key


def keep_choices() -> None:
    """Copy the kept widgets' current values aside (at the start of a run, before the page's widgets are made)."""
    values = st.session_state.setdefault(_VALUES, {})
    for key in st.session_state.get(_KEYS, ()):
        if key in st.session_state:
            values[key] = st.session_state[key]


def forget(key: str) -> None:
    """Drop a kept widget's value (the next time it is made, it starts from its default)."""
    st.session_state.get(_VALUES, {}).pop(key, None)
    st.session_state.pop(key, None)
