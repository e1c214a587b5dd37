"""Running a benchmark: the work list's pending items, N at once (threads: the LLM calls are I/O), each with its
own database connection, under a requests-per-minute limit, each result stored the moment its item finishes.
A rerun skips the finished items; a killed run loses only the items in flight.

    bench = Bench(BenchConfig(scenario="all", db="sqlite", techniques=["planrag"], llm="gpt-4o"))
    progress = bench.run(on_result=print_line)    # bench.notes, bench.directory, bench.results()

Items that could not run for reasons outside the agent (the server unreachable, a rate limit past its retries)
are not stored, so a rerun tries them again; a bad key or model name stops the benchmark, and so does its budget
(``budget_tokens``, ``budget_cost``, ``budget_calls``: each LLM call reserved in the result store before it is made,
core.benchmark.budget; the item cut short is not stored). The budget is shared by every worker given its id
(``budget_id``; ``Bench.open_budget``).
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path

from core.scenarios import catalog
from core.scenarios.dqa.source import dqa_benchmark
from core import scenarios
from core.config import home as project_home
from core.agents.runtime import AgentRuntime
from core.store.runs import new_run_id
from core.model.outcome import RunOutcome
from core.model.run_settings import Limits, RunSettings
from core.model.technique import technique, voted_name
from core.agents.workspace import open_catalog_workspace
from core.auth.gate import Refused, authorize_job
from core.auth.roles import from_record
from core.backends.registry import language
from core.benchmark.budget import Budget, check_caps
from core.benchmark.config import BenchConfig, bench_home, default_name
from core.benchmark.cache import CachingLLM, ReplyCache, caching_opener
from core.benchmark import fidelity
from core.benchmark.failures import classify
from core.benchmark.lock import DirectoryLock
from core.benchmark.items import BenchError, Item, WorkList, databases_of, parse_numbers, scenarios_of, work_list
from core.llm.prices import load_prices, price_of
from core.benchmark.results import ResultStore, read_not_run, read_results
from core.store import database
from core.benchmark.trace import read_trace
from core.benchmark.vote import vote
from core.scenarios.dqa.source import DQA_SET
from core.analysis.evidence import run_coverage
from core.analysis.format import clock
from core.analysis.grading import stored_verdict
from core.analysis.trace import Trace
from core.llm.client import REPLAY_PREFIX, TRANSIENT, LLMSettings, open_llm, read_replay, replay_path
from core.scenarios import ranking
from sims.ranking import InputError
from core.config.secrets import scrub
from core.telemetry import grouped

#: Fatal error kinds that are not the agent's doing: the item is not stored, and a rerun tries it again.
RETRY = TRANSIENT | {"auth", "config", "model", "unavailable", "budget"}
#: Of those, the ones no other item will escape: they stop the benchmark.
FATAL = frozenset({"auth", "config", "model", "budget"})
#: Limits added after benchmarks first stored their parameters: left out of them while at their defaults, so
#: the results stored before still match.
_LATER_LIMITS = ("max_cost_usd", "max_repeats", "context_tokens", "reply_tokens", "context_source")


@dataclass
class Progress:
    """Where a run stands: ``total`` items in the work list, ``skipped`` finished before, ``done`` finished now,
    ``correct`` among all finished; ``errors`` items that could not run (a rerun tries them again)."""

    total: int
    skipped: int
    correct: int
    done: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the run changed on its own (lower concurrency)
    started: float = field(default_factory=time.time)
    stopped: str | None = None  # why the run stopped early
    running: set[str] = field(default_factory=set)
    budget: Budget | None = None  # what the run's budget spent (by every worker sharing it), live

    @property
    def tokens(self) -> int:
        return self.budget.tokens if self.budget else 0

    @property
    def cost_usd(self) -> float | None:
        return self.budget.cost_usd if self.budget else None

    @property
    def finished(self) -> int:
        return self.skipped + self.done

    @property
    def n(self) -> int:
        """The items with a verdict so far: the finished ones and those that could not run (not correct)."""
        return self.finished + len(self.errors)

    def finish(self, result: dict) -> None:
        """Count an item's stored result."""
        self.done += 1
        self.correct += bool(result.get("correct"))

    def fail(self, name: str, error: str, kind: str | None) -> bool:
        """Count item ``name`` that could not run (``kind`` of its error); whether that stops the benchmark (a
        FATAL kind: ``stopped`` then says why)."""
        self.errors.append(f"{name}: {error}")
        if kind not in FATAL:
            return False
        self.stopped = self.stopped or (error if kind == "budget" else f"{name}: {error}")
        return True

    @property
    def accuracy(self) -> float | None:
        """Correct % of ``n`` (items that could not run count as not correct)."""
        return 100.0 * self.correct / self.n if self.n else None

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


