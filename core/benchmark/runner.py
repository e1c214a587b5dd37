"""Running a benchmark: the work list's pending items, N at once (threads: the LLM calls are I/O), each with its
own database connection, under a requests-per-minute limit, each result stored the moment its item finishes.
A rerun skips the finished items; a killed run loses only the items in flight.

    bench = Bench(BenchConfig(scenario="all", db="sqlite", techniques=["planrag"], llm="gpt-4o"))
    progress = bench.run(on_result=print_line)    # bench.notes, bench.directory, bench.results()

Items that could not run for reasons outside the agent (the server unreachable, a rate limit past its retries)
are not stored, so a rerun tries them again; a bad key or model name stops the benchmark.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from pathlib import Path

from core import catalog
from core import settings as core_settings
from core.agents import AgentRuntime, Limits, RunSettings, new_run_id
from core.agents.techniques import technique
from core.agents.workspace import open_catalog_workspace
from core.backends.registry import language
from core.benchmark.cache import CachingLLM, ReplyCache, caching_opener
from core.benchmark.failures import classify
from core.benchmark.items import BenchError, Item, WorkList, databases_of, parse_numbers, scenarios_of, work_list
from core.benchmark.results import ResultStore, read_results
from core.benchmark.trace import read_trace
from core.llm import REPLAY_PREFIX, TRANSIENT, LLMSettings, open_llm, read_replay, replay_path
from core.scenario import ranking

#: Fatal error kinds that are not the agent's doing: the item is not stored, and a rerun tries it again.
RETRY = TRANSIENT | {"auth", "config", "model", "unavailable"}
#: Of those, the ones no other item will escape: they stop the benchmark.
FATAL = frozenset({"auth", "config", "model"})


def bench_home(home: str | Path | None = None) -> Path:
    """Where benchmarks keep their results, the LLM reply cache and the price table: ``home``/bench (default
    DATA_HOME/bench)."""
    return Path(home or core_settings.DATA_HOME) / "bench"


def default_name(llm: str) -> str:
    """A directory name for a model: ``gpt-4o``, ``replay-transcripts``."""
    if llm.startswith(REPLAY_PREFIX):
        return "replay-" + re.sub(r"\.json$", "", replay_path(llm).name)
    return re.sub(r"[^\w.-]+", "-", llm.split(" @ ")[0]).strip("-") or "model"


@dataclass
class BenchConfig:
    """A benchmark as the command line states it. ``llm``: a model name, ``replay:FILE`` (one transcript for
    every item) or ``replay:DIR`` (``{scenario}-{question}-{db}-{technique}.json`` per item, else
    ``{scenario}-{question}-{technique}.json``). Results go to ``out``, default bench_home(home)/``name``, default
    the model's name; the runs themselves (traces, for the Run and History pages) to the run store under
    ``home`` (default DATA_HOME), beside the learned plans AutoPlan starts from."""

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
    llm_settings: LLMSettings = field(default_factory=LLMSettings)  # the key and defaults
    home: Path | None = None


@dataclass
class Progress:
    """Where a run stands: ``total`` items in the work list, ``skipped`` finished before, ``done`` finished now,
    ``correct`` among all finished; ``errors`` items that could not run (a rerun tries them again)."""

    total: int
    skipped: int
    correct: int
    done: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    stopped: str | None = None  # why the run stopped early
    running: set[str] = field(default_factory=set)

    @property
    def finished(self) -> int:
        return self.skipped + self.done

    @property
    def accuracy(self) -> float | None:
        return 100.0 * self.correct / self.finished if self.finished else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left, from this run's pace (None before its first item)."""
        left = self.total - self.finished - len(self.errors)
        if not self.done:
            return None
        return 0.0 if left <= 0 else (time.time() - self.started) / self.done * left


class RateLimiter:
    """At most ``rpm`` calls a minute, evenly spaced, across threads."""

    def __init__(self, rpm: float):
        if rpm <= 0:
            raise BenchError("--rpm must be a positive number of requests per minute")
        self._interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next)
            self._next = at + self._interval
        if at > now:
            time.sleep(at - now)


