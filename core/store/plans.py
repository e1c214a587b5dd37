"""Learned plans: AutoPlan's task-level plans of a scenario, versioned as JSON files
(``DATA_HOME/plans/<scenario>/v<N>.json``; in the team store, rows of ``learned_plans``), each with the reflections that produced it, its training questions
and the accuracy of every training iteration up to it; and a run's start from one, never on a training question.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.model.run_settings import RunSettings
from core.model.technique import Technique, technique
from core.model.numbers import spans
from core.config import settings as core_settings
from core.store.database import Database, is_url, location, upsert


#: What a scenario's name may be (a folder name under the store's root: no path).
SCENARIO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class TrainingQuestionError(ValueError):
    """A learned plan was asked to run on one of the questions it was trained on."""


@dataclass
class LearnedPlan:
    """One version of a scenario's plan: its steps, the questions it was trained on (``source`` and numbers,
    never evaluated on), the iteration and the version it revised (``parent``; None: the empty plan), the
    training session, the reflections on the runs of the batch and the update reply that wrote it, and
    ``history``: the accuracy of each iteration of its training up to it."""

    scenario: str
    steps: list[str]
    source: str
    train: list[int]
    iteration: int
    parent: int | None
    training: str
    trained_with: dict  # technique, db, llm, batch_size, iterations, seed, temperature, top_p, reflection, reward
    reflections: list[dict]
    update_reply: str
    history: list[dict]
    version: int = 0  # set when saved
    created: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LearnedPlan:
        return cls(**data)


def diff_steps(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """The steps of ``new`` against ``old``, in order, each marked ``same``, ``removed`` or ``added``."""
    marks = {" ": "same", "-": "removed", "+": "added"}
    return [(marks[line[0]], line[2:]) for line in difflib.ndiff(old, new) if line[0] in marks]


class PlanStore:
    """The learned plans under ``root`` (default DATA_HOME/plans), one folder per scenario."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else core_settings.DATA_HOME / "plans"
        target = location(self.root)
        self.db = Database(target, "learned plan store") if is_url(target) else None  # the team store
    def _folder(self, scenario: str) -> Path:
        """The scenario's folder; ValueError for a name that is no scenario's (a path, an empty name). Callers
        check that the scenario exists (core.scenarios.get)."""
        if not SCENARIO_NAME.fullmatch(scenario or ""):
            raise ValueError(f"unknown scenario {scenario!r}: a scenario's name is letters, digits, '-' and '_'")
        return self.root / scenario

    def versions(self, scenario: str) -> list[int]:
        """The saved versions of the scenario's plan, oldest first."""
        folder = self._folder(scenario)
        if self.db:
            return [v for (v,) in self.db.rows("SELECT version FROM learned_plans WHERE scenario = ? ORDER BY version",
                                                (scenario,))]
        names = (p.stem[1:] for p in folder.glob("v*.json")) if folder.is_dir() else ()
        return sorted(int(n) for n in names if n.isdigit())

    def load(self, scenario: str, version: int | None = None) -> LearnedPlan:
        """A version of the scenario's plan (default the latest); ValueError when there is none."""
        versions = self.versions(scenario)
        if not versions:
            raise ValueError(f"no learned plan for {scenario} yet: train one with "
                             f"python -m core autoplan train --scenario {scenario} ...")
        version = versions[-1] if version is None else version
        if version not in versions:
            raise ValueError(f"no learned plan v{version} for {scenario}; there are v{spans(versions)}")
        return self._read(scenario, version)

    def _read(self, scenario: str, version: int) -> LearnedPlan:
        """A saved version's file; ValueError when it cannot be read."""
        path = self._folder(scenario) / f"v{version}.json"
        try:
            if self.db:
                path = f"{scenario} v{version} in the team store"
                return LearnedPlan.from_dict(json.loads(self.db.rows(
                    "SELECT data FROM learned_plans WHERE scenario = ? AND version = ?", (scenario, version))[0][0]))
            return LearnedPlan.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, TypeError) as e:
            raise ValueError(f"learned plan file {path} cannot be read ({e})") from None

    def all(self, scenario: str) -> list[LearnedPlan]:
        """Every version of the scenario's plan, oldest first."""
        return [self._read(scenario, v) for v in self.versions(scenario)]

    def save(self, plan: LearnedPlan) -> LearnedPlan:
        """Save ``plan`` as the scenario's next version (never overwriting one) and return it with its number."""
        folder = self._folder(plan.scenario)
        if self.db:
            return self._insert(plan)
        folder.mkdir(parents=True, exist_ok=True)
        draft = folder / f".draft-{uuid.uuid4().hex}.json"
        try:
            while True:
                plan = dataclasses.replace(plan, version=max(self.versions(plan.scenario), default=0) + 1)
                draft.write_text(json.dumps(plan.to_dict(), indent=1, default=str), encoding="utf-8")
                try:
                    os.link(draft, folder / f"v{plan.version}.json")  # fails if another process took the number
                    return plan
                except FileExistsError:
                    continue
        finally:
            draft.unlink(missing_ok=True)

    def _insert(self, plan: LearnedPlan) -> LearnedPlan:
        """``save`` in the team store: the next number, taken by the insert that gets it first."""
        while True:
            plan = dataclasses.replace(plan, version=max(self.versions(plan.scenario), default=0) + 1)
            with self.db.transaction() as con:
                taken = con.execute(upsert("learned_plans", ("scenario", "version", "created", "data"),
                                           ("scenario", "version"), replace=False),
                                    (plan.scenario, plan.version, plan.created,
                                     json.dumps(plan.to_dict(), default=str))).rowcount
            if taken:
                return plan

    def resolve(self, settings: RunSettings, tech: Technique | None = None) -> RunSettings:
        """The settings with the learned plan they ask for as their initial plan (``plan_version``, or the latest
        for a technique that starts from a ``learned_plan``; ``tech``: the settings' technique, resolved by the
        caller, else here). Raises ValueError when there is none or an initial plan given differs from it,
        TrainingQuestionError when the question is one the plan was trained on."""
        if settings.plan_version is None and not (tech or technique(settings.technique)).learned_plan:
            return settings
        plan = self.load(settings.scenario, settings.plan_version)
        if settings.source == plan.source and settings.question in plan.train:
            raise TrainingQuestionError(
                f"{settings.source} {settings.scenario} question {settings.question} is a training question of "
                f"learned plan v{plan.version} (trained on questions {spans(plan.train)}); evaluate it on others")
        if settings.initial_plan and settings.initial_plan != plan.steps:
            raise ValueError(f"give an initial plan or a learned plan, not both (the initial plan given is not the "
                             f"steps of learned plan v{plan.version})")
        return dataclasses.replace(settings, initial_plan=list(plan.steps), plan_version=plan.version)


def training_setting(trained_with: dict) -> str:
    """How a plan was trained, against the paper: sampling, reflection and reward (plans from before these
    settings existed trained greedily, with a one-call reflection and the rich reward)."""
    t, p = trained_with.get("temperature", 0.0), trained_with.get("top_p")
    sampling = f"temperature {t:g}" + (f", top-p {p:g}" if p is not None else "")
    paper = t > 0 and p == 0.9
    reflection = trained_with.get("reflection", "one-call")
    reward = trained_with.get("reward", "rich")
    return (f"sampling {sampling} ({'as' if paper else 'not as'} the paper); reflection {reflection}"
            f"{' (paper)' if reflection == 'three-step' else ''}; reward {reward}"
            f"{' (paper: success/failure)' if reward == 'success' else ' (label, rank, regret: not the paper)'}")
