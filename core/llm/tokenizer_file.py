"""A tokenizer the user points at: a Hugging Face ``tokenizer.json`` file (PLANRAG_TOKENIZER, ``--tokenizer``, the
Settings page), read with the ``tokenizers`` library, counts a request's tokens offline for the context estimate.
It is preferred to the server's tokenize endpoint (the user chose it) and to the character estimate.

The file is untrusted: its regular expressions may backtrack for hours, or make the native library panic. So it
is loaded and counts in a process of its own (one per file while it stays unchanged), each count within
COUNT_TIMEOUT_S; a tokenizer that panics, crashes or is too slow is killed and set aside for the rest of the
process with a notice, and the estimate falls back to the characters (the caller's, stated as such)."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from core.config import home
from sims.files import FileRefused, read_text

KIND = "tokenizer file"
#: Seconds one count may take (a 200,000-character request takes well under one with a real tokenizer).
COUNT_TIMEOUT_S = 10.0
#: Seconds loading the file may take in its process (a large model's takes about one).
LOAD_TIMEOUT_S = 60.0
_ROOT = Path(__file__).resolve().parents[2]
_lock = threading.Lock()
_loaded: dict[tuple, Callable[[str], int]] = {}  # (path, size, mtime) -> its counter


class TokenizerFileError(ValueError):
    """A tokenizer file that cannot be used: missing, not a regular file, too large, not a tokenizer the
    ``tokenizers`` library reads, or one that failed or took too long to count. The message names the file."""


def counted_by(path: str | Path) -> str:
    """How an estimate names its source: ``tokenizer file tokenizer.json``."""
    return f"{KIND} {Path(path).name}"


class _Counter:
    """The counting process of one tokenizer file: text -> its tokens (no special tokens added; the chat
    template's are added by the estimate). Any thread may call it (one count at a time)."""

    def __init__(self, path: Path):
        self.path = path
        self.set_aside: str | None = None  # why the file counts no more (it failed or was too slow)
        self._lock = threading.Lock()
        self._proc = subprocess.Popen([sys.executable, "-m", "core.llm.tokenizer_file", str(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      cwd=_ROOT, env={"PYTHONPATH": str(_ROOT), "PATH": os.environ.get("PATH", ""),
                                                      "LANG": "C.UTF-8"}, close_fds=True)
        self._buffer = b""
        try:
            ready = self._reply(LOAD_TIMEOUT_S)
        except TimeoutError:
            self._kill()
            raise TokenizerFileError(f"{KIND} {path} took longer than {LOAD_TIMEOUT_S:g} s to load") from None
        if "error" in ready:
            self._kill()
            raise TokenizerFileError(f"{KIND} {path} is not a Hugging Face tokenizer.json ({ready['error']})")

    def __call__(self, text: str) -> int:
        with self._lock:
            if self.set_aside:
                raise TokenizerFileError(self.set_aside)
            try:
                self._proc.stdin.write(json.dumps(text).encode() + b"\n")
                self._proc.stdin.flush()
                reply = self._reply(COUNT_TIMEOUT_S)
            except TimeoutError:
                self._fail(f"took longer than {COUNT_TIMEOUT_S:g} s to count {len(text):,} characters (a regular "
                           "expression that backtracks without end?)")
            except (OSError, EOFError, ValueError):
                self._fail("crashed while counting")
            if "error" in reply:
                self._fail(f"failed while counting ({reply['error']})")
            return int(reply["tokens"])

    def _fail(self, why: str):
        self._kill()
        self.set_aside = f"{KIND} {self.path} {why}: set aside, tokens are estimated from the characters"
        home.add_notice(f"The {self.set_aside}.")
        raise TokenizerFileError(self.set_aside)

    def _reply(self, timeout_s: float) -> dict:
        """The process's next line as a dict, within ``timeout_s`` (TimeoutError), EOFError at its end."""
        deadline, fd = time.monotonic() + timeout_s, self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise ValueError("not a map")
        return reply

    def _kill(self) -> None:
        self._proc.kill()
        self._proc.wait()
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def open_tokenizer(path: str | Path) -> Callable[[str], int]:
    """The token counter of the ``tokenizer.json`` at ``path`` (see _Counter). TokenizerFileError when it cannot
    be used."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    try:
        st = os.stat(path)
    except OSError:
        st = None  # read_text names the problem
    key = (str(path), st and st.st_size, st and st.st_mtime_ns)
    with _lock:
        if key in _loaded:
            return _loaded[key]
    try:
        read_text(path, KIND)  # the file's checks and cap, before its process reads it
    except FileNotFoundError:
        raise TokenizerFileError(f"{KIND} {path} not found") from None
    except FileRefused as e:
        raise TokenizerFileError(f"{KIND} {e}") from None
    except UnicodeDecodeError:
        raise TokenizerFileError(f"{KIND} {path} is not a Hugging Face tokenizer.json (not UTF-8 text)") from None
    count = _Counter(path)
    with _lock:
        _loaded[key] = count
    return count


def _serve(path: str) -> None:
    """The counting process: loads the file, says ``{"ready": true}`` (or its error), then answers each line (a
    JSON string) with ``{"tokens": n}`` or ``{"error": ...}`` until its input ends."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the library's prints go to stderr
    sys.stdout = sys.stderr

    def send(obj) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(read_text(path, KIND))
    except BaseException as e:  # noqa: BLE001 - the library's errors for a malformed file, and its panics
        return send({"error": " ".join(str(e).split())[:200]})
    send({"ready": True})
    for line in sys.stdin.buffer:
        try:
            send({"tokens": len(tokenizer.encode(json.loads(line), add_special_tokens=False).ids)})
        except BaseException as e:  # noqa: BLE001 - a panic of the native library: said, the process ends
            send({"error": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"})
            return


if __name__ == "__main__":
    _serve(sys.argv[1])
