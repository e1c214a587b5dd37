"""Sign-out on the server: Streamlit's st.logout clears the browser's cookie and the tab that signed out, but other
tabs keep their session and a copy of the cookie would still sign in. So a sign-out is recorded in the run store
(its store_meta: the SQLite file or the team store, shared by every replica) by the sign-in session's key (issuer,
subject and issue time of its ID token), and the gate refuses that session from then on."""
from __future__ import annotations

from core.auth.roles import Identity
from core.config import home
from core.config import settings as config
from core.store.runs import RunStore


_stores: dict[str, RunStore] = {}  # one opened run store per home: the gate asks at every action


def _store() -> RunStore:
    home.use_fallback()
    path = config.DATA_HOME / "runs.sqlite"
    if str(path) not in _stores:
        _stores[str(path)] = RunStore(path)
    return _stores[str(path)]


def end(who: Identity) -> None:
    """Sign ``who``'s sign-in session out on the server (nothing for an identity that is not signed in)."""
    if who.signed_in and who.session:
        _store().end_session(who.session, who.valid_until)


def ended(who: Identity) -> bool:
    """Whether ``who``'s sign-in session was signed out."""
    return bool(who.signed_in and who.session and _store().session_ended(who.session))
