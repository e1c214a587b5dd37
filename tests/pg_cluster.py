"""A PostgreSQL 15 cluster of a test's own (initdb in a temporary folder, a free port, trust auth), for the tests
that stop and start the server: the machine's shared cluster is never stopped. Run as the postgres user when
this process is root (initdb refuses root); removed by ``destroy``."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def available() -> str | None:
    """Why a cluster of its own cannot be made here; None when it can."""
    if not (BIN / "initdb").exists() or not (BIN / "pg_ctl").exists():
        return f"no PostgreSQL binaries in {BIN} (set PG_BIN)"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser: initdb cannot run as the postgres user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """A cluster in a folder of its own on 127.0.0.1:``port``; ``url(db)`` names one of its databases."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="planrag-pg-"))
        self.data, self.log = self.folder / "data", self.folder / "server.log"
        self.port = _free_port()
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._as_owner([str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                        "--no-sync"])
        self.start()

    def _as_owner(self, command: list[str]) -> None:
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)}: {done.stdout}{done.stderr}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"])

    def stop(self) -> None:
        self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def upgraded():
    """A cluster of the test's own at this code's schema (the test skips, or fails under REQUIRE_POSTGRES=1, when
    none can be made here); its pools closed and the cluster removed after."""
    from core.store import database, schema
    from tests.conftest import require

    why = available()
    if why:
        require("postgres", f"no PostgreSQL cluster of the test's own: {why}")
    cluster = PgCluster()
    try:
        schema.upgrade(cluster.url())
        yield cluster
    finally:
        database.close_pools(cluster.url())
        cluster.destroy()