class CallGate:
    """At most ``limit`` LLM calls at once across a benchmark's items. A one-at-a-time server (llama.cpp) goes on
    computing a request the client gave up on, so calls made side by side time out together: when a call times
    out while others are in flight, the limit halves (down to 1) and ``on_note`` says so. Used as a context
    manager around each model call (its retries included)."""

    def __init__(self, limit: int, on_note: Callable[[str], None] | None = None):
        self.limit = limit
        self.in_flight = 0
        self._cond = threading.Condition()
        self._on_note = on_note

    def __enter__(self):
        with self._cond:
            self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
        return self

    def __exit__(self, kind, error, tb):
        if getattr(error, "kind", None) == "timeout":
            self.timed_out()
        with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def timed_out(self) -> None:
        """A call timed out: lower the limit if other calls were in flight with it."""
        with self._cond:
            at_once = self.in_flight
            if at_once < 2 or self.limit < 2:
                return
            self.limit = min(self.limit, max(1, at_once // 2))
            note = (f"the server timed out with {at_once} LLM calls at once: at most {self.limit} at a time from "
                    "now on")
        if self._on_note:
            self._on_note(note)

    def watch(self, on_retry: Callable[[dict], None] | None) -> Callable[[dict], None]:
        """An ``on_retry`` for ChatLLM.complete that tells the gate of timed-out attempts, then calls ``on_retry``."""
        def seen(attempt: dict) -> None:
            if attempt.get("error_kind") == "timeout":
                self.timed_out()
            if on_retry:
                on_retry(attempt)

        return seen


@lru_cache(maxsize=1024)
def _ranking(root: str | None, scenario: str, number: int, source: str = "dqa"):
    """The simulator's ranking of a question (None for a scenario without a simulator)."""
    question = catalog.question(source, scenario, number, root)
    try:
        return ranking(question, catalog.database(question, root))
    except InputError:
        return None


def _evidence(root: str | None, item: Item, events: list[dict] | Trace):
    """The run's evidence coverage (core.analysis.evidence), None where the simulator cannot rank the question."""
    question = catalog.question(item.source, item.scenario, item.question, root)
    try:
        return run_coverage(question, catalog.database(question, root), events)
    except ValueError:  # sims.ranking.InputError
        return None


class Bench:
    """A benchmark ready to run: its work list (``work``), its notes, its directory and result store."""

    def __init__(self, config: BenchConfig):
        try:
            config.check_numbers()
        except ValueError as e:
            raise BenchError(str(e)) from None
        for name in config.techniques:
            technique(name)  # ValueError naming the choices
        if config.concurrency < 1:
            raise BenchError("--concurrency must be at least 1")
        if config.vote < 0 or config.vote == 1:
            raise BenchError("--vote needs at least 2 samples (or 0: no vote)")
        if config.top_p is not None and not 0 < config.top_p <= 1:
            raise BenchError(f"--top-p must be above 0 and at most 1, not {config.top_p}")
        fidelity.check(config.prompts, config.reaper_planner)  # ValueError naming the choices
        self._throttle = RateLimiter(config.rpm) if config.rpm is not None else None
        self.config = config
        self.root = str(config.dqa_root) if config.dqa_root else None
        self.spec, self.model = self._model()
        notes: list[str] = []
        if config.vote > config.epochs:
            notes.append(f"a vote over {config.vote} samples runs {config.vote} epochs (asked {config.epochs})")
        self.epochs = max(config.epochs, config.vote)
        dbs = databases_of(config.db, notes)
        if config.source not in catalog.SOURCES:
            raise BenchError(f"unknown question source {config.source!r}; choose {', '.join(catalog.SOURCES)}")
        chosen = scenarios_of(config.scenario, config.source)
        counts = {s: len(catalog.questions(config.source, s, self.root)) for s in chosen}
        # the question set: DQA, a generated set's name, or the demo scenarios
        self.set_name = dqa_benchmark(self.root).name if config.source == "dqa" else config.source
        self.work: WorkList = work_list(chosen, dbs, config.techniques, self.model, parse_numbers(config.questions),
                                        counts, notes, config.source, self.epochs)
        if not self.work.items:
            raise BenchError("no questions selected")
        self._replays = self._check_llm()
        other_set = self.set_name not in (DQA_SET, "demo")
        self.directory = (Path(config.out) if config.out else bench_home(config.home) / (
            config.name or default_name(self.model) + (f"-{default_name(self.set_name)}" if other_set else "")))
        config.limits.validate()
        reason = (project_home.problem(config.home or None)
                  or project_home.problem(bench_home(config.home), "the benchmarks folder {} (under PLANRAG_HOME)")
                  or project_home.problem(self.directory, "the results directory {}"))
        if reason:
            raise BenchError(f"{reason}; choose another --out, or set PLANRAG_HOME to a writable folder")
        self.budget_price = price_of(self.model, load_prices(bench_home(config.home) / "prices.json"))
        check_caps(config.budget_tokens, config.budget_cost, config.budget_calls, self.budget_price, self.model)
        if config.limits.max_cost_usd is not None and self.budget_price is None:
            raise BenchError(f"a cost limit per run needs the model's price, and {self.model!r} is not in the price "
                             "table: add it there, or drop the cost limit")
        self.store = ResultStore(self.directory)
        params = {"temperature": config.temperature, "limits": _limit_params(config.limits),
                  **config.settings_params()}
        self.store.check_params({**params, "set": self.set_name} if other_set else params)  # sets never mix
        done = self.store.done()
        self.pending = [i for i in self.work.items if i.key not in done]
        self.progress: Progress | None = None  # set when run() starts
        self.budget_id: str | None = config.budget_id  # the budget of the run going on or last run
        self._local = threading.local()
        self._kept: tuple[Budget, AgentRuntime] | None = None  # run_one's budget and runtime
        self._kept_lock = threading.Lock()
        self.lock = DirectoryLock(self.directory)

    def claim(self) -> None:
        """Take the results directory for this process (BenchBusy when another benchmark runs into it) and list
        the pending items again: one that ran there until now may have finished some. ``run()`` claims too."""
        self.lock.acquire()
        self.refresh()

    def refresh(self) -> None:
        """List the pending items again (other processes may have finished some)."""
        done = self.store.done()
        self.pending = [i for i in self.work.items if i.key not in done]

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
            stems = (item.base_name, f"{item.scenario}-{item.question}-{item.technique}",
                     f"{item.source}_{item.scenario}_{item.question}_{language(item.db)}_{item.technique}")
            epoch = [f"{stem}-e{item.epoch}" for stem in stems] if item.epoch > 1 else []  # an epoch's own first
            found = [p for stem in (*epoch, *stems) if (p := folder / f"{stem}.json").is_file()]
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
                              "temperature": c.temperature, "top_p": c.top_p, "seed": c.seed})

    def keys(self) -> set[str]:
        """The result keys of this benchmark: its work list's items and its votes."""
        return {i.key for i in self.work.items} | set(self._vote_keys())

    def results(self) -> list[dict]:
        """The stored results of this benchmark's work list (and its votes)."""
        return read_results(self.directory, self.keys())

    def _vote_keys(self) -> dict[str, list[Item]]:
        """The result key of each voted item, with the items (epochs 1..vote) it votes over."""
        if not self.config.vote:
            return {}
        keys: dict[str, list[Item]] = {}
        for item in self.work.items:
            if item.epoch <= self.config.vote:
                voted = replace(item, technique=voted_name(item.technique, self.config.vote), epoch=1)
                keys.setdefault(voted.key, []).append(item)
        return keys

    def record_votes(self) -> int:
        """Store the vote of every item whose samples are all stored and that has no vote yet; how many."""
        stored = {Item.of_row(r).key: r for r in read_results(self.directory)}
        done = 0
        for key, samples in self._vote_keys().items():
            if key not in stored and all(s.key in stored for s in samples):
                self.store.put(vote([stored[s.key] for s in samples]))
                done += 1
        return done

    def not_run(self) -> list[dict]:
        """The items of this benchmark's work list that could not run and have no result yet, with what happened
        (see core.benchmark.results.read_not_run)."""
        return read_not_run(self.directory, {i.key for i in self.work.items})

    def run(self, on_result: Callable[[Item, dict | None, str | None, Progress], None] | None = None,
            stop: threading.Event | None = None, on_note: Callable[[str], None] | None = None) -> Progress:
        """Run the pending items (``self.progress`` meanwhile). ``on_result`` gets each item with its result, or None
        and why it could not run (kept in the result store until a rerun finishes it), and the progress; ``on_note``
        what the run changes on its own; ``stop`` ends it once the items in flight finish. BenchBusy: another
        benchmark runs into the same directory."""
        self.claim()
        try:
            self.store.mark_running(len(self.work.items), self.config.started_by)
            return self.run_items(self.pending, on_result, stop, on_note)
        finally:
            self.lock.release()

    def open_budget(self, budget_id: str) -> Budget:
        """The budget ``budget_id`` in this benchmark's result store, made with the config's caps if it is new: a
        worker handed the id reopens the budget the other workers of the benchmark spend from."""
        c = self.config
        return Budget.open(self.store, budget_id, c.budget_tokens, c.budget_cost, c.budget_calls, self.budget_price,
                           self.model)

    def run_items(self, items: list[Item], on_result: Callable[[Item, dict | None, str | None, Progress], None]
                  | None = None, stop: threading.Event | None = None,
                  on_note: Callable[[str], None] | None = None) -> Progress:
        """Run ``items`` of the work list as ``run`` does, without claiming the results directory: for a worker
        handed part of a benchmark that other workers run too. They share its budget when given its id
        (``config.budget_id``); without one the items spend from a new budget (``budget_id``)."""
        stop = stop or threading.Event()
        stored = self.results()
        budget = self.open_budget(self.config.budget_id or uuid.uuid4().hex)
        self.budget_id = budget.id
        progress = self.progress = Progress(len(self.work.items), len(stored),
                                            sum(bool(r.get("correct")) for r in stored), budget=budget)
        lock = threading.Lock()

        def note(text: str) -> None:
            with lock:
                progress.notes.append(text)
            if on_note:
                on_note(text)

        runtime, cache = self._items_runtime(budget, note)
        # the team store's outage going on, if any (since), and when the last one was over (back)
        away: dict[str, float | None] = {"since": None, "back": float("-inf")}

        def wait_for_store(error: Exception, began: float) -> None:
            """The team store away: said once, waited for (database.GRACE_S), the benchmark's lock held again. An
            attempt begun before the last outage was over, failing after it (a pool's wait for a connection), is
            part of that outage: tried again, not said again."""
            with lock:
                if away["since"] is None and began < away["back"]:
                    return
                first, away["since"] = away["since"] is None, away["since"] or time.monotonic()
            if first:
                note(f"{clock(time.time())}: the team store cannot be reached ({database.lost_reason(error)}); "
                     "waiting for it")
            if not database.wait_until_back(database.location(self.store.path)):
                raise error
            with lock:
                since, away["since"], away["back"] = away["since"], None, time.monotonic()
                self.lock.regain()
            if since is not None:
                note(f"{clock(time.time())}: the team store is back after {time.monotonic() - since:.0f} s; "
                     "going on")

        def attempt(item: Item) -> None:
            if stop.is_set():
                return
            why = self._refused() or budget.reached()  # the gate's refusal first, then the budget
            if why:
                with lock:
                    progress.stopped = progress.stopped or why
                stop.set()
                return
            result, error = self._record_item(item, runtime, progress, lock, stop)
            if on_result:
                on_result(item, result, error, progress)

        def work(item: Item) -> None:
            while True:
                began = time.monotonic()
                try:
                    return attempt(item)
                except Exception as e:  # the team store away: the item runs again once it is back
                    if not database.is_lost(e):
                        raise
                    wait_for_store(e, began)

        try:
            with ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="bench") as pool:
                futures = [pool.submit(scenarios.in_context(work), item) for item in items]
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
        self.record_votes()
        return progress

    def run_one(self, item: Item) -> tuple[dict | None, str | None]:
        """Run one item of the work list and store its result, or why it could not run (the result and the error),
        on a runtime kept for the next: a worker of the job queue runs a benchmark's items one job each. It spends
        from the budget ``config.budget_id``, shared with the other workers."""
        with self._kept_lock:
            if self._kept is None:
                budget = self.open_budget(self.config.budget_id or uuid.uuid4().hex)
                self._kept = budget, self._items_runtime(budget, lambda _: None)[0]
        budget, runtime = self._kept
        return self._record_item(item, runtime, Progress(1, 0, 0, budget=budget), threading.Lock(), threading.Event())

    def _items_runtime(self, budget: Budget, note: Callable[[str], None]) -> tuple[AgentRuntime, ReplyCache | None]:
        """The runtime the items run on, its model opened through the reply cache (if any), the call gate (fewer
        calls at once after timeouts, said through ``note``) and the budget; and the cache, to close after."""
        gate = CallGate(self.config.concurrency, note) if self.config.concurrency > 1 else None
        cache = ReplyCache(bench_home(self.config.home) / "llm-cache.sqlite") if self.config.cache else None
        runtime = AgentRuntime(self.config.home, workspace=partial(open_catalog_workspace, root=self.root),
                               llm_settings=self._llm_settings(),
                               llm_opener=caching_opener(cache, self._throttle, on_open=self._opened, gate=gate,
                                                         budget=budget, sample=self._epoch))
        return runtime, cache

    def _refused(self) -> str | None:
        """Why the gate refuses the benchmark's next item to whoever asked for it (``config.asked``: the role the
        configuration gives them now, core.auth.gate.authorize_job); None when it lets it run or no one is named."""
        asked = self.config.asked
        if not asked:
            return None
        try:
            authorize_job(from_record(asked["who"]), asked["action"], asked["at"])
        except Refused as e:
            return str(e)
        return None

    def _record_item(self, item: Item, runtime: AgentRuntime, progress: Progress, lock: threading.Lock,
                     stop: threading.Event) -> tuple[dict | None, str | None]:
        """Run one item and store its result, or why it could not run (a failure of a FATAL kind stops the
        benchmark); the result and the error."""
        with lock:
            progress.running.add(item.name)
        result = error = None
        try:
            result = self._run_item(item, runtime)
        except Exception as e:  # noqa: BLE001 - any failure to run is reported, and the item retried later
            if database.is_lost(e):  # the infrastructure's failure, not the item's: never stored as its result
                raise
            error, kind = scrub(str(e) or type(e).__name__), getattr(e, "kind", None)
            self.store.put_not_run(item, kind or "error", error, getattr(e, "attempts", []))
            with lock:
                if progress.fail(item.name, error, kind):
                    stop.set()
        else:
            self.store.put(result)
            with lock:
                progress.finish(result)
        finally:
            with lock:
                progress.running.discard(item.name)
        return result, error

    def _epoch(self) -> int:
        return getattr(self._local, "epoch", 1)  # the worker thread's current item's

    def _opened(self, llm: CachingLLM) -> None:
        self._local.llm = llm  # the worker thread's current item

    def _endpoint(self) -> str | None:
        """The server's named model endpoint the benchmark's runs use (recorded with each run, so a later resume or
        branch uses it); None for a model of one's own or a replay."""
        endpoint = self.config.llm_settings.endpoint
        return endpoint if endpoint and not self._replays and self.spec == self.config.llm_settings.model else None

    def _spec(self, item: Item) -> str:
        return self._replays[item.key] if self._replays else self.spec

    def _run_item(self, item: Item, runtime: AgentRuntime) -> dict:
        """Run one item and return its result; raises for a run that failed for reasons outside the agent."""
        c = self.config
        settings = RunSettings(item.scenario, item.question, item.db, item.technique, self._spec(item),
                               base_url=c.base_url, temperature=c.temperature, limits=c.limits, source=item.source,
                               prompts=c.prompts, **_planner(item.technique, c.reaper_planner), top_p=c.top_p,
                               seed=None if c.seed is None else c.seed + item.epoch - 1,
                               endpoint=self._endpoint()).validate()
        run_id = new_run_id()
        if c.started_by:
            runtime.store.record_start(run_id, c.started_by)
        self._local.llm = None
        self._local.epoch = item.epoch
        start = time.perf_counter()
        with grouped(f"bench:{self.directory.name}"):  # the item's trace names its benchmark (core.telemetry)
            events = list(runtime.iter_start(settings, run_id))
        wall = time.perf_counter() - start
        llm: CachingLLM = self._local.llm
        record = runtime.store.get(run_id, events=False)  # the events are in hand
        outcome = record.outcome or RunOutcome()
        trace = Trace.of(events)
        facts = read_trace(trace, item.scenario, outcome.decision)
        failed_attempts = trace.fatal.attempts if trace.fatal else []
        if record.status == "failed" and facts.error_kind in RETRY:
            raise _NotRun(facts.error_kind, outcome.error or "the run failed", failed_attempts)
        evidence = _evidence(self.root, item, trace)
        # not answered (no final answer): neither right nor wrong, but a failure of a labelled question all the same
        graded = False if not outcome.answered and outcome.label is not None else outcome.correct
        category, signs = classify(graded, facts, record.status, outcome.final_answer, outcome.decision, evidence)
        verdict = stored_verdict(outcome, _ranking(self.root, item.scenario, item.question, item.source))
        placement = verdict.placement
        tokens = outcome.tokens
        fresh, cached = [u for u in trace.usage if not u.cached], [u for u in trace.usage if u.cached]
        return {"set": self.set_name, "source": item.source, "scenario": item.scenario, "question": item.question,
                "db": item.db,
                "language": language(item.db),
                "technique": item.technique, "model": item.model, "run_id": run_id, "status": record.status,
                "decision": outcome.decision, "label": outcome.label, "correct": outcome.correct,
                "final_answer": outcome.final_answer, "error": outcome.error,
                "llm_calls": outcome.llm_calls, "cached_calls": llm.hits,
                "prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "tokens_estimated": tokens.estimated,
                # time waited for the model now (retries, backoff and a failed last call included); cached replies
                # apart, with their original latency
                "llm_latency_s": sum(u.wait_s or u.latency_s for u in fresh)
                + sum(a.get("duration_s", 0.0) for a in failed_attempts),
                "cached_latency_s": sum(u.latency_s for u in cached),
                "llm_attempts": sum(len(u.attempts or [1]) for u in fresh) + len(failed_attempts),
                "wall_s": wall, "overhead_s": wall - llm.wait_s,
                "ready_s": llm.first_call_at - start if llm.first_call_at else None,
                **facts.to_dict(), "failure": category, "failure_signs": signs,
                **(evidence.to_dict() if evidence else {"evidence_total": None, "evidence_seen": None,
                                                        "evidence_missing": None}),
                "grade_status": outcome.grade_status, "grade_reason": outcome.grade_reason,
                "rank": placement and placement.rank, "candidates": placement and placement.of,
                "regret": placement and placement.regret, "tied": placement and placement.tied,
                "optimal": bool(verdict.optimal), "all_tied": verdict.all_tied,
                "relative_regret": verdict.relative_regret, "cost_usd": outcome.cost_usd, "limit": outcome.limit,
                "repeats": outcome.repeats, "unconsulted": outcome.unconsulted,
                "finished": time.time(), "epoch": item.epoch,
                **fidelity.result_fields(settings, trace.usage)}


def _limit_params(limits: Limits) -> dict:
    """The limits as the result store keeps them among its parameters."""
    values, defaults = asdict(limits), asdict(Limits())
    return {k: v for k, v in values.items() if k not in _LATER_LIMITS or v != defaults[k]}


class _NotRun(Exception):
    def __init__(self, kind: str, message: str, attempts: list[dict] | None = None):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts or []


def _planner(technique_name: str, reaper_planner: str) -> dict:
    """The REAPER planner setting, for REAPER's runs only (the other techniques have none)."""
    return {"reaper_planner": reaper_planner} if technique(technique_name).planner else {}
