"""Two benchmarks into one results directory (issue 12): the second is refused with who holds it, and never runs an
item twice; a benchmark killed while holding the directory leaves no lock behind."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from core.benchmark.smoke import smoke_config
from core.benchmark.lock import BenchBusy
from core.benchmark.runner import Bench
from tests.conftest import ROOT

HOLD = """
import sys
from core.benchmark.lock import DirectoryLock
lock = DirectoryLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding the results directory (as a running ``core bench`` does)."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield out, proc
    proc.kill()
    proc.wait()


def test_second_bench_on_the_same_out_is_refused(holder, capsys, monkeypatch, tmp_path):
    import core.cli.main as cli

    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    out, proc = holder
    code = cli.main(["bench", "--smoke", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert "already running" in captured.err and f"pid {proc.pid}" in captured.err
    assert "[1/" not in captured.out  # no item ran
    proc.send_signal(signal.SIGKILL)  # the holder dies without releasing: the kernel frees the lock
    proc.wait()
    assert cli.main(["bench", "--smoke", "--out", str(out)]) == 0
    assert "[4/4]" in capsys.readouterr().out


def test_two_benches_in_one_process_share_nothing_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    first, second = (Bench(smoke_config(out=tmp_path / "out")) for _ in range(2))
    assert len(first.pending) == len(second.pending) == 4  # both made before either ran
    first.claim()
    with pytest.raises(BenchBusy, match="already running"):
        second.run()
    first.run()
    assert second.run().finished == 4 and second.pending == []  # listed again once it held the directory
    assert len(second.results()) == 4

