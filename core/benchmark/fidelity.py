"""How faithful each benchmark result is to the paper it is compared with (docs/paper-deviations.md): the setting
each result ran with, shown next to the paper's figure and the paper's own setting; and REAPER's point, the cost of
its one planning call against IterRAG's calls, per question.

- ``paper_comparison``: accuracy per question set x scenario x database x technique x setting, with n and its 95%
  Wilson interval, beside the PlanRAG paper's figure (Table 5 for SingleRAG, IterRAG and PlanRAG; Table 4's
  RDB/GDB average for PlanRAG w/o RP), the paper's n and the setting that figure was made with (DQA's questions
  only); REAPER and AutoPlan have no DQA figure in their papers.
- ``planner_cost``: REAPER's and IterRAG's LLM calls per question, the latency of the first call (REAPER's plan
  call) and of a call on average, and the LLM time per question (sums of the calls' latencies; a cached reply
  counts with its original latency).

Kept apart from reports.py so those tables stay as they are; written as paper_comparison.csv and
planner_cost.csv beside the other reports.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.agents.engine import engine
from core.model.bounds import one_of
from core.model.run_settings import PROMPT_SETTINGS, REAPER_PLANNERS, RunSettings, setting_label
from core.model.technique import TECHNIQUES, technique
from core.model.events import LLMUsage
from core.backends import registry
from core.benchmark import paper
from core.benchmark.epochs import clustered
from core.benchmark.stats import wilson
from core.scenarios.dqa.source import DQA_SET
from core.scenarios import ByScenario
from core.config.files import write_atomic

if TYPE_CHECKING:
    import pandas as pd

KIND = {"sql": "RDB", "cypher": "GDB"}
#: The paper's number of questions per scenario.
PAPER_N = ByScenario("paper_n")
#: The setting of the PlanRAG paper's figures.
PAPER_SETTING = "prompts paper (Figures 8-11), GPT-4, temperature 0, zero-shot"
COMPARISON_COLUMNS = ["set", "scenario", "db", "kind", "technique", "model", "setting", "n", "correct", "accuracy",
                      "ci95_low", "ci95_high", "paper", "paper_n", "paper_source", "paper_setting"]
COST_COLUMNS = ["set", "scenario", "db", "technique", "model", "setting", "questions", "calls_per_question",
                "plan_call_latency_s", "latency_per_call_s", "llm_time_per_question_s", "paper_latency_s",
                "paper_setting"]
#: REAPER's paper (section 5.1): the whole plan in 207 ms (fine-tuned Mistral-7B), against about 2 s per step for an
#: agent (Claude3-Sonnet) calling the model once per retrieval step: (seconds, setting) by technique
#: (``paper_latency`` in its technique.toml).
REAPER_PAPER = {t.name: t.paper_latency for t in TECHNIQUES.values() if t.paper_latency}


def check(prompts: str, reaper_planner: str) -> None:
    """ValueError for an unknown setting."""
    one_of(prompts, PROMPT_SETTINGS, "prompt setting")
    one_of(reaper_planner, REAPER_PLANNERS, "REAPER planner")


def result_fields(settings: RunSettings, usage: list[LLMUsage]) -> dict:
    """What a benchmark result records of its setting and of its calls' latencies (``usage``: the runs' LLM usage
    records, in call order)."""
    tech = technique(settings.technique)
    prompts = None if tech.planner and settings.prompts != "paper" else settings.prompts  # as REAPER recorded it before
    planner = engine(tech).planner_used(settings, registry.language(settings.db))
    return {"prompts": prompts, "reaper_planner": planner,
            "setting": setting_label(settings.technique, prompts, planner),
            "call_latencies_s": [round(u.latency_s or 0.0, 4) for u in usage]}


def _setting(result: dict) -> str:
    """A result's setting; results from before settings were recorded ran with the defaults then (improved
    prompts; REAPER zero-shot)."""
    return result.get("setting") or setting_label(result["technique"], result.get("prompts"),
                                                  result.get("reaper_planner"))


def _set(result: dict) -> str:
    """A result's question set, as reports.py reads it (results from before sets had names: DQA, or their source)."""
    source = result.get("source") or "dqa"
    return result.get("set") or (DQA_SET if source == "dqa" else source)


def _paper_figure(qset: str, scenario: str, kind: str, tech: str) -> tuple[float | None, str | None]:
    if qset != DQA_SET:  # the paper's figures are on DQA's questions
        return None, None
    figure = paper.ACCURACY.get((scenario, kind), {}).get(tech)
    if figure is not None:
        return figure, f"PlanRAG Table 5 ({kind})"
    figure = paper.AVERAGE.get(scenario, {}).get(tech)
    if figure is not None:
        return figure, "PlanRAG Table 4 (RDB/GDB average)"
    return None, None


def paper_comparison(results: list[dict]) -> pd.DataFrame:
    """Accuracy per question set, scenario, database, technique, model and setting, with n (items that could not
    run count as not correct) and its 95% Wilson interval (clustered by question for repeated samples: see
    core.benchmark.epochs), beside the paper's figure, its n and its setting (the
    DQA set only: other sets' questions are not the paper's)."""
    import pandas as pd  # heavy: only the tables need it (a worker's or a command's runs never do)

    if not results:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    df = pd.DataFrame(results)
    df["set"] = [_set(r) for r in results]
    df["setting"] = [_setting(r) for r in results]
    df["kind"] = df["language"].map(KIND)
    rows = []
    for (qset, scenario, db, kind, tech, model, setting), g in df.groupby(
            ["set", "scenario", "db", "kind", "technique", "model", "setting"], sort=False):
        correct, n = int(g["correct"].fillna(False).astype(bool).sum()), len(g)
        low, high = wilson(correct, n)
        if "epoch" in g and g["epoch"].max() > 1:  # repeated samples: a question's are a cluster
            per = g.assign(right=g["correct"].fillna(False).astype(bool)).groupby("question")["right"]
            found = clustered(per.sum().astype(int).tolist(), per.size().tolist())
            low, high = found.low, found.high
        figure, source = _paper_figure(qset, scenario, kind, tech)
        rows.append({"set": qset, "scenario": scenario, "db": db, "kind": kind, "technique": tech, "model": model,
                     "setting": setting, "n": n, "correct": correct, "accuracy": round(100.0 * correct / n, 1),
                     "ci95_low": round(100 * low, 1), "ci95_high": round(100 * high, 1), "paper": figure,
                     "paper_n": PAPER_N.get(scenario) if figure is not None else None, "paper_source": source,
                     "paper_setting": PAPER_SETTING if figure is not None else None})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS).astype({"paper_n": "Int64"})


def planner_cost(results: list[dict]) -> pd.DataFrame:
    """REAPER beside IterRAG: calls per question, the plan call's latency (REAPER's first call; IterRAG's first
    call for comparison), the mean latency of a call and the LLM time per question."""
    import pandas as pd  # heavy: see paper_comparison

    rows = []
    chosen = [r for r in results if r["technique"] in REAPER_PAPER]
    groups: dict[tuple, list[dict]] = {}
    for r in chosen:
        groups.setdefault((_set(r), r["scenario"], r["db"], r["technique"], r["model"], _setting(r)), []).append(r)
    for (qset, scenario, db, tech, model, setting), group in sorted(groups.items()):
        latencies = [r.get("call_latencies_s") or [] for r in group]
        calls = [len(lat) if lat else r.get("llm_calls", 0) for r, lat in zip(group, latencies, strict=True)]
        first = [lat[0] for lat in latencies if lat]
        every = [x for lat in latencies for x in lat]
        rows.append({"set": qset, "scenario": scenario, "db": db, "technique": tech, "model": model,
                     "setting": setting, "questions": len(group),
                     "calls_per_question": round(sum(calls) / len(group), 2),
                     "plan_call_latency_s": round(sum(first) / len(first), 3) if first else None,
                     "latency_per_call_s": round(sum(every) / len(every), 3) if every else None,
                     "llm_time_per_question_s": round(sum(every) / len(group), 3) if every else None,
                     "paper_latency_s": REAPER_PAPER[tech][0], "paper_setting": REAPER_PAPER[tech][1]})
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def summary_lines(results: list[dict]) -> list[str]:
    """The comparison with the paper (none without results) and REAPER's cost (only when REAPER ran), for the
    command line."""
    import pandas as pd  # heavy: see paper_comparison

    compared = paper_comparison(results)
    lines = ["setting beside the paper's figure:"] if not compared.empty else []
    for r in compared.itertuples():
        versus = (f"paper {r.paper} of n={r.paper_n:g} ({r.paper_source}; {r.paper_setting})" if pd.notna(r.paper)
                  else "no paper figure" + ("" if r.set == DQA_SET else f" (set {r.set}: not the paper's questions)"))
        lines.append(f"  {r.scenario:<9} {r.db:<8} {r.technique:<13} {r.setting:<17} {r.accuracy:.1f}% "
                     f"[{r.ci95_low:.1f}–{r.ci95_high:.1f}], n={r.n}  vs {versus}")
    cost = planner_cost(results)
    if not cost.empty and any(TECHNIQUES[t].planner for t in cost["technique"] if t in TECHNIQUES):
        lines.append("REAPER's plan call beside IterRAG (per question):")
        for r in cost.itertuples():
            plan = "-" if pd.isna(r.plan_call_latency_s) else f"{r.plan_call_latency_s:.2f} s"
            time = "-" if pd.isna(r.llm_time_per_question_s) else f"{r.llm_time_per_question_s:.2f} s"
            lines.append(f"  {r.scenario:<9} {r.db:<8} {r.technique:<8} {r.setting:<17} {r.calls_per_question:g} "
                         f"calls, first call {plan}, LLM time {time} (n={r.questions}; paper "
                         f"{r.paper_latency_s:g} s, {r.paper_setting})")
    return lines


def export(results: list[dict], directory: str | Path) -> list[Path]:
    """Write paper_comparison.csv and planner_cost.csv to ``directory``; the files written."""
    from core.analysis.spreadsheet import csv_text  # heavy: pandas, see paper_comparison

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in (("paper_comparison", paper_comparison(results)), ("planner_cost", planner_cost(results))):
        path = directory / f"{name}.csv"
        write_atomic(path, csv_text(frame))
        written.append(path)
    return written
