"""Files written whole or not at all, so that a reader in another thread or process never sees half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` (its folder created) through a temporary file in the same folder renamed
    over it: a concurrent reader sees the old file, or none, or the new one; two writers leave one of theirs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(part, path)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise
