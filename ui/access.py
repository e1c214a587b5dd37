"""Who is using this session and what they may do (core.auth): with sign-in configured (an ``[auth]`` table in the
secrets file, Streamlit's st.login), the signed-in person and the role their identity provider's claims give them;
without it, the local admin (one person on this machine). ``gate()`` runs first on every page; each action calls
``refused(action)`` where it acts (a button's callback or handler), so a hidden or disabled button is never the
only check."""
from __future__ import annotations

import streamlit as st

from core.auth import config, exposure
from core.auth.roles import Identity, PermissionDenied, identity_of, local_admin
from core.model.run_settings import default_reviewer
from ui.untrusted import md


def signin_on() -> bool:
    """Whether this server signs people in (Streamlit has an [auth] table in its secrets)."""
    try:
        return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)
    except Exception:  # a malformed secrets file: Streamlit says so when st.login is used
        return False


def current() -> Identity | None:
    """This session's identity; None for a signed-in person the configuration gives no role."""
    if not signin_on():
        return local_admin(st.session_state.get("reviewer") or default_reviewer())
    if not st.user.is_logged_in:
        return None
    return identity_of(st.user.to_dict(), config.planrag())


def allowed(action: str) -> bool:
    who = current()
    return bool(who and who.can(action))


def refused(action: str) -> bool:
    """Check ``action`` on the server, where it is carried out: True, with the refusal shown, when this session's
    role does not allow it."""
    who = current()
    try:
        if who is None:
            raise PermissionDenied("you are not signed in")
        who.require(action)
    except PermissionDenied as e:
        st.error(f"Refused: {md(e)}.", icon=":material/block:")  # from a button's callback: at the top of the page
        return True
    return False


def disabled(action: str) -> dict:
    """Keyword arguments that disable a widget for a role that may not ``action`` (the action checks again)."""
    return {} if allowed(action) else {"disabled": True}


def role() -> str:
    who = current()
    return who.role if who else "none"


def _signin_screen() -> None:
    st.title("PlanRAG Workbench")
    st.write("Sign in with your organisation's account to use the workbench.")
    if st.button("Sign in", type="primary", icon=":material/login:", key="signin"):
        st.login()
    st.stop()


def gate() -> None:
    """What every page runs first: refuse to serve a network without sign-in (core.auth.exposure), ask for sign-in
    when it is configured, show who is signed in (with sign-out) and the last refusal."""
    reason = exposure.refusal(st.get_option("server.address"), signin_on())
    if reason:
        st.error(reason, icon=":material/gpp_bad:")
        st.stop()
    if not signin_on():
        return
    if not st.user.is_logged_in:
        _signin_screen()
    who = current()
    with st.sidebar:
        if who is None:
            st.error(f"{md(st.user.get('email') or st.user.get('name') or '')}: your account has no role here. Ask the "
                     "workbench's admin for one.", icon=":material/block:")
        else:
            st.caption(f"Signed in as **{md(who.name)}** · {who.role}")
        if st.button("Sign out", icon=":material/logout:", key="signout"):
            st.logout()
    if who is None:
        st.stop()

