"""The run store a process's jobs and pages open (core.jobs.opening.open_store): built once per place a store lives,
shared by threads, built again where DATA_HOME points elsewhere or its file was replaced outside the app."""
from __future__ import annotations

import threading

from core.config import settings as core_settings
from core.jobs.opening import open_store
from core.model.run_settings import RunSettings


def test_the_run_store_is_built_once_per_home(tmp_path, monkeypatch):
    monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "a")
    (tmp_path / "a").mkdir()
    first = open_store()
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(open_store())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert open_store() is first and all(s is first for s in seen)
    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "b")
    (tmp_path / "b").mkdir()
    other = open_store()
    assert other is not first and other.path == tmp_path / "b" / "runs.sqlite"


def test_a_store_replaced_outside_the_app_is_opened_again_and_noticed(tmp_path, monkeypatch):
    monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    store = open_store()
    for n in range(3):
        store.create(f"run{n}", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    path = store.path
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    again = open_store()
    assert again is not store and again.notice and "holds 0 runs where 3 were stored" in again.notice
    assert open_store() is again
