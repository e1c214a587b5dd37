"""A benchmark as the command line and the Benchmark page state it (``BenchConfig``), and where benchmarks keep
their results; light to import (core.benchmark.runner runs them)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from core.config import settings as core_settings
from core.llm.client import REPLAY_PREFIX, LLMSettings, replay_path
from core.model.bounds import in_bounds
from core.model.run_settings import Limits


def bench_home(home: str | Path | None = None) -> Path:
    """Where benchmarks keep their results, the LLM reply cache and the price table: ``home``/bench (default
    DATA_HOME/bench)."""
    return Path(home or core_settings.DATA_HOME) / "bench"


def check_name(name: str) -> str:
    """``name`` when it names a results set (letters, digits, spaces and ``-_.``, at most 64, not only dots, no
    space at either end: a name kept under bench_home, never a path); ValueError saying why not."""
    if (not 0 < len(name) <= 64 or not all(c.isalnum() or c in " -_." for c in name) or not name.strip(".")
            or name != name.strip()):
        raise ValueError(f"Results name {name[:80]!r} is not a name: use letters, digits, spaces and -_. (at most "
                         "64, not only dots, no space at either end); results are kept under the project home")
    return name


def default_name(llm: str) -> str:
    """A directory name for a model: ``gpt-4o``, ``replay-transcripts``."""
    if llm.startswith(REPLAY_PREFIX):
        return "replay-" + re.sub(r"\.json$", "", replay_path(llm).name)
    return re.sub(r"[^\w.-]+", "-", llm.split(" @ ")[0]).strip("-") or "model"


@dataclass
class BenchConfig:
    """A benchmark as the command line states it. ``llm``: a model name, ``replay:FILE`` (one transcript for every
    item) or ``replay:DIR`` (``{scenario}-{question}-{db}-{technique}.json`` per item). Results go to ``out``
    (default bench_home(home)/``name``, default the model's name), the runs to the run store under ``home``."""

    techniques: list[str]
    llm: str
    scenario: str = "all"
    db: str = "sqlite"
    questions: str = "all"
    concurrency: int = 1
    rpm: float | None = None
    out: Path | None = None
    name: str | None = None
    cache: bool = True
    base_url: str | None = None
    temperature: float = 0.0
    limits: Limits = field(default_factory=Limits)
    dqa_root: str | Path | None = None
    llm_settings: LLMSettings = field(default_factory=LLMSettings.unattended)  # the key and defaults
    home: Path | None = None
    budget_tokens: int | None = None  # what this benchmark's LLM calls may spend (None: no cap)
    budget_cost: float | None = None  # USD, at the price table's rate
    budget_calls: int | None = None  # LLM calls (those in flight counted: never exceeded)
    budget_id: str | None = None  # the budget shared with other workers of this benchmark (None: a new one per run)
    source: str = "dqa"  # the questions: DQA, or the built-in demo scenarios ("demo")
    prompts: str = "improved"  # the loop techniques' prompt setting: improved | paper
    reaper_planner: str = "examples"  # REAPER's planner prompt: examples | zero-shot
    epochs: int = 1  # samples of every item, each a run stored as such (a rerun with more adds the missing ones)
    top_p: float | None = None  # nucleus sampling (None: the server's default)
    seed: int | None = None  # the sampling seed of epoch 1 (epoch e sends seed + e - 1); None: not sent
    vote: int = 0  # also record each technique's decision by majority over epochs 1..vote (0: no vote)
    started_by: str = ""  # who started the benchmark (recorded as who started each of its runs)
    asked: dict | None = None  # who asked for it, by which gate action, when (core.auth.gate.asked_by): for workers

    def __post_init__(self):
        if self.name is not None:
            check_name(self.name)

    def check_numbers(self) -> BenchConfig:
        """Self, or ValueError naming a number out of its bounds (core.model.bounds; NaN and infinity refused)."""
        for name in ("epochs", "vote", "concurrency", "temperature"):
            in_bounds(name, getattr(self, name))
        for name in ("rpm", "top_p", "seed", "budget_tokens", "budget_cost", "budget_calls"):
            if getattr(self, name) is not None:
                in_bounds(name, getattr(self, name))
        self.limits.validate()
        return self

    def settings_params(self) -> dict:
        """The faithfulness settings, for the stored parameters when not the defaults (so the results of earlier
        benchmarks, made with the defaults, stay comparable)."""
        chosen = {"prompts": self.prompts, "reaper_planner": self.reaper_planner, "top_p": self.top_p,
                  "seed": self.seed}
        return {k: v for k, v in chosen.items() if v != BenchConfig.__dataclass_fields__[k].default}
