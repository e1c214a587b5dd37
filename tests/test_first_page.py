"""Pages draw without loading what only a run, a model or a query needs, and the first page's run is not run
twice: each of these modules costs a fresh server's first look, or a page's first visit, tens of milliseconds or
more (httpx with its command line's rich and pygments 45 ms, sqlglot 45 ms, the job payload's pydantic models 0.1 s,
LangGraph with LangChain 0.6 s, networkx 0.3-0.5 s), measured by bench/bench_pages.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Loaded by a run, a model probe or a worker, never by a page before it starts one.
RUN_ONLY = ("httpx", "langchain_core", "langgraph", "openai", "psycopg", "procrastinate", "pydantic", "sqlalchemy",
            "opentelemetry")
#: Loaded by a query or a table, never by the first look; networkx by a plugin scenario's figure only.
FIRST_LOOK = RUN_ONLY + ("sqlglot", "pandas", "networkx")
PAGES = ("benchmark", "plans", "history", "settings", "compare", "decision", "run")
PROBE = """
import json, os, sys
import streamlit
from streamlit.testing.v1 import AppTest
from ui import shell
shell._warm_up = lambda: None  # not within these visits: its imports are a run's, not a page's
reruns, rerun = [], streamlit.rerun
streamlit.rerun = lambda *args, **kwargs: (reruns.append(1), rerun(*args, **kwargs))
at = AppTest.from_file(os.path.abspath("app.py"), default_timeout=120)
def visit(page):
    at.run()
    return {"errors": [e.value for e in at.exception], "titles": [t.value for t in at.title],
            "loaded": sorted({name.split(".")[0] for name in sys.modules}), "reruns": len(reruns)}
seen = {"first": visit(None)}
for page in sys.argv[1:]:
    at.switch_page(f"pages/{page}.py")
    seen[page] = visit(page)
print(json.dumps(seen))
"""


def test_pages_load_nothing_a_run_needs(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANRAG_"))}
    env["PLANRAG_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-c", PROBE, *PAGES], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["first"]["titles"][:1] == ["Scenarios"]
    assert seen["first"]["reruns"] == 0  # app.py's first run goes straight on (it was run twice on a fresh server)
    assert {page: drawn["errors"] for page, drawn in seen.items() if drawn["errors"]} == {}
    assert sorted(set(FIRST_LOOK) & set(seen["first"]["loaded"])) == []
    assert {page: sorted(set(RUN_ONLY) & set(seen[page]["loaded"])) for page in PAGES} == {page: [] for page in PAGES}
