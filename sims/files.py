"""Reading the files a person points the workbench at (DQA files, replays, scenario folders and their data) with
one check first: a regular file (not a FIFO, device, socket or folder), within a size cap for its kind, links
followed by the kernel (a loop is refused, never followed forever). A refused file fails at once with one
message naming the file and the rule, and memory stays bounded: nothing larger than the cap is ever read."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MB = 1 << 20
#: The largest file of each kind read (bytes): far above the real ones (DQA's largest dump is 0.4 MB, its
#: question files 0.6 MB, a large model's tokenizer.json about 17 MB). The memory bound: a question file or a
#: tokenizer file takes about 9 to 15 times its size once parsed, so their caps keep a process loading one within
#: about 300 MB (bench/bench_trust.py measures it).
MAX_BYTES = {"question file": 16 * MB, "database dump": 128 * MB, "graph file": 128 * MB, "replay file": 16 * MB,
             "scenario file": 1 * MB, "CSV data file": 128 * MB, "SQLite data file": 1024 * MB,
             "manifest": 1 * MB, "price table": 1 * MB, "tokenizer file": 24 * MB}


class FileRefused(ValueError):
    """A file that is not read: not a regular file, too large, or a link that loops. The message names the file
    and the rule (``path``, ``rule``)."""

    def __init__(self, path, rule: str):
        super().__init__(f"{path}: {rule}")
        self.path, self.rule = str(path), rule


def _refuse(path, rule: str) -> FileRefused:
    return FileRefused(path, rule)


def _check_stat(path, st: os.stat_result, kind: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise _refuse(path, f"a folder where a {kind} is expected")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise _refuse(path, f"{what}, not a regular file: a {kind} must be a regular file")
    cap = MAX_BYTES[kind]
    if st.st_size > cap:
        raise _refuse(path, f"{st.st_size:,} bytes, more than the {cap // MB:,} MB a {kind} may have")


def _os_error(path, e: OSError, kind: str) -> Exception:
    """The error for an OSError met on ``path``: FileNotFoundError as it is (callers name it their way),
    else a FileRefused naming the rule."""
    if isinstance(e, FileNotFoundError):
        return e
    if e.errno == errno.ELOOP:
        return _refuse(path, f"a link that loops (it leads back to itself): no {kind} to read")
    if e.errno == errno.ENOTDIR:
        return FileNotFoundError(errno.ENOENT, "no such file (a part of its path is not a folder)", str(path))
    return _refuse(path, f"cannot be read ({e.strerror or e})")


def check_file(path: str | Path, kind: str) -> Path:
    """``path`` when it is a regular file within the cap of ``kind`` (see MAX_BYTES), links followed; else
    FileRefused (FileNotFoundError when there is none). For files another library opens (SQLite)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(path, e, kind) from None
    _check_stat(path, st, kind)
    return Path(path)


def read_bytes(path: str | Path, kind: str) -> bytes:
    """The bytes of a regular file within the cap of ``kind``: checked on the open file itself (opened without
    waiting, so a FIFO fails at once) and read no further than the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _os_error(path, e, kind) from None
    try:
        _check_stat(path, os.fstat(fd), kind)
    except FileRefused:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_BYTES[kind] + 1)
        except OSError as e:
            raise _os_error(path, e, kind) from None
    if len(data) > MAX_BYTES[kind]:  # it grew since the check
        raise _refuse(path, f"more than the {MAX_BYTES[kind] // MB:,} MB a {kind} may have")
    return data


def read_text(path: str | Path, kind: str) -> str:
    """``read_bytes`` as UTF-8 text (UnicodeDecodeError for other bytes, as Path.read_text), universal newlines."""
    return read_bytes(path, kind).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def check_folder(path: str | Path) -> Path:
    """``path`` resolved, when it is a folder (links followed; FileRefused for a loop or another kind of file,
    FileNotFoundError when there is none)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(path, e, "folder") from None
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "not a folder")
    return Path(os.path.realpath(path))
