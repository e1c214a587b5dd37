"""A run's trace as the views read it, folded from its events (dicts, as the run store keeps them) one at a time,
so a page can show it while the run goes on: the plan in force, the step being worked on, re-plans and queries."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_STEP_NUMBER = re.compile(r"^\W*step\s*(\d+)\b", re.I)


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def step_index(plan: list[str], current_step: str) -> int | None:
    """Which step of ``plan`` the agent's ``Current step`` names: by its ``Step N`` number, else by its text."""
    m = _STEP_NUMBER.match(current_step)
    if m and 1 <= int(m.group(1)) <= len(plan):
        return int(m.group(1)) - 1
    said = _words(_STEP_NUMBER.sub("", current_step))
    for i, step in enumerate(plan):
        words = _words(step)
        if said and words and (said.startswith(words) or words.startswith(said)):
            return i
    return None


@dataclass
class Trace:
    """The events so far; ``plan`` is the plan in force and ``current`` the index of its step being worked on."""

    events: list[dict] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    current: int | None = None
    finished: bool = False
    replans: int = 0
    queries: int = 0  # database queries (Self-thinking actions not counted)

    @classmethod
    def of(cls, events: list[dict]) -> Trace:
        trace = cls()
        for event in events:
            trace.add(event)
        return trace

    def add(self, event: dict) -> None:
        """Fold in the next event."""
        kind = event["kind"]
        self.events.append(event)
        if kind == "plan" and event["status"] in ("adopted", "approved", "edited"):
            self._adopt(event["steps"])
        elif kind == "replan" and event["replan"]:
            self.replans += 1
            if event["status"] == "adopted":
                self._adopt(event["new_plan"])
        elif kind == "thought" and event.get("current_step"):
            self.current = step_index(self.plan, event["current_step"])
        elif kind == "action" and event["language"] != "self":
            self.queries += 1
        elif kind == "final":
            self.finished = True

    def _adopt(self, steps: list[str]) -> None:
        self.plan, self.current = list(steps), None

    def step_states(self) -> list[tuple[str, str]]:
        """Each step of the plan in force with its state: ``done``, ``current`` or ``todo``."""
        def state(i: int) -> str:
            if self.finished or (self.current is not None and i < self.current):
                return "done"
            return "current" if i == self.current else "todo"

        return [(step, state(i)) for i, step in enumerate(self.plan)]
