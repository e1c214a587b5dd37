"""Pages under work (issue 41): how soon each page shows its main content while agents and a benchmark run on the
same machine, against the same pages quiet. Two browser sessions (headless Chromium, each in a thread of its own)
go through every page at once, ``--rounds`` rounds, as bench_pages.py times them (a click on the page's sidebar
link to its title and main content), after one untimed round (each page's first draw on a fresh server is
bench_pages.py's and bench_cold.py's concern): first quiet, then while 4 agent runs go on in the app and a benchmark runs on
2 local workers of the job queue.

The app runs in the jobs mode ``--jobs`` names: ``process`` (the embedded default: the app's runs in its local run
process, core.jobs.local) or ``threads`` (in the app server's process, beside every page). The 4 runs are started as
an analyst starts them (Start on the Run page, each in a session of its own, closed once its run is stored); a
keeper starts a new one whenever one ends. Their model is a stand-in OpenAI-compatible server on
localhost that answers each call after a model's delay (``--think``, drawn uniformly) with a PlanRAG step carrying
a word of its own, up to the run's 20th call (its final answer). The keeper also follows one of the runs on its Run
page (its live run panel): the event latency is the time from the stand-in sending a step's reply to that step's
word on the page. The benchmark (bench_workers.py's: IterRAG on the demo questions over many epochs, its own
stand-in answering after ``--bench-latency``) is queued on a fresh database of the PostgreSQL server at
POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres, dropped at the end) and taken by 2
``python -m core worker`` processes (``--concurrency`` jobs each); it is stopped when the sessions are done.

Prints each page's median and worst quiet and under work and the ratio of the medians (target: ≤ 2), the event
latency's median, 90th percentile and worst (target: each ≤ 1 s: the worst is flagged too), with the load average
and core count; flags misses and exits 1 on a miss or a broken page. The app's home holds bench_pages.SEED's runs and benchmarks. The
figures rest on this machine's load: compare only figures taken together.

Usage: python bench/bench_under_work.py [--jobs process|threads] [--rounds 3] [--think 1.5 4.0] [--bench-latency 2.0]
                                     [--concurrency 2]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pages import MAIN_CONTENT, SEED, Broken, first_look, idle, load, navigate  # noqa: E402
from bench_workers import ACT, FINAL, benchmark, drop_database, fresh_database, start_workers, stop_workers  # noqa: E402
from screenshots import CHROMIUM, CHROMIUM_ARGS, app_env, streamlit_app  # noqa: E402

from core.store.runs import DRIVEN, RunStore  # noqa: E402
from tests.stub_server import StubServer, completion, send_json, send_stream  # noqa: E402
from tests.turn_stub import TurnStub  # noqa: E402

RUNS = 4  # agent runs going at once
WORKERS = 2
CALLS = 20  # a run's model calls: the last one its final answer (the default --max-llm-calls)
RATIO = 2.0  # a page's median under work / its median quiet
LATENCY_S = 1.0  # the event latency's median, and its worst
WAIT_MS = 120_000  # a hang guard, never a speed target
#: Stamps (ms) the first animation frame each stand-in word (``Zw00001x``) is on the page.
OBSERVER = """
window.__shown = {};
new MutationObserver(() => {
  for (const word of (document.body ? document.body.textContent : '').match(/Zw\\d{5}x/g) || [])
    if (!(word in window.__shown)) { window.__shown[word] = null;
                                     requestAnimationFrame(() => { window.__shown[word] = Date.now(); }); }
}).observe(document, {childList: true, subtree: true, characterData: true});
"""


class StandIn(StubServer):
    """A PlanRAG model at a model's pace: each call answered after ``think()`` seconds (calls served at once) with a
    step whose thought carries a word of its own (``sent``: word -> when its reply went out, time.time())."""

    def __init__(self, think):
        self.think, self.sent, self._lock, self._n = think, {}, threading.Lock(), 0
        super().__init__({"POST /v1/chat/completions": self._chat})

    def _chat(self, handler, body: dict) -> None:
        turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        with self._lock:
            self._n += 1
            word = f"Zw{self._n:05d}x"
        time.sleep(self.think())
        head = "Plan: [Step 1: list the nodes, Step 2: choose]\n" if turn == 0 else "Re-plan: N\n"
        text = (f"{head}Thought: {word} I now know the answer.\nFinal answer: krakow" if turn >= CALLS - 1 else
                f"{head}Current step: Step 1: list the nodes\nThought: {word} looks at the nodes.\n"
                f"Action: Relational DB\nAction input: SELECT {turn} AS n")
        if body.get("stream"):
            send_stream(handler, completion(text))
        else:
            send_json(handler, 200, completion(text))
        self.sent[word] = time.time()


def session(url: str, rounds: int, times: dict, broken: list[str]) -> None:
    """One analyst: the first page, then ``rounds`` rounds through every page, each navigation's seconds and load
    added to ``times`` (title -> list)."""
    order = [*list(MAIN_CONTENT)[1:], list(MAIN_CONTENT)[0]]  # the first page is open
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = first_look(browser, url)[0]
            idle(page)
            for _ in range(rounds):
                for title in order:
                    times[title].append((navigate(page, title), load()))
        except (Broken, PlaywrightError) as e:
            broken.append(str(e)[:2000])
        finally:
            browser.close()


def both_sessions(url: str, rounds: int, broken: list[str]) -> dict[str, list[tuple[float, str]]]:
    """Two analysts going through every page at once: each page's navigations of both."""
    times: dict[str, list[tuple[float, str]]] = {title: [] for title in MAIN_CONTENT}
    threads = [threading.Thread(target=session, args=(url, rounds, times, broken)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def start_run(browser, url: str, store: RunStore) -> None:
    """Start a run as an analyst does (Start on the Run page, in a session of its own), closed once it is stored."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    known = {r.id for r in store.list(limit=None)}
    page.goto(f"{url}/run")
    page.get_by_role("heading", name="Run").wait_for()
    page.get_by_role("button", name="Start").and_(page.locator(":enabled")).first.click()
    while not {r.id for r in store.list(limit=None)} - known:
        page.wait_for_timeout(50)
    context.close()


def keeper(url: str, store: RunStore, stop: threading.Event, ready: threading.Event, seen: list, broken: list[str]):
    """Keeps ``RUNS`` runs going in the app until ``stop``, and follows one at a time on its Run page: ``seen`` gets
    (when its page was drawn, word -> when shown) per run followed."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        watch = browser.new_context(viewport={"width": 1440, "height": 1200})
        watch.add_init_script(OBSERVER)
        page = watch.new_page()
        page.set_default_timeout(WAIT_MS)
        followed, opened = None, 0.0
        try:
            while not stop.is_set():
                going = [r.id for r in store.list(limit=None) if r.status in DRIVEN]
                if len(going) < RUNS:
                    start_run(browser, url, store)
                    continue
                ready.set()
                if followed not in going:
                    if followed:
                        seen.append((opened, page.evaluate("window.__shown")))
                    followed = going[0]
                    page.goto(f"{url}/run?run={followed}")
                    page.get_by_role("heading", name="Run").wait_for()
                    idle(page)
                    opened = time.time()
                page.wait_for_timeout(500)
            if followed:
                seen.append((opened, page.evaluate("window.__shown")))
        except PlaywrightError as e:
            broken.append(f"the run keeper: {str(e)[:2000]}")
            ready.set()
        finally:
            browser.close()


def latencies(stand_in: StandIn, seen: list) -> list[float]:
    """Seconds from the stand-in sending a step's reply to its word on the followed run's page: the words sent
    after that page was drawn."""
    return [shown / 1000 - stand_in.sent[word] for opened, words in seen for word, shown in words.items()
            if shown is not None and stand_in.sent.get(word, 0) > opened]


def under_work(url: str, home: Path, args, stand_in: StandIn, broken: list[str]):
    """Both sessions while ``RUNS`` runs go on in the app and a benchmark on ``WORKERS`` workers: their times, the
    event latencies, and how many benchmark runs ended meanwhile."""
    from core.config import settings
    from core.jobs import bench_items

    app_runs = RunStore(home / "runs.sqlite")  # the app's own (opened before the team store is this process's)
    admin = os.environ.get("POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    database = fresh_database(admin)
    driver_home = home.parent / "driver"
    os.environ.update({"PLANRAG_DATABASE_URL": database, "PLANRAG_JOBS": "queue", "PLANRAG_HOME": str(driver_home)})
    env = dict(os.environ)
    subprocess.run([sys.executable, "-m", "core", "db", "upgrade"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    settings.DATA_HOME = driver_home
    model = TurnStub([ACT, FINAL], latency=args.bench_latency)
    stop, ready, seen, progress = threading.Event(), threading.Event(), [], []
    workers = start_workers(WORKERS, args.concurrency, home.parent / "workers",
                            {**env, "OPENAI_BASE_URL": model.url})  # a job names no server: a worker's own
    try:
        bench = benchmark(model, "under-work", 50)  # 300 runs: the most epochs
        driver = threading.Thread(target=lambda: progress.append(bench_items.drive(bench, stop=stop)))
        driver.start()
        runs = threading.Thread(target=keeper, args=(url, app_runs, stop, ready, seen, broken))
        runs.start()
        ready.wait(600)
        print(f"under work: {RUNS} runs going in the app, the benchmark on {WORKERS} workers ({load()})", flush=True)
        times = both_sessions(url, args.rounds, broken)
        stop.set()
        runs.join()
        driver.join()
    finally:
        stop.set()
        stop_workers(workers)
        model.close()
        drop_database(admin, database)
    return times, latencies(stand_in, seen), f"{progress[0].done if progress else 0} of {len(bench.work.items)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", choices=("process", "threads"), default="process",
                        help="where the app's runs run (PLANRAG_JOBS; default process, the app's own default)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds through every page, per session and phase")
    parser.add_argument("--think", type=float, nargs=2, default=(1.5, 4.0), metavar=("MIN", "MAX"),
                        help="seconds the stand-in model takes per call of the app's runs, drawn uniformly")
    parser.add_argument("--bench-latency", type=float, default=2.0, help="the benchmark model's seconds per call")
    parser.add_argument("--concurrency", type=int, default=2, help="benchmark jobs at once per worker")
    args = parser.parse_args()
    draw = random.Random(41)
    stand_in = StandIn(lambda: draw.uniform(*args.think))
    broken: list[str] = []
    print(f"load before: {load()}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="planrag-under-work-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            subprocess.run([sys.executable, "-c", SEED], cwd=ROOT, env=app_env(home), check=True,
                           capture_output=True)
            model = {"OPENAI_MODEL": "stand-in", "OPENAI_BASE_URL": stand_in.url, "PLANRAG_JOBS": args.jobs,
                     "PLANRAG_DATABASE_URL": ""}
            with streamlit_app(home, env=model) as url:
                session(url, 1, {title: [] for title in MAIN_CONTENT}, broken)  # a round untimed: pages warm
                quiet = both_sessions(url, args.rounds, broken)
                print(f"quiet: 2 sessions x {args.rounds} rounds done ({load()})", flush=True)
                if not broken:
                    busy, delays, bench_runs = under_work(url, home, args, stand_in, broken)
    finally:
        stand_in.close()
    if broken:
        print("BROKEN: " + "\nBROKEN: ".join(broken))
        return 1
    print(f"2 sessions x {args.rounds} rounds per phase; under work: {RUNS} agent runs in the app ({args.jobs} mode), "
          f"model {args.think[0]}-{args.think[1]} s a call; benchmark on {WORKERS} workers x {args.concurrency} "
          f"({bench_runs} runs ended meanwhile)")
    print(f"  {'page':<15} {'quiet median':>12} {'worst':>6} {'work median':>12} {'worst':>6} {'ratio':>6}")
    missed = []
    for title in MAIN_CONTENT:
        q, w = [s for s, _ in quiet[title]], [s for s, _ in busy[title]]
        ratio = statistics.median(w) / statistics.median(q)
        flag = f"  MISS (target {RATIO:.0f}x)" if ratio > RATIO else ""
        missed += [title] if flag else []
        print(f"  {title:<15} {statistics.median(q):>10.2f} s {max(q):>4.2f} s {statistics.median(w):>10.2f} s "
              f"{max(w):>4.2f} s {ratio:>5.2f}x{flag}")
    for name, phase in (("quiet", quiet), ("under work", busy)):
        loads = sorted({at for runs in phase.values() for _, at in runs}, key=lambda at: float(at.split()[1]))
        print(f"  {name}: from {loads[0]} to {loads[-1]} (1-minute load, lowest and highest at a navigation)")
    if delays:
        median = statistics.median(delays)
        flag = f"  MISS (target {LATENCY_S:.0f} s, median and worst)" if max(delays) > LATENCY_S else ""
        missed += ["event latency"] if flag else []
        print(f"live run panel event latency (stand-in sent a step -> its text on the Run page), n={len(delays)}: "
              f"median {median:.2f} s, 90th percentile {sorted(delays)[int(0.9 * len(delays))]:.2f} s, worst "
              f"{max(delays):.2f} s{flag}")
    else:
        missed.append("event latency (no step seen)")
        print("live run panel event latency: no step seen on the followed runs' pages  MISS")
    print(f"load after: {load()}")
    print(f"{len(missed)} of {len(MAIN_CONTENT) + 1} figures miss the target" + (f": {', '.join(missed)}" if missed
                                                                                   else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
