"""Issue 27, section 4: odd files where a file is expected (a FIFO, a huge sparse file, a link to /dev/zero, a
folder, a link that loops) are refused at once, with one message naming the file and the rule, and bounded memory:
DQA files, replay files, scenario folders and their files. Truncated and non-UTF-8 files keep their clean errors.
The command lines run under an address-space limit, so a regression fails with MemoryError rather than taking the
machine; their timings are printed by bench/bench_odd_files.py."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.scenarios.dqa.source import DQA, DQAError
from core.llm.client import LLMNotConfigured, read_replay
from core.scenarios.plugins.folder import FolderScenario, ScenarioError
from sims.files import MAX_BYTES, FileRefused, check_file, read_bytes, read_text
from tests.conftest import ROOT

ODD = ["fifo", "sparse", "dev-zero", "folder", "loop"]
RULE = {"fifo": "FIFO", "sparse": "more than the", "dev-zero": "a device", "folder": "a folder where",
        "loop": "a link that loops"}


def make_odd(path: Path, odd: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if odd == "fifo":
        os.mkfifo(path)
    elif odd == "sparse":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    elif odd == "dev-zero":
        path.symlink_to("/dev/zero")
    elif odd == "folder":
        path.mkdir()
    else:
        path.symlink_to(path.name)
    return path


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def run_cli(*argv: str, env: dict) -> subprocess.CompletedProcess:
    """A command line under a 3 GB address-space limit (the timeout only guards the suite against a hang)."""
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limited)


@pytest.mark.parametrize("odd", ODD)
def test_the_checker_refuses_each_odd_file_naming_it_and_the_rule(tmp_path, odd):
    path = make_odd(tmp_path / "q1.sql", odd)
    for read in (lambda: read_bytes(path, "database dump"), lambda: read_text(path, "database dump"),
                 lambda: check_file(path, "database dump")):
        with pytest.raises(FileRefused) as e:
            read()
        assert str(e.value).startswith(f"{path}: ") and RULE[odd] in str(e.value)


def test_the_checker_reads_a_regular_file_and_passes_a_missing_one_on(tmp_path):
    good = tmp_path / "ok.json"
    good.write_bytes(b"[1,\r\n2]")
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert read_text(link, "replay file") == "[1,\n2]" and read_bytes(good, "replay file") == b"[1,\r\n2]"
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "none.json", "replay file")
    with pytest.raises(UnicodeDecodeError):
        good.write_bytes(b"\xff\xfe")
        read_text(good, "replay file")
    assert all(cap >= 1 << 20 for cap in MAX_BYTES.values())


@pytest.fixture
def layout(dqa_dir, tmp_path):
    """A DQA folder whose files link to the real ones (so one of them can be made odd)."""
    root = tmp_path / "dqa"
    for scenario in ("locating", "building"):
        for sub in ("questions", "queries/SQL_format", "queries/LPG_format"):
            (root / scenario / sub).mkdir(parents=True)
            for f in (dqa_dir / scenario / sub).iterdir():
                (root / scenario / sub / f.name).symlink_to(f)
    return root


@pytest.mark.parametrize("odd", ODD)
def test_an_odd_dqa_dump_is_one_error_line_on_the_command_line(layout, odd):
    dump = layout / "locating/queries/SQL_format/q1.sql"
    dump.unlink()
    make_odd(dump, odd)
    out = run_cli("-m", "core", "query", "--scenario", "locating", "--question", "1", "--db", "sqlite", "SELECT 1",
                  env={"DQA_DIR": str(layout), "PLANRAG_HOME": str(layout.parent / "home")})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith(f"error: {dump}: ") and RULE[odd] in lines[0]
    out = run_cli("-m", "sims", "check", "--dqa", str(layout), env={})
    assert out.returncode == 2 and out.stderr.startswith(f"error: {dump}: ") and "Traceback" not in out.stderr


@pytest.mark.parametrize("odd", ODD)
def test_an_odd_question_file_is_a_dqa_error(layout, odd):
    questions = layout / "building/questions/simulated_questions.json"
    questions.unlink()
    make_odd(questions, odd)
    with pytest.raises(DQAError, match=RULE[odd]) as e:
        DQA(layout)
    assert str(questions) in str(e.value)


def test_a_non_utf8_question_file_keeps_its_clean_error(layout):
    questions = layout / "building/questions/simulated_questions.json"
    questions.unlink()
    questions.write_bytes(b'[{"a": "\xff"}]')
    with pytest.raises(DQAError, match="not a JSON question file"):
        DQA(layout)


@pytest.mark.parametrize("odd", ODD)
def test_an_odd_replay_file_is_refused(tmp_path, odd):
    path = make_odd(tmp_path / "replay.json", odd)
    with pytest.raises(LLMNotConfigured, match=RULE[odd]):
        read_replay(path)
    out = run_cli("-m", "core", "run", "--source", "demo", "--scenario", "locating", "--question", "1", "--db",
                  "sqlite", "--technique", "iterrag", "--llm", f"replay:{path}",
                  env={"PLANRAG_HOME": str(tmp_path / "home")})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and str(path) in lines[0] and RULE[odd] in lines[0], out.stderr


@pytest.fixture
def scenario(tmp_path) -> Path:
    folder = tmp_path / "scenarios" / "depot"
    shutil.copytree(ROOT / "assets" / "scenarios" / "depot", folder)
    return folder


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize("name", ["scenario.toml", "rules.md", "simulator.py", "data/site.csv"])
def test_an_odd_file_in_a_scenario_folder_is_a_scenario_error(scenario, name, odd):
    path = scenario / name
    if not path.exists():
        pytest.skip(f"the shipped depot scenario has no {name}")
    path.unlink()
    make_odd(path, odd)
    with pytest.raises(ScenarioError, match=RULE[odd]) as e:
        kind = FolderScenario(scenario)
        kind.database()
        kind.questions()
        kind.module  # noqa: B018 - imports simulator.py
    assert name.split("/")[-1] in str(e.value)


@pytest.mark.parametrize("odd", ["fifo", "dev-zero", "loop"])
def test_an_odd_scenario_folder_is_one_error_line(scenario, odd):
    shutil.rmtree(scenario)
    make_odd(scenario, odd)
    with pytest.raises(ScenarioError, match="not a folder|a link that loops"):
        FolderScenario(scenario)
    out = run_cli("-m", "core", "scenario", "check", str(scenario),
                  env={"PLANRAG_HOME": str(scenario.parent.parent / "home"),
                       "PLANRAG_SCENARIOS": str(scenario.parent)})
    lines = [line for line in out.stderr.strip().splitlines() if line.startswith("error")]
    assert out.returncode == 1 and len(lines) == 1 and str(scenario) in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_a_valid_question_file_over_its_memory_bound_is_refused(layout):
    """Issue 44 section B: a valid 63 MB question file peaked at 955 MB; a question file is capped so that loading
    one stays within about 300 MB (sims.files.MAX_BYTES), with a clear error naming the file and the cap."""
    questions = layout / "building/questions/simulated_questions.json"
    real = json.loads(questions.read_text())
    questions.unlink()
    copies, size = [], 0
    while size <= 17 << 20:  # real questions, repeated past the cap: valid JSON a loader would otherwise take
        copies.extend(real)
        size += len(json.dumps(real))
    questions.write_text(json.dumps(copies))
    with pytest.raises(DQAError, match=r"more than the 16 MB a question file may have") as e:
        DQA(layout)
    assert str(questions) in str(e.value)
