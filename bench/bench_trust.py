"""Print, for each hostile input of issue 44 (sections A to E), whether it did harm and the peak memory of the
process that met it. Each case runs in a child process of its own (its peak from os.wait4; this script holds no
big file, so that its own memory, which a child's figure counts from its start, stays a small floor): a queued
job's payload (core.jobs.payload), a number on the command line, a tokenizer that panics, backtracks for hours or
is huge, a huge question file, a hostile scenario plugin, hostile model servers (D: bench/bench_observations.py
``model``, run from here), and each page opened by Streamlit's AppTest with hostile text (a plugin's and sets'
names on the Benchmark page's Results tab) or a hostile URL parameter, beside the same page from an ordinary link.
Harmful: accepted, a traceback, no clear line, Markdown that could draw a link or an image, or no answer within
120 s. Targets: 0 harmful of each class; no process over 300 MB. The tests of each finding are named in each
class's summary line.

Measured on 2026-11-28 (2 cores, load 10-15 from other work), peak memory per class:
A 57-58 MB (every row refused by its schema); B 16-117 MB (the 23 MB tokenizer file's counting process 151 MB);
C 48-90 MB; D 135-152 MB; E 228-289 MB (the page's own: an ordinary link to the same page takes 259-271 MB).

Usage: python bench/bench_trust.py [CLASS ...]     (A B C D E; exit status 1 when a figure misses its target)
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PEAK_MB = 300
TIMEOUT_S = 120
misses: list[str] = []


def child(argv: list[str], env: dict | None = None) -> tuple[int | None, str, float, float]:
    """(exit status or None when killed at TIMEOUT_S, output, seconds, peak MB) of ``python ARGV``."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([PY, *argv], cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        deadline, status, usage = started + TIMEOUT_S, None, None
        while time.monotonic() < deadline:
            pid, raw, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
                break
            time.sleep(0.05)
        if status is None:
            proc.kill()
            _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = status if status is not None else -9
        out.seek(0)
        return status, out.read(), time.monotonic() - started, usage.ru_maxrss / 1024


def case(klass: str, what: str, argv: list[str], harmful, env: dict | None = None) -> bool:
    status, output, seconds, peak = child(argv, env)
    bad = status is None or "Traceback (most recent call last)" in output or harmful(status, output)
    if bad and os.environ.get("BENCH_TRUST_SHOW"):
        print(output)
    print(f"  {klass} {what}: {'HARMFUL' if bad else 'refused'} in {seconds:.1f} s, peak {peak:,.0f} MB"
          f"{'  MISS' if peak > PEAK_MB else ''} | {last(output)[:110]}")
    if bad or peak > PEAK_MB:
        misses.append(f"{klass} {what}")
    return bad


def summary(klass: str, results: list[bool]) -> None:
    print(f"{klass}: harmful {sum(results)}/{len(results)}")


def payload_case(what: str, kind: str, job: dict) -> bool:
    code = (f"import json, sys; from core.jobs import payload\n"
            f"try:\n    payload.{kind}_payload(json.loads(sys.argv[1]))\n"
            f"except payload.PayloadError as e:\n    print(e); sys.exit(3)\nprint('accepted')")
    return case("A", what, ["-c", code, json.dumps(job)], lambda status, out: status != 3)


def class_a() -> None:
    run = {"v": 1, "action": "start", "run_id": "0123456789ab", "llm": {"model": "m"}, "branch": None,
           "code": "0123456789ab"}
    bench = {"v": 1, "key": "demo:locating/1/sqlite/iterrag/m", "code": "0123456789ab",
             "config": {"techniques": ["iterrag"], "llm": "m", "scenario": "all", "db": "sqlite", "questions": "all",
                        "name": "b", "limits": {}, "source": "demo", "llm_settings": {"model": "m"}}}
    results = [
        payload_case("llm.base_url and key_url naming another server", "run",
                     {**run, "llm": {"model": "m", "base_url": "http://evil:1/v1", "key_url": "http://evil:1/v1"}}),
        payload_case("out, home and dqa_root of a benchmark", "bench",
                     {**bench, "config": {**bench["config"], "out": "/tmp/x", "home": "/tmp/h", "dqa_root": "/"}}),
        payload_case("epochs = 10^9", "bench", {**bench, "config": {**bench["config"], "epochs": 10**9}}),
        payload_case("an empty code", "run", {**run, "code": ""}),
        payload_case("a NUL in a branch note", "run", {**run, "action": "branch", "branch": {
            "parent": "0123456789ab", "step": 1, "changes": {"note": "a\x00b"}}}),
    ]
    summary("A (the job queue's rows; the real worker and the form: tests/test_jobs_payload.py)", results)


