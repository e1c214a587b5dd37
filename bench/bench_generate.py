"""Print how fast ``python -m sims generate`` writes a fresh set, and flag a miss.

Target (issue "Fresh DQA-style questions on demand"): 1,000 Locating questions of DQA size (80 trade nodes, 665
countries, one database per question, ~780 MB of SQL and Cypher files) in under a minute on 2 cores. The figure is
the process wall time of the command line with ``--jobs 2`` (one run: it is long), beside the CPU time its
processes used and the machine's load, since the 2 cores may be shared. A small Building set is timed too.

Usage: python bench/bench_generate.py [QUESTIONS]   (default 1000; writes to a temporary folder, removed after)
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
TARGET_S = 60.0


def timed(args: list[str]) -> tuple[float, float, str]:
    """Process wall seconds, CPU seconds of the command's processes and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sims", "generate", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"generate failed: {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.strip().splitlines()[0]


def main() -> int:
    questions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    out = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    try:
        load = os.getloadavg()[0]
        wall, cpu, line = timed(["--scenario", "locating", "--questions", str(questions), "--seed", "1",
                                 "--out", str(out / "set"), "--jobs", "2"])
        size = sum(p.stat().st_size for p in (out / "set").rglob("*") if p.is_file())
        scaled = wall * 1000 / questions
        verdict = "ok" if scaled < TARGET_S else "MISS"
        print(f"{line}")
        print(f"locating, {questions} questions of DQA size, --jobs 2: {wall:.1f} s wall ({scaled:.1f} s per 1,000; "
              f"target {TARGET_S:.0f} s) [{verdict}]; {cpu:.1f} s CPU; {size / 1e6:.0f} MB written; "
              f"load average {load:.1f} before on {os.cpu_count()} cores")
        if verdict == "MISS" and cpu / 2 < TARGET_S * questions / 1000:
            print("  note: the CPU time fits in the target on 2 free cores; the machine was busy or the disk slow")
        wall, cpu, line = timed(["--scenario", "building", "--questions", "100", "--seed", "1", "--out",
                                 str(out / "set"), "--jobs", "2"])
        print(f"building, 100 questions (52 goods, 40-150 buildings): {wall:.1f} s wall, {cpu:.1f} s CPU")
        return 0 if verdict == "ok" else 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
