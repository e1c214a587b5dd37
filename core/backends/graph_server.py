"""A local Neo4j-protocol server for tests and for trying the Neo4j backend: ArcadeDB's Bolt server, installed
from PyPI alone (the ``arcadedb-embedded`` wheel bundles a Java 25 runtime and the server jars, Bolt plugin
included) and run as a plain Java process bound to 127.0.0.1.

It is not Neo4j: it speaks Bolt and OpenCypher and the official driver connects unchanged (user ``root``), but
it ignores the per-transaction timeout (only its server-wide ``command.timeout`` stops a runaway query, also one
the client gave up on at the run's query timeout: it has no transaction termination) and the
read-only access mode, has one database (no ``CREATE DATABASE``), and differs in corners of Cypher. Its data
folder is wiped at every start: it only ever holds graphs PlanRAG loads on demand.

Files live in ``$PLANRAG_HOME/graph-server``: the installed wheel, and per Bolt port a data folder, a log and a
state file (pid, ports, password). ``python -m core graph-server install|start|stop|status``.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from core.config.files import write_atomic
from core.config import settings as core_settings

PACKAGE = "arcadedb-embedded"
VERSION = "26.10.2.post1"
BOLT_PORT, HTTP_PORT = 17687, 12480
USER = "root"
DEFAULT_DATABASE = "neo4j"  # the database a Bolt session without one uses
START_WAIT_S = 60.0
STOP_WAIT_S = 20.0
DESCRIPTION = __doc__.split("\n\n")[0].replace("``", "")


def home() -> Path:
    """Where the server is installed and keeps its data, logs and state files."""
    return Path(os.environ.get("PLANRAG_GRAPH_SERVER_HOME", core_settings.DATA_HOME / "graph-server"))


def install_dir() -> Path:
    return home() / f"arcadedb-{VERSION}"


def _package() -> Path:
    return install_dir() / "arcadedb_embedded"


def _java() -> Path:
    return _package() / "jre" / "bin" / "java"


def installed() -> bool:
    """Whether the pinned wheel is installed in ``install_dir()``."""
    return _java().is_file() and (_package() / "jars").is_dir()


def _installer() -> list[str]:
    """The install command: the environment's uv when it has one (``make`` installs it; it caches the wheel, so a
    second install takes about a second instead of pip's 40 s), else pip."""
    uv = Path(sys.executable).with_name("uv")
    if uv.is_file():
        return [str(uv), "pip", "install", "-q", "--compile-bytecode", "--python", sys.executable]
    return [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]


def install() -> Path:
    """Install the pinned wheel (``--no-deps --target``; about 97 MB) unless it is there; its folder."""
    if installed():
        return install_dir()
    target = install_dir()
    staging = target.with_name(target.name + f".part-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    installer = _installer()
    done = subprocess.run([*installer, "--no-deps", "--target", str(staging), f"{PACKAGE}=={VERSION}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"{installer[0]} could not install {PACKAGE}=={VERSION}:\n{done.stderr.strip()[-2000:]}")
    try:
        staging.rename(target)
    except OSError:  # another process installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    if not installed():
        raise RuntimeError(f"{PACKAGE}=={VERSION} installed, but {_java()} is missing")
    return target


@dataclass
class Server:
    """A started server: what a client needs (``uri``, ``user``, ``password``) and what stop needs (``pid``)."""

    pid: int
    bolt_port: int
    http_port: int
    password: str
    root: str  # the data folder

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    def env(self) -> dict[str, str]:
        """The environment the Neo4j backend reads."""
        return {"NEO4J_URI": self.uri, "NEO4J_USER": USER, "NEO4J_PASSWORD": self.password}


def _state_file(bolt_port: int) -> Path:
    return home() / f"server-{bolt_port}.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _serves(server: Server) -> bool:
    """Whether the server answers a query on its default database (Bolt opens before that database exists)."""
    if not _answers(server.bolt_port):
        return False
    import neo4j

    try:
        with neo4j.GraphDatabase.driver(server.uri, auth=(USER, server.password), connection_timeout=2) as driver:
            driver.execute_query("RETURN 1")
        return True
    except Exception:  # noqa: BLE001 - not ready yet, whatever the reason
        return False


def _ours(server: Server) -> bool:
    """Whether the state's pid is still this server's Java process (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        try:
            os.kill(server.pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the pid
    return "com.arcadedb.server.ArcadeDBServer" in cmdline and server.root in cmdline


def status(bolt_port: int = BOLT_PORT) -> Server | None:
    """The server started on ``bolt_port`` if it is still running, else None."""
    try:
        server = Server(**json.loads(_state_file(bolt_port).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return server if _ours(server) else None


def _die_with_parent() -> None:
    """In the child before exec (Linux): be sent SIGTERM when the process that started it dies."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: The JVM's quick compiler only (C1, no C2): this server holds question-sized graphs for a session or a test run,
#: where C2's optimizing compiles cost more CPU than they win back. Measured on 2 cores, the 45 Neo4j tests against
#: a fresh server: its CPU 29.5-31.7 s with both compilers, 17.4-19.1 s with C1 only; the tests 19-21 s, 17-18 s.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def start(bolt_port: int = BOLT_PORT, http_port: int = HTTP_PORT, *, heap_mb: int = 768,
          command_timeout_s: float = 60.0, die_with_parent: bool = False) -> Server:
    """Start a server on 127.0.0.1 (port 0: any free port) with an empty data folder, wait until it answers
    queries, and return it. Installs the wheel first when needed. ``die_with_parent`` (tests): stop it when the
    calling process dies, even if it cannot call ``stop``. Raises RuntimeError with the log's end on failure."""
    install()
    if bolt_port and (running := status(bolt_port)):
        return running
    _sweep()
    bolt_port, http_port = bolt_port or _free_port(), http_port or _free_port()
    for port in (bolt_port, http_port):
        if _answers(port):
            raise RuntimeError(f"port {port} on 127.0.0.1 is already in use")
    root = home() / f"data-{bolt_port}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    password = secrets.token_urlsafe(12)
    props = {
        "arcadedb.server.rootPath": root, "arcadedb.server.databaseDirectory": root / "databases",
        "arcadedb.server.rootPassword": password, "arcadedb.server.httpIncomingHost": "127.0.0.1",
        "arcadedb.server.httpIncomingPort": http_port, "arcadedb.server.defaultDatabases": f"{DEFAULT_DATABASE}[root]",
        "arcadedb.server.plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
        "arcadedb.bolt.host": "127.0.0.1", "arcadedb.bolt.port": bolt_port,
        "arcadedb.bolt.defaultDatabase": DEFAULT_DATABASE, "arcadedb.command.timeout": round(command_timeout_s * 1000),
    }
    command = [str(_java()), f"-Xmx{heap_mb}m", *JVM_OPTIONS, *(f"-D{k}={v}" for k, v in props.items()),
               "-cp", str(_package() / "jars" / "*"), "com.arcadedb.server.ArcadeDBServer"]
    log = home() / f"server-{bolt_port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   cwd=root, start_new_session=True,
                                   preexec_fn=_die_with_parent if die_with_parent and sys.platform == "linux" else None)
    server = Server(process.pid, bolt_port, http_port, password, str(root))
    deadline = time.monotonic() + START_WAIT_S
    while not _serves(server):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
            process.wait()
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"the graph server did not open port {bolt_port}; end of {log}:\n" + "\n".join(tail))
        time.sleep(0.1)
    state = _state_file(bolt_port)
    write_atomic(state, json.dumps(asdict(server)))  # a temporary file's mode: 0600
    return server


