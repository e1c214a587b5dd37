"""What an idle app costs the machine: the app started as ``make run`` starts it (``streamlit run app.py``, its
``.streamlit/config.toml`` only), a page opened in headless Chromium and left alone; the server's CPU time over the
next ``--seconds``, after the page has settled. Target: at most 2 % of a core on every page (an idle page follows no
work). ``--watcher auto`` starts it with Streamlit's file watcher, as before the config turned it off, to compare.

Prints each page's figure with the load average and core count; exits 1 on a miss.

Usage: python bench/bench_idle.py [--seconds 20] [--watcher auto]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from screenshots import CHROMIUM, CHROMIUM_ARGS, app_env, free_port  # noqa: E402

from ui.shell import WARM_UP_AFTER_S  # noqa: E402

PAGES = ("scenarios", "run?q=demo/locating/1", "history", "benchmark")
TARGET = 0.02  # of a core


def cpu_s(pid: int) -> float:
    """The process's CPU time so far, user and system (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="idle time measured on each page")
    parser.add_argument("--watcher", default=None, help="server.fileWatcherType to start with (default: the config's)")
    args = parser.parse_args()
    home, port = Path(tempfile.mkdtemp(prefix="bench-idle-")), free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    if args.watcher:
        command += ["--server.fileWatcherType", args.watcher]
    server = subprocess.Popen(command, cwd=ROOT, env=app_env(home), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    missed = False
    try:
        app = server.pid
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            for path in PAGES:
                deadline = time.monotonic() + 120
                while True:  # the server's first answer
                    try:
                        page.goto(f"http://localhost:{port}/{path}")
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)
                page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                       timeout=120_000)
                if path == PAGES[0]:  # the app's warm-up imports, begun WARM_UP_AFTER_S after its first page
                    page.wait_for_timeout((WARM_UP_AFTER_S + 1) * 1000)
                settled = time.monotonic() + 60  # what the page set going: until a second passes near idle
                while time.monotonic() < settled:
                    before = cpu_s(app)
                    page.wait_for_timeout(1000)
                    if cpu_s(app) - before <= TARGET:
                        break
                before, start = cpu_s(app), time.monotonic()
                page.wait_for_timeout(args.seconds * 1000)
                share = (cpu_s(app) - before) / (time.monotonic() - start)
                miss = share > TARGET
                missed |= miss
                print(f"{path:24} server CPU {share:6.1%} of a core over {args.seconds:.0f} s idle "
                      f"(target <= {TARGET:.0%}){'  MISS' if miss else ''}  [load {os.getloadavg()[0]:.1f}, "
                      f"{os.cpu_count()} cores]", flush=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
