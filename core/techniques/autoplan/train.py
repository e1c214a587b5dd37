"""AutoPlan's training (section 3.2): starting from the empty plan, for I iterations, collect experience on a
random batch of B training questions with the current plan (PlanRAG or IterRAG given it as their initial plan),
reflect on each run with its outcome as the reward (SIR: summary, flaws, revision; three LLM calls per run, or one),
and update the plan (one LLM call merging the revisions). Each updated plan is saved as the scenario's next version.

As in the paper (section 4.1), every call of the training samples (nucleus sampling, ``top_p`` 0.9; the paper states
no temperature, so the API's default of 1 is used), while a run from a learned plan (evaluation) decodes greedily
(temperature 0, the runs' default); ``greedy_training`` trains at temperature 0 instead.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from core.agents.runtime import AgentRuntime
from core.store.runs import new_run_id
from core.model.bounds import one_of
from core.model.run_settings import Limits, RunSettings
from core.agents.parsing import parse_reply
from core.agents.workspace import Workspace, open_catalog_workspace
from core.model.technique import DEFAULT, TECHNIQUES
from core.techniques.autoplan import prompts
from core.techniques.autoplan.prompts import REFLECTIONS, REWARDS
from core.store.plans import LearnedPlan
from core.llm.client import ChatLLM, LLMSettings, open_llm

#: the techniques that collect experience: the loop techniques that act over several steps (``trains_plans``)
EXPERIENCE_TECHNIQUES = tuple(t.name for t in TECHNIQUES.values() if t.trains_plans)


class AutoPlanError(Exception):
    """A training that cannot go on (the message says why); the versions saved before it stay."""


@dataclass
class TrainSettings:
    """One training: the questions ``train`` of ``source`` on database ``db`` with model ``llm`` (a name or
    ``replay:FILE``), ``batch_size`` questions per iteration, ``iterations`` iterations; sampling by ``temperature``
    and ``top_p``; ``reflection`` ``three-step`` (paper) or ``one-call``; ``reward`` ``success`` (paper) or ``rich``
    (also the best decision, the rank and the regret)."""

    scenario: str
    db: str
    llm: str
    train: list[int]
    batch_size: int = 4
    iterations: int = 3
    technique: str = DEFAULT
    source: str = "dqa"
    seed: int = 0
    base_url: str | None = None
    limits: Limits = field(default_factory=Limits)
    temperature: float = 1.0
    top_p: float | None = 0.9
    reflection: str = "three-step"
    reward: str = "success"
    prompts: str = "improved"  # the experience runs' prompt setting: improved | paper (PlanRAG's prompts)

    def sampling(self) -> dict:
        """The sampling parameters of every training call."""
        return {"temperature": self.temperature, "top_p": self.top_p}

    def validate(self) -> TrainSettings:
        """Self, or ValueError naming the bad field."""
        self.run_settings(1).validate()
        if self.technique not in EXPERIENCE_TECHNIQUES:
            raise ValueError(f"AutoPlan collects experience with {', '.join(EXPERIENCE_TECHNIQUES)}, "
                             f"not {self.technique!r}")
        if not self.train or any(not isinstance(n, int) or n < 1 for n in self.train):
            raise ValueError("the training questions must be question numbers (1, 2, ...), at least one")
        if len(set(self.train)) != len(self.train):
            raise ValueError("a training question is listed twice")
        if not 1 <= self.batch_size <= len(self.train):
            raise ValueError(f"the batch size must be 1 to {len(self.train)} (the training questions), "
                             f"not {self.batch_size}")
        one_of(self.reflection, REFLECTIONS, "reflection")
        one_of(self.reward, REWARDS, "reward")
        if not 0 <= self.temperature <= 2:
            raise ValueError(f"the temperature must be 0 to 2, not {self.temperature}")
        if self.iterations < 1:
            raise ValueError(f"the iterations must be 1 or more, not {self.iterations}")
        return self

    def run_settings(self, question: int, plan: list[str] | None = None) -> RunSettings:
        return RunSettings(self.scenario, question, self.db, self.technique, self.llm, base_url=self.base_url,
                           source=self.source, limits=self.limits,
                           initial_plan=list(plan or []) if self.prompts == "paper" else plan or None,
                           temperature=self.temperature, top_p=self.top_p, prompts=self.prompts)

    def batch(self, iteration: int) -> list[int]:
        """The questions of an iteration: B drawn at random (seeded by the seed and the iteration), in order."""
        return sorted(random.Random(f"{self.seed}:{iteration}").sample(self.train, self.batch_size))


def _ask(llm: ChatLLM, message: str, before: list | None = None, paper: bool = False) -> tuple[str, int]:
    """One reflection or update call (after the exchange ``before``, if any): the reply and its tokens. The paper
    setting sends no system message (equations 6-9 give the model nothing else) and takes the reply as the server
    returned it (no stop sequence is sent: the client's cut at a line starting ``Observation:`` is the improved
    setting's)."""
    system = [] if paper else [SystemMessage(prompts.SYSTEM)]
    c = llm.complete([*system, *(before or []), HumanMessage(message)], None)
    return c.raw if paper and c.raw is not None else c.text, c.prompt_tokens + c.completion_tokens


def _experience(runtime: AgentRuntime, settings: TrainSettings, question: int, plan: list[str]) -> dict:
    """Run the agent on a training question with the plan; its run, outcome and conversation."""
    result = runtime.start(settings.run_settings(question, plan))
    system, *conversation = runtime.transcript(result.run_id)  # the system prompt, the question, each reply and
    # observation; the paper setting's reflection reads the system prompt as the task description (its H)
    return {"question": question, "run_id": result.run_id, "outcome": result.outcome,
            "text": conversation[0]["content"], "run": "\n\n".join(m["content"] for m in conversation),
            "task": system["content"] if settings.prompts == "paper" else None}


def _reflect(llm: ChatLLM, plan: list[str], experience: dict, settings: TrainSettings) -> tuple[dict, int]:
    """The SIR reflection on one run (three calls, or one), kept with the run's outcome."""
    outcome, paper = experience["outcome"], settings.prompts == "paper"
    if settings.reflection == "one-call":
        reply, tokens = _ask(llm, prompts.reflection_message(plan, experience["run"], outcome, settings.reward,
                                                             experience["task"]), paper=paper)
        parts, calls = {**prompts.parse_reflection(reply), "reply": reply}, 1
    else:
        asks = prompts.reflection_steps(plan, experience["run"], outcome, settings.reward, experience["task"])
        summary, used_s = _ask(llm, asks["summary"], paper=paper)
        flaws, used_f = _ask(llm, asks["flaws"], paper=paper)
        revision, used_r = _ask(llm, asks["revision"], [HumanMessage(asks["flaws"]), AIMessage(flaws)], paper=paper)
        parts = {"summary": summary.strip(), "flaws": flaws.strip(), "revision": revision.strip(),
                 "reply": "\n\n".join(f"{n.title()}: {t.strip()}" for n, t in
                                       (("summary", summary), ("flaws", flaws), ("revision", revision)))}
        tokens, calls = used_s + used_f + used_r, 3
    kept = {k: getattr(outcome, k) for k in ("decision", "label", "correct", "placement", "error")}
    return {"question": experience["question"], "run_id": experience["run_id"], **kept, **parts,
            "reflection_calls": calls}, tokens


def _record(iteration: int, parent: int | None, experiences: list[dict], tokens: int,
            reflection_calls: int) -> dict:
    """The accuracy of an iteration's batch (the plan in force: version ``parent``; None: the empty plan): the
    success rate (the paper's reward) and, apart, the mean regret (the richer reward's)."""
    outcomes = [e["outcome"] for e in experiences]
    correct = sum(bool(o.correct) for o in outcomes)
    regrets = [o.placement["regret"] for o in outcomes if o.placement]
    calls = sum(o.llm_calls for o in outcomes) + reflection_calls + 1  # runs, reflections, update
    return {"iteration": iteration, "plan_version": parent, "questions": [e["question"] for e in experiences],
            "runs": [e["run_id"] for e in experiences], "correct": correct, "total": len(outcomes),
            "accuracy": round(correct / len(outcomes), 4),
            "mean_regret": round(sum(regrets) / len(regrets), 6) if regrets else None,
            "llm_calls": calls, "tokens": tokens + sum(o.tokens.total for o in outcomes)}


def train(settings: TrainSettings, home: str | Path | None = None, *,
          workspace: Callable[[RunSettings], Workspace] = open_catalog_workspace,
          llm_settings: LLMSettings | None = None,
          progress: Callable[[str], None] | None = None) -> list[LearnedPlan]:
    """Train the scenario's plan; return the versions saved, one per iteration. The runs go to the run store and
    the plans to the plan store of ``home`` (default DATA_HOME). One model serves every call (a replay is read
    through in order; in the paper setting, no request to its server but the model's: no tokenizer's). Raises
    ValueError (bad settings), LLMError or AutoPlanError."""
    settings.validate()
    say = progress or (lambda line: None)
    llm_settings = llm_settings or LLMSettings()
    llm = open_llm(settings.llm, dataclasses.replace(llm_settings, base_url=settings.base_url or llm_settings.base_url,
                                                     server_tokenizer=settings.prompts != "paper",
                                                     **settings.sampling()))
    runtime = AgentRuntime(home, workspace=workspace, llm_settings=llm_settings, llm_opener=lambda *a, **kw: llm)
    training, plan, parent, history, saved = new_run_id(), [], None, [], []
    try:
        for i in range(1, settings.iterations + 1):
            experiences, reflections, tokens = [], [], 0
            for question in settings.batch(i):
                experience = _experience(runtime, settings, question, plan)
                reflection, used = _reflect(llm, plan, experience, settings)
                experiences.append(experience)
                reflections.append(reflection)
                tokens += used
                verdict = {True: "correct", False: "wrong", None: "unlabelled"}[reflection["correct"]]
                say(f"iteration {i}: question {question}: {verdict} (decision {reflection['decision']})")
            merged = [{**e, **r} for e, r in zip(experiences, reflections, strict=True)]
            reply, used = _ask(llm, prompts.update_message(plan, merged, settings.reward, experiences[-1]["task"]),
                               paper=settings.prompts == "paper")
            history.append(_record(i, parent, experiences, tokens + used,
                                   sum(r["reflection_calls"] for r in reflections)))
            steps = parse_reply(reply).plan
            if not steps:
                raise AutoPlanError(f"the plan update of iteration {i} wrote no 'Plan: [Step 1: ...]'; "
                                    f"its reply began: {reply[:300]!r}")
            learned = runtime.plans.save(LearnedPlan(
                settings.scenario, steps, settings.source, sorted(settings.train), i, parent, training,
                {"technique": settings.technique, "db": settings.db, "llm": settings.llm or llm.label,
                 "batch_size": settings.batch_size, "iterations": settings.iterations, "seed": settings.seed,
                 **settings.sampling(), "reflection": settings.reflection, "reward": settings.reward,
                 "prompts": settings.prompts},
                reflections, reply, list(history)))
            saved.append(learned)
            plan, parent = learned.steps, learned.version
            record = history[-1]
            say(f"iteration {i}: accuracy {record['correct']}/{record['total']}; saved {settings.scenario} plan "
                f"v{learned.version}")
    finally:
        runtime.close()
    return saved
