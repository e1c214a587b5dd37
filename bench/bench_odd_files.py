"""Print how fast, and in how much memory, the command lines refuse odd files where a file is expected (issue 27,
section 4): a FIFO, a 2 GB sparse file, a link to /dev/zero, a folder and a link that loops, given as a DQA
database dump and question file, a replay file, a scenario's manifest and its CSV data, and a scenario folder. Each
case runs ``python -m core`` (or ``python -m sims``) under a 4 GB address-space limit and a 30 s deadline. Target:
exit status 1 or 2 within 2 s of CPU time (the wall time, printed too, is mostly the start-up's imports and the
machine's load) with one ``error:`` line naming the file; the peak memory is printed.

Usage: python bench/bench_odd_files.py [DQA_DIR]     (exit status 1 when a figure misses its target)
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.config.settings import dqa_dir  # noqa: E402

ODD = ("FIFO", "sparse 2 GB file", "link to /dev/zero", "folder", "link that loops")
misses: list[str] = []


def make_odd(path: Path, kind: str) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "sparse 2 GB file":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(path.name)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def run_case(what: str, argv: list[str], env: dict, named: str) -> None:
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
                             preexec_fn=_limit)
    except subprocess.TimeoutExpired:
        print(f"{what}: still running after 30 s  MISS")
        misses.append(what)
        return
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    errors = [line for line in out.stderr.splitlines() if line.startswith("error")]
    ok = (out.returncode in (1, 2) and cpu < 2.0 and len(errors) == 1 and named in errors[0]
          and "Traceback" not in out.stderr)
    memory = f"{after.ru_maxrss / 1024:.0f} MB" if after.ru_maxrss > before.ru_maxrss else "<= earlier peak"
    print(f"{what}: {seconds:.2f} s wall, {cpu:.2f} s CPU, exit {out.returncode}, peak {memory}: "
          f"{(errors or out.stderr.strip().splitlines()[-1:] or ['(nothing)'])[0][:160]}{'' if ok else '  MISS'}")
    if not ok:
        misses.append(what)


def main(dqa: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "dqa"
        shutil.copytree(dqa / "locating", data / "locating")
        shutil.copytree(dqa / "building", data / "building")
        for root, dirs, files in os.walk(data):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(Path(root) / f, 0o644)
        env = {**os.environ, "DQA_DIR": str(data), "PLANRAG_HOME": str(tmp / "home"),
               "PLANRAG_SCENARIOS": str(tmp / "scenarios")}
        scenario = tmp / "scenarios" / "depot"
        shutil.copytree(ROOT / "assets" / "scenarios" / "depot", scenario)
        replay = tmp / "replay.json"
        dump = data / "locating/queries/SQL_format/q1.sql"
        questions = data / "locating/questions/simulated_question.json"
        csv_files = sorted((scenario / "data").glob("*.csv"))
        cases = [
            ("DQA dump q1.sql", dump, ["-m", "core", "query", "--scenario", "locating", "--question", "1", "--db",
                                       "sqlite", "SELECT 1"]),
            ("DQA dump q1.sql (sims check)", dump, ["-m", "sims", "check", "--dqa", str(data)]),
            ("DQA question file", questions, ["-m", "core", "dqa", str(data)]),
            ("replay file", replay, ["-m", "core", "run", "--source", "demo", "--scenario", "locating",
                                     "--question", "1", "--db", "sqlite", "--technique", "iterrag",
                                     "--llm", f"replay:{replay}"]),
            ("scenario manifest", scenario / "scenario.toml", ["-m", "core", "scenario", "check", str(scenario)]),
        ] + ([("scenario CSV data", csv_files[0], ["-m", "core", "scenario", "check", str(scenario)])]
             if csv_files else []) + [
            ("scenario folder", scenario, ["-m", "core", "scenario", "check", str(scenario)]),
        ]
        for what, path, argv in cases:
            saved = tmp / "saved"
            if path.is_dir():
                shutil.copytree(path, saved)
            elif path.exists():
                shutil.copy2(path, saved)
            for odd in ODD:
                make_odd(path, odd)
                run_case(f"{what} as a {odd}", argv, env, path.name)
            make_odd(path, "folder")
            shutil.rmtree(path)
            if saved.is_dir():
                shutil.copytree(saved, path)
                shutil.rmtree(saved)
            elif saved.exists():
                shutil.move(saved, path)
    if misses:
        print(f"{len(misses)} case(s) missed the target: {', '.join(misses)}")
    return 1 if misses else 0


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else dqa_dir()
    if root is None or not (root / "locating").is_dir():
        print("no DQA data: give its folder (or set DQA_DIR)")
        sys.exit(2)
    sys.exit(main(root))
