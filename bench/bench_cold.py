"""How soon the pages with the most data show it (target: median 1 s each): the Benchmark page with two big result
sets stored, History with 1,000 stored runs, and Benchmark -> Compare sets comparing the two sets (each 301 questions
per technique, PlanRAG and IterRAG). The data is generated here: bench_pages.SEED's runs and smoke benchmarks,
copied in the stores (runs with their events under new ids; results under new question numbers).

Measured in headless Chromium on one fresh server (as bench_pages.py: a click on the page's link, then its title and
main content; Compare sets: picking the candidate set, then the page idle with its paired-questions count), over
``--rounds`` rounds, each figure with the load average and core count; exits 1 when a median misses or a page
breaks. ``--app`` times another checkout's app.py, for a side-by-side comparison in one sitting.

Usage: python bench/bench_cold.py [--rounds 3] [--runs 1000] [--questions 301] [--app PATH/app.py]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_pages import EXCEPTION, MAIN_CONTENT, SEED, Broken, first_look, idle, load, navigate  # noqa: E402
from screenshots import CHROMIUM, CHROMIUM_ARGS, app_env, streamlit_app  # noqa: E402

#: Copies the seeded runs (with their events) to ``RUNS`` runs, and the smoke benchmark's results to two sets of
#: ``QUESTIONS`` questions per technique (a-big, b-big; b-big's grades differ), with plain SQL on the stores' files.
GROW = """
import json, random, shutil, sqlite3, sys
from pathlib import Path
home, runs, questions = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
con = sqlite3.connect(home / "runs.sqlite")
columns = [c[1] for c in con.execute("PRAGMA table_info(runs)")]
seeded = con.execute("SELECT * FROM runs").fetchall()
for i in range(runs - len(seeded)):
    row = dict(zip(columns, seeded[i % len(seeded)]))
    old, row["id"] = row["id"], f"{row['id'][:6]}{i:06d}"
    row["created"] -= 60 * (i + 1)
    con.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    con.execute("INSERT INTO events SELECT ?, seq, kind, data FROM events WHERE run_id = ?", (row["id"], old))
con.commit()
random.seed(41)
for name, right in (("a-big", 0.6), ("b-big", 0.7)):
    target = home / "bench" / name
    target.mkdir()
    shutil.copy(home / "bench" / "smoke" / "results.sqlite", target / "results.sqlite")
    con = sqlite3.connect(target / "results.sqlite")
    rows = con.execute("SELECT key, scenario, question, db, technique, model, status, correct, finished, data "
                       "FROM results WHERE scenario = 'locating'").fetchall()
    con.execute("DELETE FROM results")
    for key, scenario, _, db, technique, model, status, _, finished, data in rows:
        for q in range(1, questions + 1):
            correct = int(random.random() < right)
            item = json.loads(data)
            item.update(question=q, correct=bool(correct))
            con.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (key.replace("/1/", f"/{q}/", 1), scenario, q, db, technique, model, status, correct,
                         finished, json.dumps(item)))
    con.commit()
"""
#: The text of the figures in view (Compare sets' paired questions, improved, regressed, accuracy change).
FIGURES = """() => [...document.querySelectorAll('[data-testid=stMetric]')].filter(m => m.offsetParent)
    .map(m => m.innerText).join('|')"""


def compare_sets(page, candidate: str) -> float:
    """Seconds from picking ``candidate`` as Compare sets' candidate set to the page idle with its comparison."""
    page.get_by_role("tab", name="Compare sets").click()
    page.locator("[data-testid=stSelectbox]:visible", has_text="Candidate: result set").first.click()
    option = page.get_by_role("option", name=candidate, exact=True)
    before = page.evaluate(FIGURES)
    start = time.perf_counter()
    option.click()
    page.wait_for_function(f"before => {{ const now = ({FIGURES})(); return now.includes('Paired questions')"
                           " && now !== before; }", arg=before, timeout=60_000)
    idle(page)
    seconds = time.perf_counter() - start
    if page.locator(EXCEPTION).count():
        raise Broken(f"Compare sets: {page.locator(EXCEPTION).first.inner_text()[:2000]}")
    # the session keeps its tab: the next round's Benchmark opens on Run, once this click's run has drawn it (a
    # navigation before that run keeps the tab before it)
    page.get_by_role("tab", name="Run").click()
    page.locator(MAIN_CONTENT["Benchmark"]).first.wait_for(state="visible", timeout=60_000)
    idle(page)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1000, help="stored runs (default 1000)")
    parser.add_argument("--questions", type=int, default=301, help="questions per technique in each set")
    parser.add_argument("--target", type=float, default=1.0, help="median, seconds (default 1)")
    parser.add_argument("--app", type=Path, default=ROOT / "app.py", help="the app to time (default: this one's)")
    args = parser.parse_args()
    app = args.app.resolve()
    with tempfile.TemporaryDirectory(prefix="planrag-cold-") as tmp:
        home = Path(tmp)
        subprocess.run([sys.executable, "-c", SEED], cwd=app.parent, env=app_env(home), check=True,
                       capture_output=True)
        subprocess.run([sys.executable, "-c", GROW, str(home), str(args.runs), str(args.questions)], check=True)
        times: dict[str, list[tuple[float, str]]] = {"Benchmark": [], "History": [], "Compare sets": []}
        with streamlit_app(home, script=app) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = first_look(browser, url)[0]
            idle(page)
            try:
                for n in range(args.rounds):
                    for title in ("History", "Benchmark"):
                        times[title].append((navigate(page, title), load()))
                    # the candidate set alternates, so that each pick reruns the page
                    times["Compare sets"].append((compare_sets(page, ("b-big", "a-big")[n % 2]), load()))
                    navigate(page, "Settings")  # away, so that the next round opens them afresh
            except Broken as e:
                print(f"BROKEN page: {e}")
                return 1
            finally:
                browser.close()
    print(f"{app}: {args.runs} runs, two sets of {args.questions} questions per technique")
    missed = []
    for title, runs in times.items():
        seconds = [s for s, _ in runs]
        median = statistics.median(seconds)
        flag = f"  MISS (median target {args.target:.1f} s)" if median > args.target else ""
        missed += [title] if flag else []
        print(f"  {title:<13} median {median:.2f} s · worst {max(seconds):.2f} s{flag}"
              f"  [{'; '.join(f'{s:.2f} ({at})' for s, at in runs)}]")
    print(f"{len(missed)} of {len(times)} figures miss the target" + (f": {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