def write_vocabulary(path: Path, size: int) -> None:
    """A word-level tokenizer.json of about ``size`` bytes (valid JSON), written piece by piece: this process never
    holds it (a child's peak counts this process's memory when it was started)."""
    with open(path, "w") as f:
        f.write('{"version": "1.0", "model": {"type": "WordLevel", "unk_token": "u", "vocab": {"u": 0')
        i = 1
        while f.tell() < size - (1 << 20):
            f.write("".join(f', "w{j:09d}{"z" * 40}": {j}' for j in range(i, i + 10_000)))
            i += 10_000
        f.write("}}}")


def class_b(tmp: Path) -> None:
    home = {"PLANRAG_HOME": str(tmp / "home")}
    refused = lambda status, out: status == 0  # noqa: E731 - a refusal exits non-zero
    results = [case("B", f"core bench {flag} {value}", ["-m", "core", "bench", "--smoke", flag, value], refused, home)
               for flag, value in (("--epochs", "1e9"), ("--vote", "1e9"), ("--budget-calls", "1e23"),
                                   ("--budget-cost", "nan"))]
    for what, pattern, letters in (("panics", "PANICS", 3000), ("backtracks for a minute", "SLOW", 3000)):
        code = ("import sys; sys.path.insert(0, '.'); from pathlib import Path\n"
                "from tests.test_llm_tokenizer_file import build_regex_tokenizer, PANICS, SLOW\n"
                "from tests.test_agents_runtime import ACT, FINAL, make_runtime, replay\n"
                "from core.config import home\n"
                "from core.config.settings import LLMSettings\n"
                "from core.model.run_settings import Limits, RunSettings\n"
                f"tmp = Path({str(tmp / pattern)!r}); tmp.mkdir()\n"
                f"build_regex_tokenizer(tmp / 't.json', {pattern})\n"
                "rt = make_runtime(tmp / 'home', llm_settings=LLMSettings(api_key=None, tokenizer=str(tmp / 't.json')))\n"
                f"act = ACT.replace('Thought: ', 'Thought: ' + 'a' * {letters} + 'x ', 1)\n"
                "r = rt.start(RunSettings('locating', 1, 'sqlite', 'iterrag', replay(tmp, [act, FINAL, FINAL]),"
                " limits=Limits(context_tokens=100_000)))\n"
                "print(rt.store.get(r.run_id).status, '|', home.notices()[-1].split('t.json ')[-1])")
        results.append(case("B", f"a tokenizer whose regular expression {what} ({letters:,} letters)",
                            ["-c", code], lambda status, out: status != 0 or "finished |" not in out
                            or "set aside" not in out, {"DQA_DIR": ""}))
    vocab = tmp / "tokenizer.json"
    write_vocabulary(vocab, 65 << 20)
    results.append(case("B", "a 65 MB tokenizer file",
                        ["-c", "from core.llm.tokenizer_file import TokenizerFileError, open_tokenizer\n"
                               f"try:\n    open_tokenizer({str(vocab)!r}); print('accepted')\n"
                               "except TokenizerFileError as e:\n    print(e)"],
                        lambda status, out: "accepted" in out or "more than the" not in out))
    write_vocabulary(vocab, 23 << 20)  # just under the cap: counts
    results.append(case("B", "a 23 MB tokenizer file (its counting process's peak after the |)",
                        ["-c", "from core.llm.tokenizer_file import open_tokenizer\n"
                               f"count = open_tokenizer({str(vocab)!r}); count('w000000001 hello')\n"
                               "peak = [x for x in open(f'/proc/{count._proc.pid}/status') if 'VmHWM' in x][0]\n"
                               "print('counts |', int(peak.split()[1]) // 1024, 'MB')"],
                        lambda status, out: "counts |" not in out or int(out.split()[-2]) > PEAK_MB))
    dqa = os.environ.get("DQA_DIR") or str(ROOT.parent / "shared" / "dqa")
    if Path(dqa).is_dir():
        data = tmp / "dqa"
        shutil.copytree(dqa, data, symlinks=True)
        questions = data / "locating/questions/simulated_question.json"
        real = json.loads(questions.read_text())
        questions.unlink()
        with open(questions, "w") as f:  # valid JSON: the real questions repeated to 63 MB
            f.write("[")
            while f.tell() < 63 << 20:
                f.write(json.dumps(real)[1:-1] + ", ")
            f.write(json.dumps(real[0]) + "]")
        results.append(case("B", "a valid 63 MB question file", ["-m", "core", "dqa", str(data)],
                            lambda status, out: status == 0 or "more than the" not in out))
    else:
        print(f"  B a valid 63 MB question file: skipped (no DQA folder at {dqa})")
    summary("B (numbers and files; tests/test_bounds.py, test_llm_tokenizer_file.py, test_odd_files.py)", results)


def class_c(tmp: Path) -> None:
    base = ROOT / "assets" / "scenarios" / "depot"
    query = "SELECT site FROM site WHERE status = 'candidate' ORDER BY rowid"
    names = "SELECT site, site || ' (' || town || ')' FROM site"
    hostile = {
        "{season:>1500000000} in the template": [("in the {season} season", "in the {season:>1500000000} season")],
        "an endless recursive CTE as the candidates query": [
            (query, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n")],
        "a 900 M-character names query": [(names, "SELECT site, printf('%.*c', 900000000, 'x') FROM site")],
        "25,000 questions": [],
    }
    results = []
    for what, edits in hostile.items():
        folder = tmp / "plugins" / f"case{len(results)}"
        shutil.copytree(base, folder)
        manifest = folder / "scenario.toml"
        text = manifest.read_text()
        for old, new in edits:
            text = text.replace(old, new)
        if what.startswith("25,000"):
            text += '\n[[questions.ask]]\nseason = "winter"\n' * 25_000
        manifest.write_text(text)
        if what.startswith("a 900"):  # refused as too big, or cut by SQLite's limits to no value: never whole
            names = ("from core.scenarios.plugins.folder import FolderScenario, ScenarioError\n"
                     f"kind = FolderScenario({str(folder)!r}); q = kind.questions()[0]\n"
                     "try:\n    names = kind.candidate_names(q, kind.database())\n"
                     "    print('longest name', max(map(len, names.values())))\n"
                     "except ScenarioError as e:\n    print(e)")
            results.append(case("C", what, ["-c", names], lambda status, out: not (
                "too big" in out or (out.split()[-1].isdigit() and int(out.split()[-1]) < 100_000))))
            continue
        results.append(case("C", what, ["-m", "core", "scenario", "check", str(folder)],
                            lambda status, out: status == 0))
    summary("C (scenario plugins; tests/test_scenario_plugins.py)", results)


#: One page opened from a link by Streamlit's AppTest, in the child (no pytest): harmful if it raised, if a link
#: out of bounds got no message saying so, or if any Markdown it renders could draw a link or an image.
PAGE = """import json, os, shutil, sys
from pathlib import Path
tmp, page, params = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
from tests.test_page_untrusted import PAYLOAD, live, shown_markdown
if page.endswith("benchmark.py"):  # the hostile plugin of the page test, and two benchmarks of it in sets so named
    folder = tmp / "scenarios" / "depot"
    shutil.copytree("assets/scenarios/depot", folder)
    text = (folder / "scenario.toml").read_text().replace('name = "depot"', 'name = "hostile"')
    text = text.replace('title = "Distribution centre"', f'title = "Depot {PAYLOAD}"')
    (folder / "scenario.toml").write_text(text.replace("We deliver parcels", f"We deliver parcels {PAYLOAD}"))
    os.environ["PLANRAG_SCENARIOS"] = str(folder.parent)
    from core.benchmark.runner import Bench, BenchConfig
    (tmp / "answer.json").write_text(json.dumps([f"Thought: I now know the answer. {PAYLOAD}\\nFinal answer: {PAYLOAD}"]))
    for name in ("set __bold__ _em_", "other ___x___ 1.2"):
        Bench(BenchConfig(["iterrag", "planrag"], f"replay:{tmp / 'answer.json'}", scenario="hostile",
                          source="scenario", questions="1", name=name, cache=False)).run()
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=60)
at.query_params.update(params)
at.switch_page(page)
at.run()
if at.exception:
    sys.exit(f"exception: {at.exception[0].message}")
said = [e.value for e in list(at.error) + list(at.warning)]
clear = any("cannot be opened here" in v or "characters long; at most" in v for v in said)
hot = [v for v in shown_markdown(at) if live(v)]
if page.endswith("benchmark.py"):  # its results' tabs, each drawn only when open
    for tab in ("Results", "Compare sets"):
        at.session_state["bench_tab"] = tab
        at.run()
        if at.exception:
            sys.exit(f"exception: {at.exception[0].message}")
        hot += [v for v in shown_markdown(at) if live(v)]
print(f"{len(hot)} live markup, {len(said)} message(s), {'clear' if clear else 'none clear'}, longest "
      f"{max(map(len, said), default=0)} characters |", said[0][:60] if said else "")
"""


def class_d() -> None:
    """bench/bench_observations.py's hostile model servers (each called once in a child process of its own), its
    figures repeated here so that every class is in one place."""
    status, output, _, _ = child(["bench/bench_observations.py", "model"])
    lines = [line for line in output.splitlines() if line.strip()]
    for line in lines:
        print(f"  D {line.strip()}")
    results = [": peak memory" in line and line.endswith("MISS") for line in lines if ": peak memory" in line]
    if status != 0 or len(results) != 3:
        misses.append("D (bench_observations.py model did not report its three servers)")
    misses.extend(f"D {line.strip()}" for line in lines if line.endswith("MISS"))
    summary("D (hostile model servers; tests/test_llm_limits.py)", results or [True])


def last(output: str) -> str:
    """The last line a child printed."""
    return (output.strip().splitlines() or [""])[-1]


def class_e(tmp: Path) -> None:
    def page(what: str, name: str, params: dict, harmful) -> bool:
        folder = tmp / "pages" / str(len(list((tmp / "pages").glob("*"))) if (tmp / "pages").exists() else "0")
        folder.mkdir(parents=True)
        env = {"PLANRAG_HOME": str(folder / "home"), "OPENAI_MODEL": "", "OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
        return case("E", what, ["-c", PAGE, str(folder), f"pages/{name}.py", json.dumps(params)],
                    lambda status, out: status != 0 or not last(out).startswith("0 live") or harmful(last(out)), env)

    def unclear(out: str) -> bool:
        return " clear," not in out or int(out.split("longest ")[1].split()[0]) >= 2000

    page("baseline: /run?q=demo/locating/1, an ordinary link (not counted)", "run", {"q": "demo/locating/1"},
         lambda out: False)
    results = [page("a plugin's title and set names on the Results tab", "benchmark", {}, lambda out: False)]
    for name, params in [("run", {"q": "dqa/locating/" + "9" * 30_000}), ("run", {"q": "demo/locating/" + "9" * 50}),
                         ("decision", {"q": "demo/building/" + "1" * 5000}), ("run", {"run": "a" * 30_000}),
                         ("history", {"run": "f" * 30_000}), ("compare", {"runs": ",".join(["abc"] * 10_000)})]:
        (key, value), = params.items()
        results.append(page(f"/{name}?{key}={value[:14]}... ({len(value):,} characters)", name, params, unclear))
    summary("E (pages; their page tests: tests/test_page_untrusted.py)", results)


def main(classes: list[str]) -> int:
    chosen = [c.upper() for c in classes] or ["A", "B", "C", "D", "E"]
    with tempfile.TemporaryDirectory(prefix="bench-trust-") as tmp:
        for klass in chosen:
            print(f"class {klass}:", flush=True)
            {"A": class_a, "B": lambda: class_b(Path(tmp)), "C": lambda: class_c(Path(tmp)), "D": class_d,
             "E": lambda: class_e(Path(tmp))}[klass]()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this script's own peak: {own:,.0f} MB (a floor of every figure: a child's peak counts the memory of "
          f"the process that started it)")
    print(f"misses: {', '.join(misses) if misses else 'none'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
