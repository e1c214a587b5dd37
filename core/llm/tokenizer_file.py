"""A tokenizer the user points at: a Hugging Face ``tokenizer.json`` file (PLANRAG_TOKENIZER, ``--tokenizer``, the
Settings page), read with the ``tokenizers`` library, counts a request's tokens offline for the context estimate.
It is preferred to the server's tokenize endpoint (the user chose it) and to the character estimate. A file is read
once per process while it stays unchanged."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from sims.files import FileRefused, read_text

KIND = "tokenizer file"
_lock = threading.Lock()
_loaded: dict[tuple, Callable[[str], int]] = {}  # (path, size, mtime) -> its counter


class TokenizerFileError(ValueError):
    """A tokenizer file that cannot be used: missing, not a regular file, too large, or not a tokenizer the
    ``tokenizers`` library reads. The message names the file."""


def counted_by(path: str | Path) -> str:
    """How an estimate names its source: ``tokenizer file tokenizer.json``."""
    return f"{KIND} {Path(path).name}"


def open_tokenizer(path: str | Path) -> Callable[[str], int]:
    """The token counter of the ``tokenizer.json`` at ``path``: text -> its tokens (no special tokens added; the
    chat template's are added by the estimate). TokenizerFileError when it cannot be used."""
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
        text = read_text(path, KIND)
    except FileNotFoundError:
        raise TokenizerFileError(f"{KIND} {path} not found") from None
    except FileRefused as e:
        raise TokenizerFileError(f"{KIND} {e}") from None
    except UnicodeDecodeError:
        raise TokenizerFileError(f"{KIND} {path} is not a Hugging Face tokenizer.json (not UTF-8 text)") from None
    from tokenizers import Tokenizer  # heavy: loaded only when a tokenizer file is set

    try:
        tokenizer = Tokenizer.from_str(text)
    except BaseException as e:  # noqa: BLE001 - the library's own errors for a malformed file, and its panics
        if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        detail = " ".join(str(e).split())[:200]
        raise TokenizerFileError(f"{KIND} {path} is not a Hugging Face tokenizer.json ({detail})") from None

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    with _lock:
        _loaded[key] = count
    return count
