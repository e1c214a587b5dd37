"""The project home in a bad state (issue 12): a home that is a file or read-only, a damaged run or checkpoint store,
an emptied run store. Each gives a clear message (no traceback), keeps the broken file aside (renamed, never
deleted) and leaves the app and the command line usable."""
from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from core.config import home
from core.store import sqlite as sqlite_store
from core.model.run_settings import RunSettings
from core.store.runs import RunStore
from tests.conftest import ROOT
from streamlit.testing.v1 import AppTest

from tests.page_app import APP, button, isolate, open_page

REPLAY = f"replay:{ROOT / 'assets/replays/demo_locating_1_sql_planrag.json'}"
RUN = ["run", "--source", "demo", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique",
       "planrag", "--llm", REPLAY]


@pytest.fixture
def cli_home(tmp_path, monkeypatch):
    """The command line with its home at ``tmp_path/home`` and no DQA."""
    import core.cli.main as cli

    monkeypatch.setattr("core.config.settings.DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    return cli, tmp_path / "home"


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be written in, even by root (``chattr +i``); skipped where that cannot be made."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            pytest.skip("cannot make a read-only folder here (chattr +i failed)")
    else:
        folder.chmod(0o555)
    yield folder
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o755)


def _store_with_runs(path, n=3) -> RunStore:
    store = RunStore(path)
    for i in range(n):
        store.create(f"run{i}", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    return store


def test_home_that_is_a_file_is_a_clear_error(cli_home, capsys):
    cli, where = cli_home
    where.write_text("not a folder")
    assert cli.main(RUN) == 1
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "PLANRAG_HOME" in err and "Traceback" not in err
    assert where.read_text() == "not a folder"
    assert cli.main(["bench", "--smoke"]) == 1
    assert "is a file" in capsys.readouterr().err
    for argv in (["override", "--list"], ["override", "run1", "--clear"]):  # was a FileExistsError traceback
        assert cli.main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error (config): the project home") and "is a file" in err, (argv, err)


def test_scenario_new_where_it_cannot_write_is_an_error_line(tmp_path, capsys, monkeypatch):
    import core.cli.main as cli

    monkeypatch.delenv("PLANRAG_SCENARIOS", raising=False)
    (tmp_path / "file").write_text("not a folder")
    assert cli.main(["scenario", "new", "mine", "--dir", str(tmp_path / "file")]) == 1  # was a traceback
    assert capsys.readouterr().err.startswith(f"error: cannot write the skeleton in {tmp_path / 'file' / 'mine'}: ")


def test_read_only_home_is_a_clear_error(cli_home, read_only, capsys, monkeypatch):
    cli, _ = cli_home
    monkeypatch.setattr("core.config.settings.DATA_HOME", read_only)
    assert cli.main(RUN) == 1
    assert "is not writable" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_run_store_set_aside_and_a_new_one_used(tmp_path, damage, monkeypatch):
    path = tmp_path / "runs.sqlite"
    if damage == "garbage":
        path.write_bytes(os.urandom(5000))
    else:
        _store_with_runs(path, 40)
        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
        monkeypatch.setattr(sqlite_store, "_checked", set())  # opened next by a new process, which checks it
    before = path.read_bytes()
    seen = len(home.notices())
    store = RunStore(path)
    [kept] = [p for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite.broken-") and p.suffix != ".marker"
              and not p.name.endswith(("-wal", "-shm"))]
    assert kept.read_bytes() == before  # kept whole, never deleted
    [notice] = home.notices(seen)
    assert "run store" in notice and kept.name in notice
    if damage == "truncated":  # the store had runs: the new, empty one is not "no runs yet"
        assert store.notice and "40 were stored" in store.notice and kept.name in store.notice
    store.create("new", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    assert [r.id for r in RunStore(path).list()] == ["new"]


def test_emptied_or_replaced_run_store_is_noticed(tmp_path):
    path = tmp_path / "runs.sqlite"
    _store_with_runs(path, 3)
    assert RunStore(path).notice is None
    for suffix in ("", "-wal", "-shm"):
        if (tmp_path / f"runs.sqlite{suffix}").exists():
            (tmp_path / f"runs.sqlite{suffix}").unlink()
    path.write_bytes(b"")  # emptied: SQLite reads a 0-byte file as a new database
    store = RunStore(path)
    assert store.notice and "holds 0 runs where 3 were stored" in store.notice
    store.create("after", RunSettings("locating", 1, "sqlite", "planrag", "x"))  # a run meanwhile does not make the notice go away
    assert RunStore(path).notice
    store.acknowledge()
    assert RunStore(path).notice is None


def test_runs_deleted_outside_the_app_are_noticed(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = _store_with_runs(path, 3)
    store.delete("run0")  # the app's own delete keeps the marker in step
    assert RunStore(path).notice is None
    con = sqlite3.connect(path)
    with con:
        con.execute("DELETE FROM runs")
    con.close()
    notice = RunStore(path).notice
    assert notice and "lost runs" in notice and "0 runs where 2" in notice


def test_command_line_warns_of_an_emptied_run_store(cli_home, capsys):
    cli, where = cli_home
    assert cli.main(RUN) == 0 and "warning" not in capsys.readouterr().err
    for suffix in ("", "-wal", "-shm"):
        (where / f"runs.sqlite{suffix}").unlink(missing_ok=True)
    (where / "runs.sqlite").write_bytes(b"")
    assert cli.main(RUN) == 0  # the run goes on, and is told
    err = capsys.readouterr().err
    assert err.count("warning: The run store") == 1 and "holds 0 runs where 1 was stored" in err


def test_damaged_checkpoint_store_set_aside_and_runs_go_on(cli_home, capsys):
    cli, where = cli_home
    where.mkdir()
    (where / "checkpoints.sqlite").write_bytes(os.urandom(4096))
    assert cli.main(RUN) == 0
    captured = capsys.readouterr()
    assert "finished: decision doab" in captured.out
    assert "warning: The checkpoint store" in captured.err and "checkpoints.sqlite.broken-" in captured.err
    assert any(p.name.startswith("checkpoints.sqlite.broken-") for p in where.iterdir())


def test_app_on_a_home_that_is_a_file_uses_a_fallback(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path / "file-home")
    (tmp_path / "file-home").write_text("not a folder")
    monkeypatch.setattr(home, "fallback_home", lambda: tmp_path / "fallback")
    monkeypatch.setattr(home, "_fallback_reason", None)
    at = AppTest.from_file(str(APP), default_timeout=30).run()  # the app's first page, as a browser opens it
    assert not at.exception
    assert any("is a file" in w.value and str(tmp_path / "fallback") in w.value for w in at.warning)
    at.switch_page("pages/history.py").run()
    assert not at.exception
    assert "No runs yet" in " ".join(i.value for i in at.info)
    assert (tmp_path / "fallback").is_dir() and (tmp_path / "file-home").read_text() == "not a folder"


def test_pages_on_a_home_that_is_a_file_never_fail(monkeypatch, tmp_path):
    """Whichever page a session reaches first, the run store is opened in the fallback home."""
    isolate(monkeypatch, tmp_path / "file-home")
    (tmp_path / "file-home").write_text("not a folder")
    monkeypatch.setattr(home, "fallback_home", lambda: tmp_path / "fallback")
    monkeypatch.setattr(home, "_fallback_reason", None)
    for page in ("pages/history.py", "pages/run.py"):
        assert not open_page(page).exception


def test_history_page_says_the_run_store_was_emptied(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    _store_with_runs(tmp_path / "runs.sqlite", 2)
    for suffix in ("", "-wal", "-shm"):
        if (tmp_path / f"runs.sqlite{suffix}").exists():
            (tmp_path / f"runs.sqlite{suffix}").unlink()
    at = open_page("pages/history.py")
    assert not at.exception
    assert any("holds 0 runs where 2 were stored" in w.value for w in at.warning)
    button(at, "Go on with this run store").click().run()
    assert not any("were stored" in w.value for w in at.warning)
    assert "No runs yet" in " ".join(i.value for i in at.info)
