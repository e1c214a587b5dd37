"""What a job of the team's queue carries (core.jobs.queue), checked by the app before it queues it and by the
worker before it touches anything (core.jobs.tasks): ids and a versioned payload of typed, bounded fields (numbers
within core.model.bounds, text without NUL), never a path, a URL, a key or a field it does not know. The worker
resolves the model by its endpoint's name from its own configuration and derives every path from its own home.

    drive_run:  {v, action, run_id, llm: Model | None, branch: Branch | None, asked: Asked, code}
    bench_item: {v, config: BenchSpec (with its asked: Asked), key, code}

Every job says who asked for it, by which action of the gate and when (``Asked``): the worker asks the gate again
before it acts (core.auth.gate.authorize_job), so a job that names no one does nothing.

A payload that does not fit raises PayloadError (a ValueError), one line saying which field and why."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.config import settings as config
from core.llm.client import REPLAY_PREFIX, replay_path
from core.model.bounds import NUMBERS, no_nul
from core.model.run_settings import DATABASES, PROMPT_SETTINGS, REAPER_PLANNERS, Limits
from core.model.technique import TECHNIQUES, parse_voted

VERSION = 1
MAX_TEXT = 100_000  # characters of one text field (a note, a query, a plan step)
MAX_STEPS = 200  # steps of an edited plan


class PayloadError(ValueError):
    """A job whose payload does not fit its schema: it fails with this reason and touches nothing."""


def _number(name: str, kind: type):
    low, high = NUMBERS[name]
    return Annotated[kind, Field(ge=low, le=high)]


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(no_nul)]
#: a name: of a run, an endpoint, a results folder, a budget; never a path (no slash, no leading dot)
Name = Annotated[str, Field(pattern=r"^\w[\w .+@-]{0,127}$")]
RunId = Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]
Code = Annotated[str, Field(pattern=r"^[0-9A-Za-z]{1,64}$")]  # core.jobs.code.code_version: never empty
ModelName = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(no_nul)]


def _no_url(text: str | None) -> str | None:
    if text is not None and re.search(r"://|^//", text):
        raise ValueError("a job names its model, never a URL: the worker uses its own server")
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class Model(_Strict):
    """What a job says of the model: the name of one of the worker's endpoints (core.auth.endpoints) or a model
    name for the worker's own server, sampling and the call's limits. No URL, no key."""

    endpoint: Name | None = None
    model: Annotated[ModelName, AfterValidator(_no_url)] | None = None
    temperature: _number("temperature", float) = 0.0
    top_p: _number("top_p", float) | None = None
    seed: _number("seed", int) | None = None
    timeout_s: _number("timeout_s", float) = config.INTERACTIVE_TIMEOUT_S
    max_retries: _number("max_retries", int) = config.INTERACTIVE_RETRIES
    max_reply_tokens: _number("max_reply_tokens", int) | None = None

    @field_validator("model")
    @classmethod
    def _local_replay(cls, value):
        return None if value is None else replay_here(value)


Label = Annotated[str, Field(max_length=1000), AfterValidator(no_nul)]
RUN_ACTIONS = ("start", "samples", "review", "query_decision", "inbox_approve", "inbox_reject", "resume", "branch")
BENCH_ACTIONS = ("benchmark_start", "benchmark_rerun")


class Who(_Strict):
    """An identity as a job carries it (core.auth.roles.as_record): granting nothing by itself, the worker finds
    its role again under its own configuration."""

    name: Annotated[Label, Field(min_length=1)]
    role: Label
    email: Label | None = None
    groups: Annotated[list[Label], Field(max_length=500)] = []
    signed_in: bool = False
    session: Label = ""
    valid_until: float | None = None
    subject: Label = ""
    issuer: Label = ""
    claimed: Annotated[list[Label], Field(max_length=10)] = []


class Asked(_Strict):
    """Who asked for a job (``who``), by which action of the gate (``action``), and when (``at``, epoch seconds)."""

    who: Who
    action: Literal[(*RUN_ACTIONS, *BENCH_ACTIONS)]
    at: float


class Changes(_Strict):
    """A branch's change (core.agents.runtime.AgentRuntime.iter_branch): a plan, a query, a note, who made it."""

    plan: Annotated[list[Text], Field(max_length=MAX_STEPS)] | None = None
    query: Text | None = None
    note: Text = ""
    reviewer: Annotated[Text, Field(max_length=200)] = ""


class Branch(_Strict):
    parent: RunId
    step: _number("step", int)
    changes: Changes


class RunPayload(_Strict):
    """A ``drive_run`` job: drive run ``run_id`` (``start``, ``continue`` or ``branch``) by code ``code``."""

    v: Literal[1]
    action: Literal["start", "continue", "branch"]
    run_id: RunId
    llm: Model | None = None
    branch: Branch | None = None
    asked: Asked
    code: Code

    @model_validator(mode="after")
    def _branch_iff_branching(self):
        if (self.action == "branch") != (self.branch is not None):
            raise ValueError("a branch job, and only a branch job, carries its branch")
        if self.asked.action not in RUN_ACTIONS:
            raise ValueError(f"a run's job is asked by one of {', '.join(RUN_ACTIONS)}")
        return self