@lru_cache(maxsize=1024)
def _ranking(root: str | None, scenario: str, number: int):
    question = catalog.question("dqa", scenario, number, root)
    return ranking(question, catalog.database(question, root))


class Bench:
    """A benchmark ready to run: its work list (``work``), its notes, its directory and result store."""

    def __init__(self, config: BenchConfig):
        for name in config.techniques:
            technique(name)  # ValueError naming the choices
        if config.concurrency < 1:
            raise BenchError("--concurrency must be at least 1")
        self._throttle = RateLimiter(config.rpm) if config.rpm is not None else None
        self.config = config
        self.root = str(config.dqa_root) if config.dqa_root else None
        self.spec, self.model = self._model()
        notes: list[str] = []
        dbs = databases_of(config.db, notes)
        scenarios = scenarios_of(config.scenario)
        counts = {s: len(catalog.questions("dqa", s, self.root)) for s in scenarios}
        self.work: WorkList = work_list(scenarios, dbs, config.techniques, self.model, parse_numbers(config.questions),
                                        counts, notes)
        if not self.work.items:
            raise BenchError("no questions selected")
        self._replays = self._check_llm()
        self.directory = (Path(config.out) if config.out else
                          bench_home(config.home) / (config.name or default_name(self.model)))
        self.store = ResultStore(self.directory)
        self.store.check_params({"temperature": config.temperature, "limits": asdict(config.limits)})
        done = self.store.done()
        self.pending = [i for i in self.work.items if i.key not in done]
        self.progress: Progress | None = None  # set when run() starts
        self._local = threading.local()

    @property
    def notes(self) -> list[str]:
        return self.work.notes

    def _model(self) -> tuple[str, str]:
        """The model as runs name it (a replay as an absolute path), and as results key it (with the server)."""
        llm = self.config.llm or self.config.llm_settings.model or ""
        if llm.startswith(REPLAY_PREFIX):
            spec = f"{REPLAY_PREFIX}{replay_path(llm)}"
            return spec, spec
        base_url = self.config.base_url or self.config.llm_settings.base_url
        return llm, f"{llm} @ {base_url}" if llm and base_url else llm

    def _check_llm(self) -> dict[str, str] | None:
        """Fail early on an unusable model; for ``replay:DIR``, each item's transcript (None otherwise)."""
        if not (self.spec.startswith(REPLAY_PREFIX) and replay_path(self.spec).is_dir()):
            open_llm(self.spec or None, self._llm_settings())  # LLMError saying what is missing
            return None
        folder, replays, missing = replay_path(self.spec), {}, []
        for item in self.work.items:
            found = [p for p in (folder / f"{item.name}.json",
                                 folder / f"{item.scenario}-{item.question}-{item.technique}.json") if p.is_file()]
            if found:
                replays[item.key] = f"{REPLAY_PREFIX}{found[0]}"
            else:
                missing.append(item)
        if missing:
            raise BenchError(f"{folder} has no transcript for {len(missing)} of {len(self.work.items)} items, e.g. "
                             f"{missing[0].name}.json (or {missing[0].scenario}-{missing[0].question}-"
                             f"{missing[0].technique}.json)")
        for spec in set(replays.values()):
            read_replay(replay_path(spec))  # LLMError for a file that is not a transcript
        return replays

    def _llm_settings(self) -> LLMSettings:
        c = self.config
        return LLMSettings(**{**asdict(c.llm_settings), "base_url": c.base_url or c.llm_settings.base_url,
                              "temperature": c.temperature})

    def results(self) -> list[dict]:
        """The stored results of this benchmark's work list."""
        return read_results(self.directory, {i.key for i in self.work.items})

    def run(self, on_result: Callable[[Item, dict | None, str | None, Progress], None] | None = None,
            stop: threading.Event | None = None) -> Progress:
        """Run the pending items; ``on_result`` gets each item with its result, or None and why it could not run,
        and the progress, from the worker's thread; ``stop`` ends the run once the items in flight finish. The
        progress is also ``self.progress`` while the run goes on."""
        stop = stop or threading.Event()
        stored = self.results()
        progress = self.progress = Progress(len(self.work.items), len(stored),
                                            sum(bool(r.get("correct")) for r in stored))
        lock = threading.Lock()
        cache = ReplyCache(bench_home(self.config.home) / "llm-cache.sqlite") if self.config.cache else None
        runtime = AgentRuntime(self.config.home, workspace=partial(open_catalog_workspace, root=self.root),
                               llm_settings=self._llm_settings(),
                               llm_opener=caching_opener(cache, self._throttle, on_open=self._opened))

        def work(item: Item) -> None:
            if stop.is_set():
                return
            with lock:
                progress.running.add(item.name)
            result = error = None
            try:
                result = self._run_item(item, runtime)
            except Exception as e:  # noqa: BLE001 - any failure to run is reported, and the item retried later
                error, kind = str(e), getattr(e, "kind", None)
                with lock:
                    progress.errors.append(f"{item.name}: {e}")
                    if kind in FATAL:
                        progress.stopped = f"{item.name}: {e}"
                        stop.set()
            else:
                self.store.put(result)
                with lock:
                    progress.done += 1
                    progress.correct += bool(result["correct"])
            finally:
                with lock:
                    progress.running.discard(item.name)
            if on_result:
                on_result(item, result, error, progress)

        try:
            with ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="bench") as pool:
                futures = [pool.submit(work, item) for item in self.pending]
                try:
                    for future in as_completed(futures):
                        future.result()
                except BaseException:  # Ctrl-C: finish the items in flight, start no more
                    stop.set()
                    raise
        finally:
            if stop.is_set() and not progress.stopped:
                progress.stopped = "stopped"
            runtime.close()
            if cache is not None:
                cache.close()
        return progress

    def _opened(self, llm: CachingLLM) -> None:
        self._local.llm = llm  # the worker thread's current item

    def _spec(self, item: Item) -> str:
        return self._replays[item.key] if self._replays else self.spec

    def _run_item(self, item: Item, runtime: AgentRuntime) -> dict:
        """Run one item and return its result; raises for a run that failed for reasons outside the agent."""
        c = self.config
        settings = RunSettings(item.scenario, item.question, item.db, item.technique, self._spec(item),
                               base_url=c.base_url, temperature=c.temperature, limits=c.limits)
        run_id = new_run_id()
        self._local.llm = None
        start = time.perf_counter()
        events = [e.to_dict() for e in runtime.iter_start(settings, run_id)]
        wall = time.perf_counter() - start
        llm: CachingLLM = self._local.llm
        record = runtime.store.get(run_id, events=False)  # the events are in hand
        outcome = record.outcome or {}
        facts = read_trace(events, item.scenario, outcome.get("decision"))
        if record.status == "failed" and facts.error_kind in RETRY:
            raise _NotRun(facts.error_kind, outcome.get("error") or "the run failed")
        category, signs = classify(outcome.get("correct"), facts, record.status, outcome.get("final_answer"),
                                   outcome.get("decision"))
        placement = outcome.get("placement") or {}
        relative = None
        if placement:
            relative = _ranking(self.root, item.scenario, item.question).relative_regret(outcome["decision"])
        tokens = outcome.get("tokens") or {}
        return {"scenario": item.scenario, "question": item.question, "db": item.db, "language": language(item.db),
                "technique": item.technique, "model": item.model, "run_id": run_id, "status": record.status,
                "decision": outcome.get("decision"), "label": outcome.get("label"), "correct": outcome.get("correct"),
                "final_answer": outcome.get("final_answer"), "error": outcome.get("error"),
                "llm_calls": outcome.get("llm_calls", 0), "cached_calls": llm.hits,
                "prompt_tokens": tokens.get("prompt", 0), "completion_tokens": tokens.get("completion", 0),
                "tokens_estimated": tokens.get("estimated", False),
                "llm_latency_s": sum(e["llm"]["latency_s"] for e in events if e.get("llm")),
                "wall_s": wall, "overhead_s": wall - llm.wait_s,
                "ready_s": llm.first_call_at - start if llm.first_call_at else None,
                **facts.to_dict(), "failure": category, "failure_signs": signs,
                "rank": placement.get("rank"), "candidates": placement.get("of"), "regret": placement.get("regret"),
                "relative_regret": relative, "finished": time.time()}


class _NotRun(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
