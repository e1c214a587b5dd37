"""ArcadeDB's HTTP API, for the one thing its Bolt server cannot do: ArcadeDB keeps node labels and relationship
types in one namespace of schema types, and a type outlives its data. After one graph was loaded into a database
and cleared, a name it used for relationships (DQA Building's ``Demand``) stays a relationship type, and a later
graph that uses the name as a node label (the depot scenario's ``Demand`` table) cannot be created there ("Type
'Demand' is not a vertex type"). The Neo4j loader drops such left-over, empty types with ArcadeDB SQL over HTTP.

The HTTP endpoint is known for the local graph server (core.backends.graph_server keeps its ports and password per Bolt
port); for an ArcadeDB server of one's own, ARCADEDB_COMMAND_URL names it (``command_url``); without either, the loader
says which names clash and the ways out.
"""
from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from urllib.parse import quote, urlsplit

from core.config.settings import DatabaseSettings
from core.backends import graph_server

HTTP_TIMEOUT_S = 10.0
COMMAND_URL_VARIABLE = "ARCADEDB_COMMAND_URL"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def local_server(settings: DatabaseSettings):
    """The local graph server (core.backends.graph_server.Server) that ``settings`` connect to, or None."""

    try:
        parts = urlsplit(settings.neo4j_uri or "")
        port = parts.port
    except ValueError:
        return None
    if parts.hostname not in LOOPBACK or port is None:
        return None
    server = graph_server.status(port)
    if server is None or server.password != settings.neo4j_password or settings.neo4j_user != graph_server.USER:
        return None
    return server


def command_url(settings: DatabaseSettings, database: str | None) -> tuple[str, str, str] | None:
    """Where and as whom to send ArcadeDB SQL for ``database`` of the server ``settings`` connect to: (URL, user,
    password), or None. The local graph server's own; else ``ARCADEDB_COMMAND_URL`` (e.g.
    http://localhost:2480/api/v1/command/graphs), only for the default database and the Bolt URI's host."""
    server = local_server(settings)
    if server is not None:
        return (f"http://127.0.0.1:{server.http_port}/api/v1/command/{quote(database or graph_server.DEFAULT_DATABASE)}",
                graph_server.USER, server.password)
    url = os.environ.get(COMMAND_URL_VARIABLE, "").strip()
    try:
        given, bolt = urlsplit(url), urlsplit(settings.neo4j_uri or "")
        usable = given.scheme in ("http", "https") and given.hostname is not None and given.hostname == bolt.hostname
    except ValueError:
        usable = False
    if not usable or database is not None:
        return None
    return url, settings.neo4j_user, settings.neo4j_password


def drop_types(settings: DatabaseSettings, database: str | None, names: list[str]) -> bool:
    """Drop the (empty) schema types ``names`` from ``database`` (None: the server's default) of the ArcadeDB server
    ``settings`` connect to; False when its HTTP API is not known (``command_url``: nothing dropped). Raises OSError
    when the server refuses."""
    known = command_url(settings, database)
    if known is None:
        return False
    url, user, password = known
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    for name in names:
        body = json.dumps({"language": "sql", "command": f"DROP TYPE `{name.replace('`', '')}` IF EXISTS"})
        request = urllib.request.Request(url, body.encode(), {"Authorization": f"Basic {auth}",
                                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as reply:
                reply.read()
        except urllib.error.HTTPError as e:
            raise OSError(f"ArcadeDB refused to drop type {name}: {e.read().decode(errors='replace')[:300]}") from None
    return True
