"""Shared fixtures. Outside resources (DQA data, MariaDB, Neo4j) are skipped with a reason when absent,
unless REQUIRE_<NAME>=1 is set (as CI does), which turns the skip into a failure."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def require(name: str, reason: str):
    """Skip (or fail, when REQUIRE_<NAME>=1) because resource ``name`` is missing."""
    if os.environ.get(f"REQUIRE_{name.upper()}") == "1":
        pytest.fail(f"{reason} (REQUIRE_{name.upper()}=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def dqa_dir() -> Path:
    """The DQA data folder (DQA_DIR, default ../shared/dqa)."""
    from core.config.settings import dqa_dir as configured

    path = configured()
    if path is None or not (path / "locating").is_dir():
        require("dqa", f"DQA data not found (set DQA_DIR to the data/ folder of myeon9h/PlanRAG; looked at {path})")
    return path


@pytest.fixture(scope="session")
def dqa(dqa_dir):
    """The imported benchmark, shared by all tests of a session."""
    from core.scenarios.dqa.source import DQA

    return DQA(dqa_dir)


@pytest.fixture(scope="session")
def neo4j_server():
    """A Neo4j-protocol server for the session, put in the environment (NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD)
    where every backend open reads it: the one NEO4J_URI names, else the local ArcadeDB server (core.backends.graph_server)
    started on free ports when it is installed."""
    from core.backends import graph_server
    from core.backends.registry import unavailable

    if os.environ.get("NEO4J_URI"):
        reason = unavailable("neo4j")
        if reason:
            require("neo4j", reason)
        yield os.environ["NEO4J_URI"]
        return
    if not graph_server.installed():
        require("neo4j", "no Neo4j-protocol server: set NEO4J_URI (with NEO4J_USER, NEO4J_PASSWORD), or install the "
                         "local one with: python -m core graph-server install")
    server = graph_server.start(0, 0, heap_mb=512, command_timeout_s=20, die_with_parent=True)
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in server.env().items():
                mp.setenv(name, value)
            yield server.uri
    finally:
        graph_server.stop(server)
