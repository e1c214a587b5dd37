"""Serving beyond this machine without sign-in is refused unless the operator says so
(``PLANRAG_ALLOW_ANONYMOUS=1``): anyone who reaches the port could then start runs, review other people's plans
and change settings."""
from __future__ import annotations

import ipaddress
import os

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
OPT_OUT = "PLANRAG_ALLOW_ANONYMOUS"


def is_loopback(address: str | None) -> bool:
    """Whether a listening address reaches this machine only (an empty address listens on every interface)."""
    address = (address or "").strip().strip("[]").lower()
    if address in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def anonymous_allowed() -> bool:
    return os.environ.get(OPT_OUT, "").strip().lower() in ("1", "true", "yes")


def refusal(address: str | None, signin: bool) -> str | None:
    """Why the app must not serve on ``address``; None when it may (loopback, sign-in, or the opt-out)."""
    if signin or is_loopback(address) or anonymous_allowed():
        return None
    where = f"on {address}" if address else "on every network interface"
    return (f"The workbench listens {where} without sign-in: anyone who reaches it could start runs, review "
            "others' plans and change settings. Set up sign-in (an [auth] table in .streamlit/secrets.toml, see "
            f"the README), listen on localhost, or start it with {OPT_OUT}=1 to serve without sign-in anyway.")
