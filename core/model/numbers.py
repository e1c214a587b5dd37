"""Lists of question numbers as people type and read them: ``1-10,15`` in, ``1-10, 15`` out."""
from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def questions_text(count: int) -> str:
    """The question numbers a set of ``count`` questions has, for messages: ``questions 1-200``, ``only question
    1``, ``no questions`` (never ``questions 1-0``)."""
    return "no questions" if count < 1 else "only question 1" if count == 1 else f"questions 1-{count}"


def parse_numbers(text: str, option: str = "--questions") -> list[int]:
    """Question numbers from ranges and lists like ``1-10,15``: sorted, unique. ValueError naming ``option`` and
    the bad part."""
    numbers: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = _RANGE.match(part)
        low, high = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else (0, 0)
        if not m or low < 1 or high < low:
            raise ValueError(f"{option}: {part!r} is not a question number or a range like 1-10 "
                             "(numbers start at 1; e.g. 1-10,15)")
        numbers.update(range(low, high + 1))
    return sorted(numbers)


def spans(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``1-3, 7``."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
