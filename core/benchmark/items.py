"""The work list of a benchmark: one item per (scenario, question, database, technique) for one model, from the
command line's selections (``--questions 1-10,15``, ``--db all``, ``--scenario all``), with notes on what was
left out and why."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from core.model.numbers import parse_numbers as parse_number_list
from core.model.numbers import questions_text, spans
from core.backends.registry import BACKENDS, unavailable

class BenchError(Exception):
    """A benchmark that cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class Item:
    """One question on one database with one technique and one model (``model`` as the results key it)."""

    scenario: str
    question: int
    db: str
    technique: str
    model: str
    source: str = "dqa"  # where the question comes from: DQA, or the built-in demo scenarios
    epoch: int = 1  # which of the repeated samples (--epochs K): 1..K

    @property
    def key(self) -> str:
        """The result store's key; epoch 1 keeps the key items had before epochs (``.../e2`` for epoch 2)."""
        prefix = "" if self.source == "dqa" else f"{self.source}:"
        suffix = f"/e{self.epoch}" if self.epoch > 1 else ""
        return f"{prefix}{self.scenario}/{self.question}/{self.db}/{self.technique}/{self.model}{suffix}"

    @classmethod
    def of_row(cls, row: dict) -> Item:
        """The item of a stored result or not-run row (its fields)."""
        return cls(row["scenario"], row["question"], row["db"], row["technique"], row["model"],
                   row.get("source", "dqa"), row.get("epoch", 1))

    @classmethod
    def from_key(cls, key: str) -> Item:
        """The item a result key names (``key``'s inverse)."""
        source, rest = key.split(":", 1) if ":" in key.split("/", 1)[0] else ("dqa", key)
        scenario, question, db, technique, model = rest.split("/", 4)
        epoch = re.search(r"/e(\d+)$", model)
        return cls(scenario, int(question), db, technique, model[:epoch.start()] if epoch else model, source,
                   int(epoch.group(1)) if epoch else 1)

    @property
    def name(self) -> str:
        """Short, for progress lines and replay file names: ``locating-12-sqlite-planrag`` (``demo-locating-1-...``
        for a demo question; ``...-planrag-e2`` for epoch 2)."""
        return self.base_name + (f"-e{self.epoch}" if self.epoch > 1 else "")

    @property
    def base_name(self) -> str:
        """The name without the epoch."""
        prefix = "" if self.source == "dqa" else f"{self.source}-"
        return f"{prefix}{self.scenario}-{self.question}-{self.db}-{self.technique}"


def parse_numbers(text: str) -> list[int]:
    """Question numbers from ``all`` (returns []), or ranges and lists like ``1-10,15``: sorted, unique."""
    if text.strip().lower() == "all":
        return []
    try:
        return parse_number_list(text, "--questions")
    except ValueError as e:
        raise BenchError(f"{e} or all") from None


def scenarios_of(choice: str, source: str = "dqa") -> list[str]:
    """The scenarios to run: ``all`` is every scenario offering questions from ``source``; a named one (or several,
    separated by commas) must be known and offer them."""
    from core import scenarios  # heavy: loads numpy, pandas

    if choice == "all":
        return [k.name for k in scenarios.all_types() if source in k.source_keys()]
    if "," in choice:
        return list(dict.fromkeys(name for part in choice.split(",") if part.strip()
                                  for name in scenarios_of(part.strip(), source)))
    try:
        kind = scenarios.get(choice)
    except KeyError as e:
        raise BenchError(e.args[0]) from None
    if source not in kind.source_keys():
        raise BenchError(f"scenario {choice} has no {source!r} questions; use --source "
                         f"{' or '.join(kind.source_keys())}")
    return [choice]


def databases_of(choice: str, notes: list[str]) -> list[str]:
    """The backends to run: ``all`` is those available here (each skipped one noted with its reason); a named
    one must be available."""
    if choice != "all":
        reason = unavailable(choice)
        if reason:
            raise BenchError(f"database {choice} cannot be used here: {reason}")
        return [choice]
    chosen = []
    for name in BACKENDS:
        reason = unavailable(name)
        if reason:
            notes.append(f"database {name} skipped: {reason}")
        else:
            chosen.append(name)
    if not chosen:
        raise BenchError("no database backend is available here")
    return chosen


@dataclass
class WorkList:
    items: list[Item]
    notes: list[str] = field(default_factory=list)


def work_list(scenarios: list[str], dbs: list[str], techniques: list[str], model: str, numbers: list[int],
              counts: dict[str, int], notes: list[str] | None = None, source: str = "dqa",
              epochs: int = 1) -> WorkList:
    """Every item, ``epochs`` times (epoch 1 of every item first, so a benchmark stopped early has whole epochs),
    ordered by scenario, question, database and technique. ``numbers`` empty: all questions; ``counts``: each
    scenario's number of questions (numbers past it: a note with several scenarios, an error with one)."""
    if epochs < 1:
        raise BenchError("--epochs must be at least 1")
    notes = list(notes or [])
    items = []
    for scenario in scenarios:
        count = counts[scenario]
        chosen = [n for n in numbers if n <= count] if numbers else list(range(1, count + 1))
        beyond = [n for n in numbers if n > count]
        if beyond and len(scenarios) == 1:
            raise BenchError(f"{scenario} has {questions_text(count)}; there is no question {spans(beyond)}")
        if beyond:
            notes.append(f"{scenario} has {questions_text(count)}: {spans(beyond)} left out")
        items += [Item(scenario, n, db, t, model, source) for n in chosen for db in dbs for t in techniques]
    items += [replace(i, epoch=e) for e in range(2, epochs + 1) for i in items]
    return WorkList(items, notes)
