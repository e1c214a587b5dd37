"""Roles and what each may do. A viewer reads runs, benchmarks and plans; an analyst also starts and stops runs,
reviews, branches and overrides grades; an admin also sets what the server uses: model endpoints, database
connections and the folders and files the server reads.

A signed-in person's role comes from the identity provider's claims: the claim named by ``role_claim`` (default
``roles``) holding a role name, or the ``[planrag.roles]`` mapping of e-mail addresses, subjects and
``group:NAME`` entries (from the ``groups`` claim) to roles; the highest role found wins, and anyone signed in with
none gets ``default_role`` (default viewer: least privilege). Without sign-in (one person on this machine) and on
the command line the user is the local admin."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.auth.config import ConfigError

ROLES = ("viewer", "analyst", "admin")  # each may do what the ones before it may

#: The least role each action needs.
ACTIONS = {
    "read": "viewer",
    "run": "analyst", "stop": "analyst", "review": "analyst", "branch": "analyst", "override": "analyst",
    "benchmark": "analyst", "train": "analyst",
    "endpoints": "admin", "databases": "admin", "server_paths": "admin",
}

#: What each action is, as a refusal names it.
ACTION_NAMES = {
    "read": "read runs", "run": "start runs", "stop": "stop runs", "review": "review paused runs",
    "branch": "branch runs", "override": "override grades", "benchmark": "run benchmarks",
    "train": "train plans", "endpoints": "change the model endpoint settings",
    "databases": "change database connections", "server_paths": "change the files and folders the server reads",
}


class PermissionDenied(PermissionError):
    """An action the identity's role does not allow; the message names both."""


@dataclass(frozen=True)
class Identity:
    """Who acts: ``name`` as recorded with reviews, overrides, stops and branches (the e-mail address when the
    provider gives one), and the role."""

    name: str
    role: str
    email: str | None = None
    groups: tuple[str, ...] = field(default=())
    signed_in: bool = False

    def can(self, action: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(ACTIONS[action])

    def require(self, action: str) -> None:
        """PermissionDenied unless the role allows ``action``."""
        if not self.can(action):
            raise PermissionDenied(f"{self.name} is signed in as {self.role}, and only "
                                   f"{' or '.join(ROLES[ROLES.index(ACTIONS[action]):])} may "
                                   f"{ACTION_NAMES[action]}")


def local_admin(name: str) -> Identity:
    """The user of single-user mode and of the command line."""
    return Identity(name, "admin")


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def check_config(planrag: Mapping) -> None:
    """ConfigError for a role mapping or default role that names no role."""
    for role in planrag.get("roles", {}):
        if role not in ROLES:
            raise ConfigError(f"[planrag.roles] names the role {role!r}; the roles are {', '.join(ROLES)}")
    if planrag.get("default_role", "viewer") not in (*ROLES, "none"):
        raise ConfigError(f"[planrag] default_role must be one of {', '.join(ROLES)} or none")


def identity_of(claims: Mapping, planrag: Mapping) -> Identity | None:
    """The identity of a signed-in person's claims (as the provider's ID token gives them) under the ``[planrag]``
    configuration; None when the configuration gives such a person no role (``default_role = "none"``)."""
    check_config(planrag)
    email = claims.get("email") or None
    subject = str(claims.get("sub") or "")
    groups = tuple(_strings(claims.get(planrag.get("groups_claim", "groups"))))
    found = [r for r in _strings(claims.get(planrag.get("role_claim", "roles"))) if r in ROLES]
    keys = {k.lower() for k in (email, subject) if k} | {f"group:{g}".lower() for g in groups}
    for role, members in planrag.get("roles", {}).items():
        if keys & {m.lower() for m in _strings(members)}:
            found.append(role)
    role = max(found, key=ROLES.index) if found else planrag.get("default_role", "viewer")
    if role == "none":
        return None
    return Identity(email or claims.get("name") or subject, role, email, groups, signed_in=True)
