"""Who is using this session and what the gate (core.auth.gate) lets them do: with sign-in configured (an ``[auth]``
table in the secrets file, Streamlit's st.login), the signed-in person and the role their provider's verified
claims give them; without it, the admin ``local user`` (one person on this machine; a name given on Settings
labels their actions). ``gate()`` runs first on every page: a secrets file that cannot be read stops the app
naming the file and line. The actions themselves ask the gate where they are carried out (core.jobs, core.actions,
...) with ``current()``; ``asking`` shows such a refusal, ``allowed``/``disabled`` only hide what it would
refuse."""
from __future__ import annotations

import tomllib
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from core.auth import config, exposure, sessions
from core.auth.config import ConfigError
from core.auth.gate import Action, Refused, allows, check_session
from core.auth.roles import LOCAL_USER, Identity, PermissionDenied, check_config, identity_of, local_admin
from ui.untrusted import md


def secrets_problem() -> str | None:
    """Why sign-in's configuration cannot be used (a secrets file Streamlit reads that is no TOML, with its file
    and line, or a ``[planrag]`` entry that makes no sense); None when it can."""
    for name in st.get_option("secrets.files"):
        path = Path(name).expanduser()
        try:
            with open(path, "rb") as f:
                tomllib.load(f)
        except FileNotFoundError:
            continue
        except (OSError, tomllib.TOMLDecodeError) as e:
            return f"The secrets file {path} cannot be read ({e}): the workbench serves nothing until it is fixed."
    try:
        check_config(config.planrag())
    except ConfigError as e:
        return f"{e}: the workbench serves nothing until it is fixed."
    return None


def signin_on() -> bool:
    """Whether this server signs people in (Streamlit has an [auth] table in its secrets). A secrets file that
    cannot be read is never "no sign-in": ``gate()`` stops every page first."""
    return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)


def current() -> Identity | None:
    """This session's identity; None for one not signed in, or whom the configuration gives no role."""
    if not signin_on():
        return local_admin(st.session_state.get("reviewer") or LOCAL_USER)
    if not st.user.is_logged_in:
        return None
    return identity_of(st.user.to_dict(), config.planrag())


NAME = "reviewer"  # this session's name without sign-in, given once (the sidebar or where an action asks for it)


def named() -> bool:
    """Whether this session has an identity of its own: signed in, or (single-user mode) a name given."""
    return signin_on() or bool(st.session_state.get(NAME))


def _use_name(key: str) -> None:
    """The name typed in ``key``'s box becomes the session's; an empty box never takes a given name away (a box
    emptied, or a stale empty value from the browser, would leave every review button disabled)."""
    st.session_state[NAME] = st.session_state.get(key, "").strip() or st.session_state.get(NAME, "")


def ask_name(key: str, label: str = "Your name, recorded with what you do here") -> bool:
    """Where an action records who took it and this session has no identity yet (single-user mode, no name given):
    ask for the name, once; every action and presence line of the session then use it. Whether there is one."""
    # One element here, asked or not: what follows keeps its place once the name is given, so that the rerun drawing
    # it does not show it twice for a moment (its copy of the run before, one place down, stays until the run ends).
    slot = st.container()
    if named():
        return True
    slot.text_input(label, key=key, on_change=_use_name, args=(key,),
                    placeholder="e.g. Ana Costa (press Enter)",
                    help="Asked once for this session (change it in the sidebar): your reviews, stops, branches and "
                         "grade overrides are recorded under it.")
    return False


def _name_in_sidebar() -> None:
    """Single-user mode: the session's name in the sidebar of every page, given once (empty until then: never the
    Unix account)."""
    st.session_state["reviewer_input"] = st.session_state.get(NAME, "")
    with st.sidebar:
        st.text_input("Your name", key="reviewer_input", on_change=_use_name, args=("reviewer_input",),
                      placeholder="e.g. Ana Costa (press Enter)",
                      help="Kept for this session: your reviews, stops, branches and grade overrides are recorded "
                           "under it, and the inbox shows it beside the runs you look at.")
        if not st.session_state.get(NAME):
            st.caption(f"No name given: what you do is recorded as {LOCAL_USER}; reviews ask for a name.")


