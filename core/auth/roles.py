"""Roles and identities. A viewer reads runs, benchmarks and plans; an analyst also starts, reviews, stops, resumes
and branches runs, runs benchmarks and overrides grades; an admin also sets what the server uses (model endpoints,
database connections, the folders and files the server reads). What each action needs: core.auth.gate.

A signed-in person is known by what the provider vouches for: the e-mail address of the ID token when
``email_verified`` is true (or the operator lists the provider in ``[planrag] unverified_email_providers``), else
the issuer and subject; never a display name. The role comes from the claim named by ``role_claim`` (default
``roles``) or the ``[planrag.roles]`` mapping of verified e-mail addresses (compared case-blind), subjects (exact)
and ``group:NAME`` entries (from the ``groups`` claim); the highest found wins, anyone else gets ``default_role``
(default viewer). Without sign-in the one person on this machine is the admin ``local user``; the command line's
is the admin ``local operator`` (whoever runs commands on the server's machine is its operator), never the Unix
account's name."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from core.auth.config import ConfigError
from core.model.run_settings import LOCAL_OPERATOR

ROLES = ("viewer", "analyst", "admin")  # each may do what the ones before it may
LOCAL_USER = "local user"  # who acts without sign-in (never the Unix account)
#: How long a sign-in's claims (its role) are trusted before the person signs in again, by default (seconds).
CLAIMS_MAX_AGE_S = 15 * 60


class PermissionDenied(PermissionError):
    """An action the identity may not take; the message names who and why."""


@dataclass(frozen=True)
class Identity:
    """Who acts: ``name`` as recorded with every stored action (the verified e-mail, else ``SUBJECT at ISSUER``),
    and the role. A signed-in identity keeps its session and what its role was found from, so that a worker can
    find its role again under the configuration of when it acts (``reassessed``)."""

    name: str
    role: str
    email: str | None = None
    groups: tuple[str, ...] = field(default=())
    signed_in: bool = False
    session: str = ""  # issuer, subject and issue time of its ID token, for sign-out
    valid_until: float | None = None  # the token's expiry or the claims' age limit, whichever comes first
    subject: str = ""  # subject, issuer and the role claim's roles: what its role was found from
    issuer: str = ""
    claimed: tuple[str, ...] = field(default=())


def local_admin(name: str = LOCAL_USER) -> Identity:
    """The user of single-user mode (``local user``, or the name given on Settings)."""
    return Identity(name, "admin")


def local_operator() -> Identity:
    """Who acts on the command line: the operator of the machine (an admin), recorded as ``local operator``."""
    return Identity(LOCAL_OPERATOR, "admin")


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def check_config(planrag: Mapping) -> None:
    """ConfigError for a role mapping, default role or claims age that makes no sense."""
    for role in planrag.get("roles", {}):
        if role not in ROLES:
            raise ConfigError(f"[planrag.roles] names the role {role!r}; the roles are {', '.join(ROLES)}")
    if planrag.get("default_role", "viewer") not in (*ROLES, "none"):
        raise ConfigError(f"[planrag] default_role must be one of {', '.join(ROLES)} or none")
    age = planrag.get("claims_max_age_s", CLAIMS_MAX_AGE_S)
    if isinstance(age, bool) or not isinstance(age, (int, float)) or age <= 0:
        raise ConfigError("[planrag] claims_max_age_s must be a positive number of seconds")
    if not isinstance(planrag.get("unverified_email_providers", []), list):
        raise ConfigError("[planrag] unverified_email_providers must be a list of provider names")


def verified_email(claims: Mapping, planrag: Mapping) -> str | None:
    """The claims' e-mail address, lower-cased, when the provider vouches for it; else None."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        return None
    trusted = claims.get("email_verified") is True or str(claims.get("email_verified")).lower() == "true"
    provider = str(claims.get("provider") or "default")
    if trusted or provider in planrag.get("unverified_email_providers", []):
        return email.strip().lower()
    return None


def identity_of(claims: Mapping, planrag: Mapping) -> Identity | None:
    """The identity of a signed-in person's ID-token claims under the ``[planrag]`` configuration; None when the
    configuration gives such a person no role (``default_role = "none"``) or the claims name no one."""
    check_config(planrag)
    email = verified_email(claims, planrag)
    subject, issuer = str(claims.get("sub") or ""), str(claims.get("iss") or "")
    if not (email or subject):
        return None
    groups = tuple(_strings(claims.get(planrag.get("groups_claim", "groups"))))
    claimed = tuple(r for r in _strings(claims.get(planrag.get("role_claim", "roles"))) if r in ROLES)
    role = _role(email, subject, groups, claimed, planrag)
    if role == "none":
        return None
    issued = _number(claims.get("iat"))
    limits = [t for t in (_number(claims.get("exp")),
                          issued + planrag.get("claims_max_age_s", CLAIMS_MAX_AGE_S) if issued else None) if t]
    name = email or (f"{subject} at {issuer}" if issuer else subject)
    return Identity(name, role, email, groups, signed_in=True, session=f"{issuer}|{subject}|{claims.get('iat')}",
                    valid_until=min(limits) if limits else None, subject=subject, issuer=issuer, claimed=claimed)


def _role(email: str | None, subject: str, groups: tuple[str, ...], claimed: tuple[str, ...],
          planrag: Mapping) -> str:
    """The highest role the role claim (``claimed``) and the mapping give; else the default role (maybe none)."""
    found = list(claimed)
    wanted_groups = {f"group:{g}".lower() for g in groups}
    for role, members in planrag.get("roles", {}).items():
        for member in _strings(members):
            if (member == subject or (email and member.lower() == email)
                    or (member.lower().startswith("group:") and member.lower() in wanted_groups)):
                found.append(role)
    return max(found, key=ROLES.index) if found else planrag.get("default_role", "viewer")


def reassessed(who: Identity, planrag: Mapping) -> Identity:
    """``who`` with the role the configuration ``planrag`` gives it now (a worker acting later for a signed-in
    person: a role taken away since counts; ``none`` when it gives none). One not signed in keeps its role."""
    if not who.signed_in:
        return who
    check_config(planrag)
    return replace(who, role=_role(who.email, who.subject, who.groups, who.claimed, planrag))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def as_record(who: Identity) -> dict:
    """``who`` as a job of the queue carries it (core.jobs.payload.Who): every field, the groups and roles as lists."""
    return {"name": who.name, "role": who.role, "email": who.email, "groups": list(who.groups),
            "signed_in": who.signed_in, "session": who.session, "valid_until": who.valid_until,
            "subject": who.subject, "issuer": who.issuer, "claimed": list(who.claimed)}


def from_record(record: Mapping) -> Identity:
    """The identity a job carries (``as_record``)."""
    return Identity(**{**record, "groups": tuple(record.get("groups") or ()),
                       "claimed": tuple(record.get("claimed") or ())})