def _sweep() -> None:
    """Remove the data, log and state of servers that died without ``stop`` (their process is gone)."""
    for state in home().glob("server-*.json"):
        port = state.stem.removeprefix("server-")
        if port.isdigit() and status(int(port)) is None:
            shutil.rmtree(home() / f"data-{port}", ignore_errors=True)
            (home() / f"server-{port}.log").unlink(missing_ok=True)
            state.unlink(missing_ok=True)


def stop(server: Server) -> None:
    """Stop a started server (SIGTERM, then SIGKILL after STOP_WAIT_S) and remove its data, log and state."""
    if _ours(server):
        os.kill(server.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while _ours(server) and time.monotonic() < deadline:
            _reap(server.pid)
            time.sleep(0.1)
        if _ours(server):
            os.kill(server.pid, signal.SIGKILL)
        _reap(server.pid)
    _state_file(server.bolt_port).unlink(missing_ok=True)
    (home() / f"server-{server.bolt_port}.log").unlink(missing_ok=True)
    shutil.rmtree(server.root, ignore_errors=True)


def _reap(pid: int) -> None:
    """Collect the exit status when the server is this process's child (else it lingers as a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# --- command line -------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["install", "start", "stop", "status"],
                   help="install the server, start or stop it, or show its status")
    p.add_argument("--bolt-port", type=int, default=BOLT_PORT, help=f"Bolt port on 127.0.0.1 (default {BOLT_PORT})")
    p.add_argument("--http-port", type=int, default=HTTP_PORT, help=f"HTTP port on 127.0.0.1 (default {HTTP_PORT})")
    p.add_argument("--heap-mb", type=int, default=768, help="Java heap limit in MB (default 768)")
    p.add_argument("--command-timeout", type=float, default=60.0,
                   help="seconds after which the server stops any query (default 60): the only stop of a query "
                        "the client gave up on at its own time limit (Bolt here cancels none)")
    p.add_argument("--env", action="store_true", help="start/status: print only export lines for a shell's eval")


def _print(server: Server, env: bool) -> None:
    if env:
        print("\n".join(f"export {k}={v}" for k, v in server.env().items()))
    else:
        print(f"ArcadeDB {VERSION} (Neo4j-protocol) running: pid {server.pid}, {server.uri}, "
              f"HTTP http://127.0.0.1:{server.http_port}; data {server.root}")
        print("use it with: " + " ".join(f"{k}={v}" for k, v in server.env().items()))


def main(args: argparse.Namespace) -> int:
    if args.action == "install":
        print(f"{PACKAGE} {VERSION} installed in {install()}")
        return 0
    if args.action == "start":
        try:
            server = start(args.bolt_port, args.http_port, heap_mb=args.heap_mb,
                           command_timeout_s=args.command_timeout)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        _print(server, args.env)
        return 0
    server = status(args.bolt_port)
    if args.action == "stop":
        if server:
            stop(server)
            print(f"stopped the graph server on port {args.bolt_port}")
        else:
            print(f"no graph server started on port {args.bolt_port}")
        return 0
    if server is None:
        print(f"no graph server started on port {args.bolt_port}", file=sys.stderr)
        return 1
    _print(server, args.env)
    return 0