def allowed(action: Action) -> bool:
    """Whether the gate would let this session take ``action`` (to hide or disable what it would refuse)."""
    return allows(current(), action)


@contextmanager
def asking():
    """Around a call of an action's core function (which asks the gate with ``current()``): a refusal is shown and
    ends the block, the action not taken."""
    try:
        yield
    except Refused as e:
        show_refusal(e)


def show_refusal(error: PermissionDenied) -> None:
    st.error(f"Refused: {md(error)}.", icon=":material/block:")  # from a button's callback: at the top of the page


def disabled(action: Action) -> dict:
    """Keyword arguments that disable a widget for what the gate would refuse (the action asks it again)."""
    return {} if allowed(action) else {"disabled": True}


def role() -> str:
    who = current()
    return who.role if who else "none"


def _signin_screen(why: str = "") -> None:
    st.title("PlanRAG Workbench")
    if why:
        st.warning(md(why), icon=":material/lock_clock:")
    st.write("Sign in with your organisation's account to use the workbench.")
    if st.button("Sign in", type="primary", icon=":material/login:", key="signin"):
        st.login()
    st.stop()


def secure_cookies() -> None:
    """Make Streamlit's sign-in cookies ``Secure`` whenever the public URL (``[auth] redirect_uri``) is https:
    Streamlit sets them without it (for Safari over plain http). Its cookie writer is wrapped once per process."""
    from streamlit.auth_util import get_redirect_uri, get_secrets_auth_section  # heavy: Streamlit's sign-in parts
    from streamlit.web.server.starlette import starlette_auth_routes as routes  # heavy: as above

    if getattr(routes._set_single_cookie, "planrag_secure", False):
        return
    plain = routes._set_single_cookie

    def set_cookie(response, cookie_name: str, serialized_value: str) -> None:
        plain(response, cookie_name, serialized_value)
        section = get_secrets_auth_section()
        if section and (get_redirect_uri(section) or "").lower().startswith("https://"):
            name, value = response.raw_headers[-1]
            response.raw_headers[-1] = (name, value + b"; secure")

    set_cookie.planrag_secure = True
    routes._set_single_cookie = set_cookie


def _sign_out(who: Identity | None) -> None:
    """End the sign-in on the server (every tab, every copy of the cookie), then Streamlit's own sign-out."""
    if who is not None:
        sessions.end(who)
    st.logout()


def gate() -> None:
    """What every page runs first: refuse a sign-in configuration that cannot be read, refuse to serve a network
    without sign-in (core.auth.exposure), ask for sign-in when it is configured or when this session's has ended
    (signed out elsewhere, expired, claims too old), show who is signed in (with sign-out)."""
    problem = secrets_problem()
    if problem:
        st.error(md(problem), icon=":material/gpp_bad:")
        st.stop()
    reason = exposure.refusal(st.get_option("server.address"), signin_on())
    if reason:
        st.error(reason, icon=":material/gpp_bad:")
        st.stop()
    if not signin_on():
        _name_in_sidebar()
        return
    secure_cookies()
    if not st.user.is_logged_in:
        _signin_screen()
    who = current()
    if who is not None:
        try:
            check_session(who)
        except Refused as e:
            _signin_screen(str(e))
    with st.sidebar:
        if who is None:
            st.error(f"{md(st.user.get('email') or st.user.get('sub') or '')}: your account has no role here. Ask "
                     "the workbench's admin for one.", icon=":material/block:")
        else:
            st.caption(f"Signed in as **{md(who.name)}** · {who.role}")
        if st.button("Sign out", icon=":material/logout:", key="signout"):
            _sign_out(who)
    if who is None:
        st.stop()