def _limits(value: dict) -> dict:
    if not isinstance(value, dict):
        raise ValueError("the limits are a table of numbers")
    unknown = set(value) - set(Limits.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown limits: {', '.join(sorted(map(str, unknown)))[:200]}")
    Limits(**value).validate()
    return value


def _technique(name: str) -> str:
    voted = parse_voted(name)
    if (voted[0] if voted else name) not in TECHNIQUES:
        raise ValueError(f"unknown technique {name[:60]!r}")
    return name


class BenchSpec(_Strict):
    """A benchmark as a ``bench_item`` job states it (core.benchmark.config.BenchConfig without its folders, its
    server's URL or its key): its results live in the worker's home under ``name``."""

    techniques: Annotated[list[Annotated[str, Field(max_length=60), AfterValidator(_technique)]],
                          Field(min_length=1, max_length=50)]
    llm: Annotated[str, Field(max_length=300), AfterValidator(no_nul), AfterValidator(_no_url)]
    scenario: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.,-]{1,500}$")]
    db: Literal[(*DATABASES, "all")]
    questions: Annotated[str, Field(pattern=r"^(all|[0-9, -]{1,2000})$")]
    rpm: _number("rpm", float) | None = None
    name: Name
    cache: bool = True
    temperature: _number("temperature", float) = 0.0
    limits: Annotated[dict, AfterValidator(_limits)]
    budget_tokens: _number("budget_tokens", int) | None = None
    budget_cost: _number("budget_cost", float) | None = None
    budget_calls: _number("budget_calls", int) | None = None
    budget_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    source: Literal["dqa", "demo", "scenario"] = "dqa"
    #: the DQA-format question set of a ``dqa`` source: a generated set's name (its manifest's), None for DQA's own;
    #: a worker runs the item only when its DQA folder holds that set (core.jobs.routing)
    question_set: Annotated[str, Field(min_length=1, max_length=300), AfterValidator(no_nul)] | None = None
    prompts: Literal[PROMPT_SETTINGS] = "improved"
    reaper_planner: Literal[REAPER_PLANNERS] = "examples"
    epochs: _number("epochs", int) = 1
    top_p: _number("top_p", float) | None = None
    seed: _number("seed", int) | None = None
    vote: _number("vote", int) = 0
    llm_settings: Model
    # who started the benchmark, as the app named them: a label recorded on its runs, granting nothing on a worker
    started_by: Annotated[str, Field(max_length=400), AfterValidator(no_nul)] = ""
    asked: Asked  # who asked for it: the worker asks the gate again with it

    @field_validator("asked")
    @classmethod
    def _benchmark_action(cls, value):
        if value.action not in BENCH_ACTIONS:
            raise ValueError(f"a benchmark's job is asked by one of {', '.join(BENCH_ACTIONS)}")
        return value

    @field_validator("llm")
    @classmethod
    def _local_replay(cls, value):
        return replay_here(value) if value else value


class BenchPayload(_Strict):
    """A ``bench_item`` job: run item ``key`` of the benchmark ``config``, by code ``code``."""

    v: Literal[1]
    config: BenchSpec
    key: Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(no_nul)]
    code: Code


def replay_here(spec: str) -> str:
    """``spec`` unless it is a replay (``replay:FILE``) outside this process's project (its shipped transcripts,
    its tests) and home: a job reads no other file of the worker."""
    if not spec.startswith(REPLAY_PREFIX):
        return spec
    path = Path(replay_path(spec)).resolve()
    roots = [config.PROJECT_ROOT, Path(config.DATA_HOME).resolve()]
    if not any(path.is_relative_to(root.resolve()) for root in roots):
        raise ValueError("a job's replay is a file of the worker's project or home, not " + str(path)[:200])
    return spec


def _one_line(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the job"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{where}: {first['msg']}"[:300] + more


def _parse(schema: type[_Strict], what: str, values: dict):
    try:
        return schema.model_validate(values)
    except ValidationError as e:
        raise PayloadError(f"refused {what} job: {_one_line(e)}") from None


def run_payload(values: dict) -> RunPayload:
    """A ``drive_run`` job's payload checked; PayloadError saying what does not fit."""
    return _parse(RunPayload, "drive_run", values)


def bench_payload(values: dict) -> BenchPayload:
    """A ``bench_item`` job's payload checked; PayloadError saying what does not fit."""
    return _parse(BenchPayload, "bench_item", values)


def model_of(llm) -> dict:
    """What a job carries of an LLMSettings (core.config.settings): its endpoint or model, sampling and limits."""
    fields = Model.model_fields
    return {k: getattr(llm, k) for k in fields if getattr(llm, k) is not None or k in ("endpoint", "model")}
