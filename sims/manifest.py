"""A generated question set's manifest (``generated.json`` at its root, written by ``sims.generator``): what marks
a folder as a generated set, and how it is read. Apart from the generator, so that reading a set's name does not
load the simulators (and numpy) it generates with."""
from __future__ import annotations

import json
import os
from pathlib import Path

from sims.files import FileRefused, read_text

#: The set's manifest at its root; its presence marks a folder as a generated set.
MANIFEST = "generated.json"


class GenerateError(ValueError):
    """Knobs that cannot be met, or an output folder that must not be written; the message says what to change."""


def read_manifest(root: Path) -> dict | None:
    """The manifest of a generated set, or None when ``root`` has none."""
    path = Path(root) / MANIFEST
    if not os.path.lexists(path):
        return None
    try:
        return json.loads(read_text(path, "manifest"))
    except (json.JSONDecodeError, UnicodeDecodeError, FileRefused) as e:
        raise GenerateError(f"{path}: not a generator manifest ({e})") from None
