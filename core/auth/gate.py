"""The one authorization gate: every action a person can take is named here (``Action``) with the least role it
needs (``NEEDS``), and ``authorize(identity, action)`` is called where the action is carried out (core.jobs for
runs and benchmarks, the job queue's worker (``authorize_job``), core.actions for a session's settings, tests,
rescans and grade overrides); a page only hides what the gate would refuse. A signed-in identity is also refused once its sign-in has expired (ID token's ``exp``, or
its claims older than ``claims_max_age_s``) or was signed out (the run store's record, core.auth.sessions)."""
from __future__ import annotations

import time
from typing import Literal, get_args

from core.auth import config, sessions
from core.auth.roles import ROLES, Identity, PermissionDenied, as_record, reassessed

Action = Literal[
    "start", "samples", "review", "query_decision", "inbox_approve", "inbox_reject", "inbox_close", "stop",
    "resume", "branch", "override", "benchmark_start", "benchmark_stop", "benchmark_rerun", "test_connections",
    "rescan", "store_switch", "settings", "endpoints", "databases", "server_paths",
]
ACTIONS: tuple[Action, ...] = get_args(Action)

#: The least role each action needs, and what it is as a refusal names it.
NEEDS: dict[Action, tuple[str, str]] = {
    "start": ("analyst", "start runs"),
    "samples": ("analyst", "start samples of a run"),
    "review": ("analyst", "review paused runs"),
    "query_decision": ("analyst", "approve or reject a query"),
    "inbox_approve": ("analyst", "approve a pause from the inbox"),
    "inbox_reject": ("analyst", "reject a pause from the inbox"),
    "inbox_close": ("analyst", "close runs from the inbox"),
    "stop": ("analyst", "stop runs"),
    "resume": ("analyst", "resume runs"),
    "branch": ("analyst", "branch runs"),
    "override": ("analyst", "override grades"),
    "benchmark_start": ("analyst", "start benchmarks"),
    "benchmark_stop": ("analyst", "stop benchmarks"),
    "benchmark_rerun": ("analyst", "rerun benchmarks"),
    "test_connections": ("analyst", "test connections"),
    "rescan": ("analyst", "rescan the scenarios folder"),
    "store_switch": ("admin", "go on with a replaced run store"),
    "settings": ("analyst", "change the settings of runs (model endpoint, limits)"),
    "endpoints": ("admin", "change the model endpoint settings"),
    "databases": ("admin", "change database connections"),
    "server_paths": ("admin", "change the files and folders the server reads"),
}


class Refused(PermissionDenied):
    """The gate's refusal: the message names who, the action and why."""


def allows(who: Identity | None, action: Action) -> bool:
    """Whether ``authorize`` would let ``who`` take ``action`` (for a page to hide what would be refused)."""
    try:
        authorize(who, action)
    except Refused:
        return False
    return True


def check_session(who: Identity, now: float | None = None, what: str = "go on") -> None:
    """Refused when ``who``'s sign-in has expired (the ID token, or claims older than ``claims_max_age_s``) or was
    signed out; nothing for a session that holds, or an identity that is not signed in."""
    if not who.signed_in:
        return
    if who.valid_until is not None and (time.time() if now is None else now) >= who.valid_until:
        raise Refused(f"the sign-in of {who.name} has expired: sign in again to {what}")
    if sessions.ended(who):
        raise Refused(f"{who.name} signed out: sign in again to {what}")


def authorize(who: Identity | None, action: Action, now: float | None = None) -> Identity:
    """``who``, when it may take ``action`` now; Refused saying why otherwise (not signed in, signed out, expired
    sign-in, role too low). ValueError for an action the gate does not know."""
    if action not in NEEDS:
        raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
    least, what = NEEDS[action]
    if who is None:
        raise Refused(f"you are not signed in: sign in to {what}")
    check_session(who, now, what)
    _role_allows(who, least, what)
    return who


def _role_allows(who: Identity, least: str, what: str) -> None:
    if who.role not in ROLES or ROLES.index(who.role) < ROLES.index(least):
        raise Refused(f"{who.name} is signed in as {who.role}, and only "
                      f"{' or '.join(ROLES[ROLES.index(least):])} may {what}")


def authorize_job(who: Identity | None, action: Action, asked_at: float) -> Identity:
    """The gate asked again by a worker carrying out ``action`` that ``who`` asked for at ``asked_at`` (a queued job):
    ``who``'s role as the server's configuration gives it now, with the sign-in as it was when the job was asked.
    Refused saying why; ConfigError (a Refused's cause) when the configuration cannot be read: fail closed."""
    if action not in NEEDS:
        raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
    least, what = NEEDS[action]
    if who is None:
        raise Refused(f"the job names no one: no one may {what} through it")
    try:
        now = reassessed(who, config.planrag()) if who.signed_in else who
    except config.ConfigError as e:
        raise Refused(f"the server's sign-in configuration cannot be read ({e}), so no job acts for {who.name}") from e
    if who.valid_until is not None and asked_at >= who.valid_until:
        raise Refused(f"the sign-in of {who.name} had expired when the job was asked")
    try:
        _role_allows(now, least, what)
    except Refused as e:
        raise Refused(f"refused when a worker took the job up: {e} (roles as the server's configuration gives "
                      "them now)") from None
    return now


def asked_by(who: Identity, action: Action) -> dict:
    """What a job says of who asks for it by the gate's ``action``, now (core.jobs.payload.Asked): the worker
    checks it again (``authorize_job``)."""
    return {"who": as_record(who), "action": action, "at": time.time()}
