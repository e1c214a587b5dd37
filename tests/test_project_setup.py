"""What a newcomer relies on before running anything: the Python version the project declares, pinned and split
requirements, the two make targets, and an app that listens on this machine only and looks nothing up outside."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib

from tests.conftest import ROOT, require


def requirements(name: str) -> list[str]:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_the_project_declares_python_311_and_its_licence():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11" and project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_requirements_are_pinned_and_split():
    runtime, dev = requirements("requirements.txt"), requirements("requirements-dev.txt")
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][\w.]*", r) for r in runtime), runtime
    names = {r.split("==")[0].lower() for r in runtime}
    assert {"openai", "pyarrow", "streamlit"} <= names  # imported directly
    assert not names & {"pytest", "playwright", "ruff"}  # development tools are not runtime needs
    assert dev[0] == "-r requirements.txt"
    assert ({r.split("==")[0] for r in dev[1:]} == {"pytest", "pytest-xdist", "execnet", "playwright", "ruff"}
            and all("==" in r for r in dev[1:]))


def test_make_sets_up_then_runs():
    if shutil.which("make") is None:
        require("make", "no make on PATH (install it, e.g. apt-get install make)")
    # As if typed: without what an enclosing `make test PYTEST_ARGS=... PYTHON=...` puts in the environment.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS", "PYTHON",
                                                       "TEST_JOBS")}
    plan = {target: subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT, env=env,
                                   capture_output=True, text=True).stdout
            for target in ("run", "test")}
    assert "-m venv .venv" in plan["run"] and "-r requirements.txt" in plan["run"]
    assert plan["run"].rstrip().endswith("streamlit run app.py")
    assert "-r requirements-dev.txt" in plan["test"] and plan["test"].rstrip().endswith("-m pytest -n 3")


def test_the_app_listens_on_localhost_and_sends_nothing_out():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    # With an address set, Streamlit does not look up the machine's external IP address at start-up.
    assert config["server"]["address"] == "localhost"
    assert config["browser"]["gatherUsageStats"] is False


def test_the_app_watches_no_files():
    """Streamlit's file watcher, on the app's folder (.venv included), kept an idle server at a whole core
    (bench/bench_idle.py: 100 % of a core with it, 0.2-0.9 % without); code changes show on a restart."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["fileWatcherType"] == "none" and config["server"]["runOnSave"] is False

