"""Fresh DQA-style question sets with known answers and difficulty knobs (``python -m sims generate``).

Each database is built from the seed alone (``random.Random`` seeded with a string, so no ``hash()`` order and no
platform dependence), its stored state computed by the simulators as in ``sims.synthetic``, and each question's
label is the dqa-mode simulator's pick on that database. A question is kept only if its label cannot depend on
float rounding: the best score must beat the runner-up (and the selection threshold) by more than ``TOLERANCE``
relative, far above the ~1e-15 noise a change of summation order makes; or, for the degenerate questions asked
for, every candidate must score exactly the same (then the benchmark's rule, the first candidate in table order,
decides). Databases are independent, so they are made in parallel and the output does not depend on ``jobs``.

Written per scenario: the DQA files (see ``sims.dqa_files``), ``questions/rankings.json`` (each question's ranking
summary, in question order) and the set's manifest ``generated.json`` at the root.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path

from sims import building, dqa_files, locating, synthetic
from sims.locating_networks import NoRoom, Plant, trade_network
from sims.question_text import (BUILDING_QUESTION, BUILDING_RULES, LOCATING_GOAL, LOCATING_QUESTION,
                                 LOCATING_RULES)
from sims.manifest import MANIFEST, GenerateError, read_manifest
from sims.ranking import Ranking
from sims.tables import Tables

#: Version of the generator's output for a given seed and knobs; raise it when that output changes.
GENERATOR_VERSION = 1
#: Per scenario, beside the question file: one ranking summary per question, in question order.
RANKINGS = "rankings.json"
#: Scores closer than this (relative to the best score) count as tied: such a label could depend on rounding.
TOLERANCE = 1e-9
#: Databases tried for one database's questions before giving up (the knobs are then too strict).
MAX_ATTEMPTS = 200
#: Extra question countries planted in each Locating network, in case some miss the knobs.
SPARE_COUNTRIES = 3
SCENARIOS = ("locating", "building")
YEARS = {"locating": ("1445", "1618", "1701"), "building": ("1836", "1839", "1849")}
#: Markets shaped as DQA's: many consumer goods (no building's input) and supply about twice the buildings'
#: demand. Without that, dqa mode's double-counted building demand lifts every price above the stored one in
#: markets of 250 buildings or more, and they give no labelled question.
MARKET_SHAPE = {"consumer_share": 0.3, "supply_scale": 3.0}
#: Fields the released files carry that their own loader reads (constant there too).
LOCATING_TARGETS = {"target_rdb": "eu4_1445", "target_gdb": "eu4"}
BUILDING_TARGET_GDB = "gdb-2hop-001"


@dataclass(frozen=True)
class Knobs:
    """What to generate: ``questions`` questions of ``scenario`` (locating or building) from ``seed``; the other
    knobs' ranges and shares, each said beside it (None: the scenario's default, ``resolved``)."""

    scenario: str
    questions: int
    seed: int
    size: int | None = None  # trade nodes (Locating) or goods (Building)
    countries: int | None = None
    # Locating: the nodes upstream of the home node where the country has a row (the only candidates that change
    # its profit; every other node scores the no-merchant profit); Building: the buildings of the market (all are
    # candidates)
    candidates: tuple[int, int] | None = None
    hops: tuple[int, int] = (1, 3)  # Locating: how far upstream of the home node those nodes lie
    # the runner-up's score is this far below the best (a share of the best score, as Ranking.relative_regret)
    min_margin: float = 0.0
    max_margin: float | None = None
    degenerate: float = 0.0  # the share of questions where every candidate ties (Locating only)
    per_db: int = 1  # questions asked on each database (different countries or goods)

    def resolved(self) -> Knobs:
        """The knobs with the scenario's defaults filled in (DQA's sizes), checked; GenerateError if unusable."""
        if self.scenario not in SCENARIOS:
            raise GenerateError(f"unknown scenario {self.scenario!r}; use locating or building")
        locating_ = self.scenario == "locating"
        size = self.size or (80 if locating_ else 52)
        knobs = replace(self, size=size,
                        countries=(self.countries or max(2, round(size * 665 / 80))) if locating_ else None,
                        candidates=self.candidates or ((1, 8) if locating_ else (40, 150)),
                        hops=self.hops if locating_ else (0, 0))
        knobs._check()
        return knobs

    def margin_text(self) -> str:
        """The margin knobs as typed, for messages: ``margin at least 0.9``, ``margin 0-0.002``."""
        if self.max_margin is None:
            return f"margin at least {self.min_margin}"
        return f"margin {self.min_margin}-{self.max_margin}"

    def _check(self) -> None:
        lo, hi = self.candidates
        problems = [
            (self.questions < 1, "--questions must be at least 1"),
            (self.per_db < 1, "--per-db must be at least 1"),
            (self.size < (6 if self.scenario == "locating" else 2), f"--size {self.size} is too small"),
            (not 1 <= lo <= hi, f"--candidates {lo}-{hi}: need 1 <= LO <= HI"),
            (self.scenario == "locating" and not 1 <= self.hops[0] <= self.hops[1],
             f"--hops {self.hops[0]}-{self.hops[1]}: need 1 <= LO <= HI"),
            (self.scenario == "locating" and hi >= self.size, f"--candidates {hi} needs more than {self.size} nodes"),
            (self.scenario == "locating" and self.countries < self.per_db + 2 * SPARE_COUNTRIES,
             f"--countries must be at least --per-db + {2 * SPARE_COUNTRIES} (the asked countries and spares)"),
            (self.scenario == "locating" and self.countries > 26 ** 4 // 2, "--countries is too large"),
            (self.min_margin < 0, "--min-margin must be >= 0"),
            (self.max_margin is not None and self.max_margin <= max(self.min_margin, TOLERANCE),
             f"--max-margin must be above --min-margin and above the tie tolerance {TOLERANCE:g}"),
            (not 0 <= self.degenerate <= 1, "--degenerate is a share between 0 and 1"),
            (self.scenario == "building" and self.degenerate > 0,
             "--degenerate applies to Locating only: a Building question where every building ties has no label "
             "(no price falls below the stored one)"),
        ]
        for bad, message in problems:
            if bad:
                raise GenerateError(message)

    def describe(self) -> dict:
        """The knobs as the manifest records them."""
        data = asdict(self)
        data["candidates"], data["hops"] = list(self.candidates), list(self.hops)
        if self.scenario == "building":
            del data["countries"], data["hops"]
        return data


def _rng(*parts) -> random.Random:
    """A generator seeded from text (SHA-512 of it, in every Python since 3.2): no hash() order, no platform."""
    return random.Random("sims-generate/" + "/".join(map(str, parts)))


def _int_seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, ("sims-generate", *parts))).encode()).digest()[:8], "big")


# --- ranking summaries and the acceptance rule ------------------------------------------------------------------

def tie_groups(ranking: Ranking) -> list[dict]:
    """Runs of exactly equal scores in the ranking (two or more candidates): 1-based rank of the group's first
    entry, the score, the size and the candidates in table order."""
    groups, entries, start = [], ranking.entries, 0
    for i in range(1, len(entries) + 1):
        if i == len(entries) or entries[i].score != entries[start].score:
            if i - start >= 2:
                groups.append({"rank": start + 1, "score": entries[start].score, "size": i - start,
                               "candidates": [e.candidate for e in entries[start:i]]})
            start = i
    return groups


def summarize(ranking: Ranking) -> dict:
    """A question's ranking summary: best, runner-up, margin (the runner-up's relative regret as a share of the
    best score, and in score units), the tie groups, and whether every candidate ties."""
    entries = ranking.entries
    best = entries[0]
    runner = entries[1] if len(entries) > 1 else None
    return {"mode": ranking.mode, "label": ranking.label(),
            "best": {"candidate": best.candidate, "score": best.score},
            "runner_up": None if runner is None else {"candidate": runner.candidate, "score": runner.score},
            "margin": None if runner is None else ranking.relative_regret(runner.candidate) / 100,
            "margin_abs": None if runner is None else ranking.regret(runner.candidate),
            "baseline": ranking.baseline, "threshold": ranking.threshold, "candidates": len(entries),
            "live_candidates": sum(e.score != ranking.baseline for e in entries),
            "degenerate": entries[0].score == entries[-1].score, "tie_groups": tie_groups(ranking)}


def _apart(a: float, b: float) -> bool:
    """Whether two scores differ by more than TOLERANCE relative: their order cannot come from rounding."""
    return abs(a - b) > TOLERANCE * max(abs(a), abs(b))


def acceptable(ranking: Ranking, knobs: Knobs, degenerate: bool) -> bool:
    """Whether the ranking makes a question of the kind asked: a label robust to float summation order and the
    margin within the knobs; or, for a degenerate question, every candidate exactly tied and a label."""
    entries = ranking.entries
    if ranking.label() is None or len(entries) < 2:
        return False
    all_tied = entries[0].score == entries[-1].score
    if degenerate:
        return all_tied
    best, runner = entries[0].score, entries[1].score
    if not (_apart(best, runner) and _apart(best, ranking.threshold)):
        return False
    margin = abs(best - runner) / abs(best)
    return margin >= knobs.min_margin and (knobs.max_margin is None or margin <= knobs.max_margin)


# --- Locating ---------------------------------------------------------------------------------------------------

def _locating_unit(knobs: Knobs, unit: int, kinds: list[bool]) -> tuple[Tables, list[dict], list[dict]]:
    """One Locating network with a question per entry of ``kinds`` (True: degenerate): the tables, the questions
    (without numbers) and their ranking summaries."""
    for attempt in range(MAX_ATTEMPTS):
        rng = _rng(knobs.seed, "locating", unit, attempt)
        wanted = [kind for kind in (True, False) for _ in range(kinds.count(kind) + SPARE_COUNTRIES)
                  if kind in kinds]
        try:
            tables, plants, names = trade_network(rng, knobs.size, knobs.countries, rng.sample(wanted, len(wanted)),
                                                  knobs.candidates, knobs.hops)
        except NoRoom as e:
            raise GenerateError(f"{e}: lower --candidates, widen --hops or raise --size") from None
        net = locating.TradeNetwork(tables)
        found: dict[bool, list[tuple[Plant, Ranking]]] = {True: [], False: []}
        for plant in plants:
            ranking = locating.rank(net, plant.tag)
            if acceptable(ranking, knobs, plant.degenerate):
                found[plant.degenerate].append((plant, ranking))
        if all(len(found[k]) >= kinds.count(k) for k in (True, False)):
            year = rng.choice(YEARS["locating"])
            questions, summaries = [], []
            for kind in kinds:
                plant, ranking = found[kind].pop(0)
                home = names[plant.home]
                summary = summarize(ranking)
                best = ranking.best.candidate
                summary["hops"] = next((d for m, d in plant.hops.items() if names[m] == best), None)
                summary.update(country=plant.tag, home=home, attempts=attempt + 1)
                questions.append({"business_rules": LOCATING_RULES,
                                  "question": LOCATING_QUESTION.format(country=plant.tag, year=year, home=home),
                                  "goal": LOCATING_GOAL.format(home=home), "answer": ranking.label(), "home": home,
                                  "country": plant.tag, "year": year, **LOCATING_TARGETS})
                summaries.append(summary)
            return tables, questions, summaries
    raise GenerateError(f"no Locating network out of {MAX_ATTEMPTS} gave questions within the knobs "
                        f"({knobs.margin_text()}, candidates {'-'.join(map(str, knobs.candidates))}, hops "
                        f"{'-'.join(map(str, knobs.hops))}): loosen them")


# --- Building ---------------------------------------------------------------------------------------------------

def _building_unit(knobs: Knobs, unit: int, count: int) -> tuple[Tables, list[dict], list[dict]]:
    """One market with ``count`` questions (distinct goods): the tables, the questions (without numbers) and their
    ranking summaries."""
    for attempt in range(MAX_ATTEMPTS):
        rng = _rng(knobs.seed, "building", unit, attempt)
        tables = synthetic.market(rng.randint(*knobs.candidates), knobs.size,
                                  seed=_int_seed(knobs.seed, "building", unit, attempt), **MARKET_SHAPE)
        market = building.Market(tables)
        rankings = building.rank_all(market)
        suppliers: dict[int, set] = {}
        for goods, bid, *_ in tables["supply"].rows:
            suppliers.setdefault(goods, set()).add(bid)
        picked = []
        for goods in rng.sample(market.goods, len(market.goods)):
            ranking = rankings[goods]
            if (acceptable(ranking, knobs, False)
                    and ranking.label() in suppliers.get(market.goods_index[goods], ())):  # DQA's rule too
                picked.append((goods, ranking))
            if len(picked) == count:
                break
        if len(picked) == count:
            year = rng.choice(YEARS["building"])
            tag = "".join(chr(65 + (unit // 26 ** i) % 26) for i in reversed(range(max(3, _letters(unit)))))
            ref = f"{tag}{year}"
            questions, summaries = [], []
            for goods, ranking in picked:
                summary = summarize(ranking)
                summary.update(country=ref, goods=goods, attempts=attempt + 1)
                questions.append({"country": ref, "question": BUILDING_QUESTION.format(goods=goods),
                                  "business_rules": BUILDING_RULES, "goods": goods,
                                  "target_gdb": BUILDING_TARGET_GDB, "answer": ranking.label()})
                summaries.append(summary)
            return tables, questions, summaries
    raise GenerateError(f"no market out of {MAX_ATTEMPTS} gave {count} questions within the knobs "
                        f"({knobs.margin_text()}, buildings {'-'.join(map(str, knobs.candidates))}): loosen them or "
                        "lower --per-db")


def _letters(unit: int) -> int:
    n = 1
    while 26 ** n <= unit:
        n += 1
    return n


# --- the set ----------------------------------------------------------------------------------------------------

def _units(knobs: Knobs) -> list[list[int]]:
    """Question indices (0-based) per database."""
    return [list(range(u, min(knobs.questions, u + knobs.per_db))) for u in range(0, knobs.questions, knobs.per_db)]


def _degenerate(knobs: Knobs) -> set[int]:
    """Which questions (0-based) are degenerate: an exact share, placed by the seed."""
    count = round(knobs.degenerate * knobs.questions)
    return set(_rng(knobs.seed, knobs.scenario, "degenerate").sample(range(knobs.questions), count))


def make_unit(knobs: Knobs, unit: int, indices: list[int], degenerate: set[int], root: str) -> list[tuple[dict, dict]]:
    """Make database ``unit`` for questions ``indices`` (0-based), write its files under ``root`` and return each
    question with its ranking summary (numbered). Runs in a worker process."""
    root_path = Path(root)
    if knobs.scenario == "locating":
        tables, questions, summaries = _locating_unit(knobs, unit, [i in degenerate for i in indices])
        sql, cql = dqa_files.sql_dump(tables, "locating"), dqa_files.cypher_dump(tables, "locating")
        refs = [f"q{i + 1}" for i in indices]
    else:
        tables, questions, summaries = _building_unit(knobs, unit, len(indices))
        sql, cql = dqa_files.sql_dump(tables, "building"), dqa_files.cypher_dump(tables, "building")
        refs = [questions[0]["country"]]
    for ref in refs:
        dqa_files.write_text(dqa_files.sql_path(root_path, knobs.scenario, ref), sql)
        dqa_files.write_text(dqa_files.cql_path(root_path, knobs.scenario, ref), cql)
    out = []
    for i, question, summary in zip(indices, questions, summaries):
        if knobs.scenario == "locating":
            question["question_num"] = i + 1  # the field order of the released files
        else:
            question = {"country": question.pop("country"), "question_num": i + 1, **question}
        out.append((question, {"number": i + 1, "question_num": i + 1,
                               "database": refs[0] if knobs.scenario == "building" else f"q{i + 1}", **summary}))
    return out


def _run_unit(args) -> list[tuple[dict, dict]]:
    return make_unit(*args)


@dataclass(frozen=True)
class Report:
    """What ``generate`` wrote."""

    root: Path
    name: str
    scenario: str
    questions: int
    databases: int
    degenerate: int
    margins: list[float]
    seconds: float


def rankings_json(summaries: list[dict]) -> str:
    """The rankings file's text: a JSON array, one question's summary a line."""
    return "[\n" + ",\n".join(json.dumps(s) for s in summaries) + "\n]\n"


def _check_output(root: Path) -> dict | None:
    if root.exists() and not root.is_dir():
        raise GenerateError(f"{root} is a file, not a folder")
    manifest = read_manifest(root) if root.exists() else None
    if manifest is None and root.exists() and any(root.iterdir()):
        raise GenerateError(f"{root} holds files but is no generated set (no {MANIFEST}): choose an empty or new "
                            "folder, so no real DQA folder is overwritten")
    return manifest


def generate(knobs: Knobs, out: str | Path, jobs: int = 1, name: str | None = None) -> Report:
    """Generate ``knobs.questions`` questions of ``knobs.scenario`` into ``out``: a new or empty folder, or a set
    made by this generator, whose other scenario is kept. Files are written to a staging folder and moved in at the
    end, so a failure leaves the previous set as it was."""
    # a scenario never generated gets an empty question file, so the folder reads as a whole DQA folder
    start = time.perf_counter()
    knobs = knobs.resolved()
    root = Path(out)
    manifest = _check_output(root) or {}
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{knobs.scenario}"
    shutil.rmtree(staging, ignore_errors=True)
    degenerate = _degenerate(knobs)
    tasks = [(knobs, u, indices, degenerate, str(staging)) for u, indices in enumerate(_units(knobs))]
    try:
        if jobs > 1 and len(tasks) > 1:
            with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=get_context("spawn")) as pool:
                done = list(pool.map(_run_unit, tasks, chunksize=max(1, len(tasks) // (8 * jobs))))
        else:
            done = [_run_unit(t) for t in tasks]
        pairs = [pair for unit in done for pair in unit]
        questions, summaries = [q for q, _ in pairs], [s for _, s in pairs]
        question_file = staging / dqa_files.QUESTION_FILES[knobs.scenario]
        dqa_files.write_text(question_file, dqa_files.questions_json(questions))
        dqa_files.write_text(question_file.parent / RANKINGS, rankings_json(summaries))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    target = root / knobs.scenario
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging / knobs.scenario, target)
    shutil.rmtree(staging, ignore_errors=True)
    for other in SCENARIOS:
        path = root / dqa_files.QUESTION_FILES[other]
        if not path.exists():
            dqa_files.write_text(path, dqa_files.questions_json([]))
    name = name or manifest.get("name") or root.resolve().name
    scenarios = dict(manifest.get("scenarios", {}))
    scenarios[knobs.scenario] = {"knobs": knobs.describe(), "databases": len(tasks), "tolerance": TOLERANCE,
                                 "generator_version": GENERATOR_VERSION}
    dqa_files.write_text(root / MANIFEST, json.dumps({"name": name, "generator": "python -m sims generate",
                                                      "scenarios": dict(sorted(scenarios.items()))}, indent=1) + "\n")
    margins = [s["margin"] for s in summaries if not s["degenerate"]]
    return Report(root, name, knobs.scenario, len(questions), len(tasks), sum(s["degenerate"] for s in summaries),
                  margins, time.perf_counter() - start)
