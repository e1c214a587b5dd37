"""Print how big what an agent observes gets when every query is hostile (issue 27, section 1): for each backend
(SQLite, MariaDB, Ladybug, the Neo4j-protocol server) queries whose error text, column names or aliases are huge,
each run once alone (the observation's length, the stored event's size) and all of them as a whole scripted
IterRAG run on the demo Locating question, run in a child process: its peak memory, the size of the run and
checkpoint stores, and the prompt tokens the model was sent. Targets: an observation within the run's
observation cap (4,000 characters by default) plus a short note; a stored event within 300 kB; a whole run of
8 such queries within 400 MB peak memory, 20 MB of stores and 60,000 prompt tokens in its largest call (8
queries of up to 20,000 characters and their capped observations).

Hostile model servers (``model``, issue 44 section D; tests/hostile_stub.py on a free local port): a stream that
never ends, and a 300 MB plain reply (with and without its Content-Length), each called once by the model client
in a child process with the default reply cap: its peak memory (target 300 MB), the reply it kept and how much the
server had sent when the client went away.

Usage: python bench/bench_observations.py [BACKEND ... | model]     (exit status 1 when a figure misses its target)
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.scenarios.dqa import demo  # noqa: E402
from core.model.run_settings import Limits  # noqa: E402
from core.agents.nodes import run_query  # noqa: E402
from core.backends.registry import open_backend, unavailable  # noqa: E402

LONG = "c" * 15_000
#: Hostile queries per backend: each under the 20,000-character query limit, each giving a huge header or error.
HOSTILE = {
    "sqlite": [f'WITH t("{LONG}") AS (SELECT 1) SELECT * FROM ' + ", ".join(f"t a{i}" for i in range(64)),
               f'SELECT "{LONG}" FROM trade_node',
               "SELECT json(printf('%.*c', 5000000, 'x') || ']')"],
    "mysql": ["WITH t AS (SELECT " + ", ".join(f"1 AS `{'m' * 60}{i:03d}`" for i in range(60)) + ") SELECT * FROM "
              + ", ".join(f"t a{i}" for i in range(60)),
              f"SELECT `{'m' * 15_000}` FROM trade_node",
              "SELECT " + ", ".join(f"'{'v' * 250}{i}'" for i in range(70))],
    "ladybug": ["RETURN CAST(repeat('v', 15000000) AS INT64)",
                f"RETURN 1 AS `{LONG}`",
                "WITH repeat('w', 4000000) AS s RETURN s, s AS t, s AS u"],
    "neo4j": [f"RETURN 1 AS `{'a' * 19_000}`",
              f"RETURN 1 AS `{'a' * 9000}`, 2 AS `{'b' * 9000}`",
              "RETURN toInteger(reduce(s = 'x', i IN range(1, 20) | s + s)) AS n"],
}
misses: list[str] = []


def report(what: str, value: float, high: float, unit: str) -> None:
    ok = value <= high
    print(f"{what}: {value:,.0f} {unit} (target <= {high:,.0f}){'' if ok else '  MISS'}")
    if not ok:
        misses.append(what)


def singles(name: str, database) -> None:
    backend = open_backend(name, database)
    limits = Limits()
    try:
        for i, text in enumerate(HOSTILE[name], 1):
            event = run_query(backend, text, limits)
            stored = len(json.dumps(event.to_dict()))
            header = sum(len(c) for c in event.columns)
            print(f"{name} query {i} ({len(text):,} characters; {event.error_kind or 'rows'}): header "
                  f"{header:,} characters")
            report(f"  {name} query {i}: observation", len(event.text), limits.observation_chars + 200, "characters")
            report(f"  {name} query {i}: stored event", stored, 300_000, "bytes")
    finally:
        backend.close()


def whole_run(name: str) -> None:
    """One scripted run, every query hostile, in a child process (its own peak memory)."""
    language = "cypher" if name in ("ladybug", "neo4j") else "sql"
    tool = "Graph DB" if language == "cypher" else "Relational DB"
    comment = "//" if language == "cypher" else "--"  # each query differs, so the loop guard runs every one
    queries = [f"{q}\n{comment} round {i}" for i, q in enumerate((HOSTILE[name] * 3)[:8])]
    replies = [f"Thought: look again ({i})\nAction: {tool}\nAction input: {q}" for i, q in enumerate(queries)]
    replies.append("Thought: I now know the answer.\nFinal answer: doab")
    with tempfile.TemporaryDirectory() as tmp:
        replay = Path(tmp) / "replay.json"
        replay.write_text(json.dumps(replies))
        home = Path(tmp) / "home"
        out = subprocess.run([sys.executable, __file__, "--child", name, str(replay), str(home)],
                             capture_output=True, text=True, timeout=900, env=os.environ)
        if out.returncode:
            print(f"{name} whole run failed:\n{out.stderr[-3000:]}")
            misses.append(f"{name} whole run")
            return
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        store = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
        print(f"{name} whole run: {figures['status']}, {figures['queries']} hostile queries, "
              f"{figures['llm_calls']} LLM calls")
        report(f"  {name} whole run: peak memory", figures["maxrss_mb"], 400, "MB")
        report(f"  {name} whole run: run and checkpoint stores", store / 1e6, 20, "MB")
        print(f"  {name} whole run: prompt tokens over all calls: {figures['prompt_tokens']:,} (the agent's own "
              "long queries, sent back with each later call, are most of them)")
        report(f"  {name} whole run: largest prompt", figures["largest_prompt"], 60_000, "tokens")


MODEL_SERVERS = {"endless stream": ("EndlessStream", {}),
                 "300 MB reply": ("HugeReply", {}),
                 "300 MB reply, announced": ("HugeReply", {"announce": True})}


def model_servers() -> None:
    """Each hostile model server called once by the model client, in a child process (its own peak memory)."""
    import tests.hostile_stub as stubs

    for what, (kind, options) in MODEL_SERVERS.items():
        server = getattr(stubs, kind)(**options)
        try:
            out = subprocess.run([sys.executable, __file__, "--model-child", server.url], capture_output=True,
                                 text=True, timeout=600, env=os.environ)
            server.gone.wait(10)
        finally:
            server.close()
        if out.returncode:
            print(f"{what}: the client failed:\n{out.stderr[-3000:]}")
            misses.append(what)
            continue
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{what}: {figures['said']}; the server had sent {server.sent_bytes / 1e6:,.1f} MB when the client "
              f"went away (the client held {figures['before_mb']:,.0f} MB before the call: its libraries)")
        report(f"  {what}: peak memory", figures["maxrss_mb"], 300, "MB")


def model_child(url: str) -> None:
    from langchain_core.messages import HumanMessage

    from core.llm.client import LLMError, LLMSettings, open_llm

    llm = open_llm("stand-in", LLMSettings(base_url=url, api_key=None, max_retries=0, timeout_s=30))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        c = llm.complete([HumanMessage("Question: where?")], [])
        said = f"a reply of {len(c.text):,} characters, finish reason {c.finish_reason}"
    except LLMError as e:
        said = f"{e.kind} error: {str(e)[-160:]}"
    print(json.dumps({"said": said, "before_mb": before,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def child(name: str, replay: str, home: str) -> None:
    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import Limits, RunSettings

    runtime = AgentRuntime(home)
    settings = RunSettings("locating", 1, name, "iterrag", f"replay:{replay}", source="demo",
                           limits=Limits(max_repeats=20))
    result = runtime.start(settings)
    events = runtime.store.get(result.run_id).events
    prompts = [e.llm.prompt_tokens if e.llm else 0 for e in events]
    runtime.close()
    print(json.dumps({"status": result.status, "llm_calls": sum(1 for e in events if e.llm),
                      "queries": sum(1 for e in events if e.kind == "action"), "prompt_tokens": sum(prompts),
                      "largest_prompt": max(prompts),
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main(names: list[str]) -> int:
    if not names or "model" in names:
        model_servers()
    database = demo.database(demo.questions("locating")[0])
    for name in [n for n in names if n != "model"] if names else list(HOSTILE):
        reason = unavailable(name)
        if reason:
            print(f"{name}: skipped ({reason})")
            continue
        singles(name, database)
        whole_run(name)
    if misses:
        print(f"{len(misses)} figure(s) missed their target: {', '.join(misses)}")
    return 1 if misses else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
    elif sys.argv[1:2] == ["--model-child"]:
        model_child(sys.argv[2])
    else:
        sys.exit(main(sys.argv[1:]))
