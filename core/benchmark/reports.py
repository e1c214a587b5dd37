"""The paper's tables from a benchmark's results (the dicts core.benchmark.runner stores), as pandas DataFrames,
with the paper's GPT-4 figures beside; and their export to CSV and JSON.

- accuracy / paper_layout: per scenario x database x technique (Tables 4-5; SQL databases are RDB, graph GDB);
- retrieval_split: single- vs multi-retrieval questions (Figure 5), split by each run's own retrievals and, where
  the results have IterRAG on the same question and database, by IterRAG's (as the paper does);
- replans: re-plan count buckets and their accuracy (Table 7), for the techniques that re-plan;
- missed: rate of missed critical values (Table 6);
- failures: failure categories of the wrong answers (Figure 6), as rates over all pairs;
- regret: how far the wrong picks fall behind the best decision in the simulator's ranking;
- costs: LLM calls, tokens, cost, latency and framework overhead per question.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from core.agents.techniques import TECHNIQUES
from core.backends.registry import BACKENDS
from core.benchmark import paper
from core.benchmark.failures import PRECEDENCE, UNCLASSIFIED
from core.benchmark.prices import cost
from core.benchmark.trace import CRITICAL
from core.scenario import SCENARIOS

KIND = {"sql": "RDB", "cypher": "GDB"}
GROUP = ["scenario", "technique", "model"]
REPLAN_BUCKETS = ("0", "1", "2", "3", "4+")


def _order(name: str, known) -> tuple:
    names = list(known)
    return (names.index(name), "") if name in names else (len(names), name)


def _frame(results: list[dict]) -> pd.DataFrame:
    """The results in the paper's order (scenario, database, technique as registered; then question)."""
    df = pd.DataFrame(sorted(results, key=lambda r: (_order(r["scenario"], SCENARIOS), _order(r["db"], BACKENDS),
                                                     _order(r["technique"], TECHNIQUES), r["model"], r["question"])))
    if df.empty:
        return df
    df["kind"] = df["language"].map(KIND)
    df["right"] = df["correct"].fillna(False).astype(bool)
    return df


def _pct(part, whole):
    return round(100.0 * part / whole, 1) if whole else None


def accuracy(results: list[dict]) -> pd.DataFrame:
    """correct, total and accuracy % per scenario, database, technique and model; the paper's figure beside."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (scenario, db, kind, tech, model), g in df.groupby(["scenario", "db", "kind", "technique", "model"], sort=False):
        rows.append({"scenario": scenario, "db": db, "kind": kind, "technique": tech, "model": model,
                     "correct": int(g["right"].sum()), "total": len(g), "accuracy": _pct(g["right"].sum(), len(g)),
                     "paper": paper.ACCURACY.get((scenario, kind), {}).get(tech)})
    return pd.DataFrame(rows)


def paper_layout(results: list[dict]) -> pd.DataFrame:
    """Tables 4-5 side by side: a row per technique (and model), accuracy % per scenario and database, their
    average (Table 4) and the paper's figures in the columns marked ``paper``."""
    acc = accuracy(results)
    if acc.empty:
        return acc
    rows = []
    for (tech, model), g in acc.groupby(["technique", "model"], sort=False):
        row = {"technique": tech, "model": model}
        for scenario, s in g.groupby("scenario", sort=False):
            for r in s.itertuples():
                row[f"{scenario} {r.kind} {r.db}"] = r.accuracy
                row[f"{scenario} {r.kind} paper"] = r.paper
            row[f"{scenario} average"] = round(s["accuracy"].mean(), 1)
            row[f"{scenario} average paper"] = paper.AVERAGE.get(scenario, {}).get(tech)
        rows.append(row)
    return pd.DataFrame(rows)


def retrieval_split(results: list[dict]) -> pd.DataFrame:
    """Accuracy on single-retrieval (SR: one database query) and multi-retrieval (MR) questions, and on those
    answered with no query (none): by each run's own queries (basis ``own``) and, for the other techniques on
    the pairs IterRAG also ran, by IterRAG's queries (basis ``IterRAG``, the paper's split)."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    iterrag = {(r.model, r.scenario, r.question, r.db): r.retrievals
               for r in df[df["technique"] == "iterrag"].itertuples()}
    theirs = df[df["technique"] != "iterrag"]
    theirs = theirs.assign(n=[iterrag.get((r.model, r.scenario, r.question, r.db)) for r in theirs.itertuples()])
    data = pd.concat([df.assign(basis="own", n=df["retrievals"]), theirs.dropna(subset=["n"]).assign(basis="IterRAG")])
    data["split"] = ["none" if n == 0 else "SR" if n == 1 else "MR" for n in data["n"]]
    rows = []
    for (scenario, tech, model, basis), g in data.groupby(GROUP + ["basis"], sort=False):
        for split in ("SR", "MR", "none"):
            s = g[g["split"] == split]
            if split == "none" and s.empty:
                continue
            published = paper.RETRIEVAL_SPLIT.get((scenario, split), {})
            rows.append({"scenario": scenario, "technique": tech, "model": model, "basis": basis, "split": split,
                         "pairs": len(s), "share": _pct(len(s), len(g)), "correct": int(s["right"].sum()),
                         "accuracy": _pct(s["right"].sum(), len(s)), "paper share": published.get("share"),
                         "paper": published.get(tech)})
    return pd.DataFrame(rows)


def replans(results: list[dict]) -> pd.DataFrame:
    """Pairs and accuracy by number of re-plans (0, 1, 2, 3, 4+), for the techniques that re-plan."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    df = df[[getattr(TECHNIQUES.get(t), "replans", False) for t in df["technique"]]]
    df = df.assign(bucket=[REPLAN_BUCKETS[min(n, 4)] for n in df["replans"]])
    rows = []
    for (scenario, tech, model), g in df.groupby(GROUP, sort=False):
        for bucket in REPLAN_BUCKETS:
            s = g[g["bucket"] == bucket]
            pairs, acc = paper.REPLANS.get(scenario, {}).get(bucket, (None, None))
            rows.append({"scenario": scenario, "technique": tech, "model": model, "replans": bucket,
                         "pairs": len(s), "share": _pct(len(s), len(g)), "accuracy": _pct(s["right"].sum(), len(s)),
                         "paper pairs": pairs if tech == "planrag" else None,
                         "paper accuracy": acc if tech == "planrag" else None})
    return pd.DataFrame(rows)


def missed(results: list[dict]) -> pd.DataFrame:
    """Rate % of pairs whose run never queried a critical value (Table 6), and how often each was missed."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (scenario, tech, model), g in df.groupby(GROUP, sort=False):
        gaps = g["missed"].map(len) > 0
        by_value = ", ".join(f"{name} {sum(name in m for m in g['missed'])}" for name in CRITICAL[scenario])
        rows.append({"scenario": scenario, "technique": tech, "model": model, "pairs": len(g),
                     "missed": int(gaps.sum()), "rate": _pct(gaps.sum(), len(g)), "by value": by_value,
                     "paper rate": paper.MISSED.get(scenario, {}).get(tech)})
    return pd.DataFrame(rows)


def failures(results: list[dict]) -> pd.DataFrame:
    """Wrong answers by failure category (count, and rate % over all pairs as in Figure 6)."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (scenario, tech, model), g in df.groupby(GROUP, sort=False):
        row = {"scenario": scenario, "technique": tech, "model": model, "pairs": len(g),
               "wrong": int((g["correct"] == False).sum())}  # noqa: E712 - None (unlabelled) is not wrong
        for category in PRECEDENCE + (UNCLASSIFIED,):
            n = int((g["failure"] == category).sum())
            row[category] = n
            row[f"{category} rate"] = _pct(n, len(g))
        rows.append(row)
    return pd.DataFrame(rows)


def regret(results: list[dict]) -> pd.DataFrame:
    """The wrong picks that are candidates: their regret against the best decision (score units) and relative
    regret (% of the best score)."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (scenario, tech, model), g in df[df["correct"] == False].groupby(GROUP, sort=False):  # noqa: E712
        w = g[g["regret"].notna()]
        rows.append({"scenario": scenario, "technique": tech, "model": model, "wrong": len(g), "ranked": len(w),
                     "mean regret": _round(w["regret"].mean()), "median regret": _round(w["regret"].median()),
                     "mean relative regret %": _round(w["relative_regret"].mean()),
                     "median rank": _round(w["rank"].median())})
    return pd.DataFrame(rows)


def _round(value, digits: int = 3):
    return None if pd.isna(value) else round(float(value), digits)


def costs(results: list[dict], prices: dict[str, list[float]]) -> pd.DataFrame:
    """Per scenario, database, technique and model, per question on average: LLM calls (and the share served
    from the cache), tokens, cost (USD at list price for all the tokens, cached replies included; None without a
    price), LLM latency, wall time, framework overhead per agent step and the time to get a question ready."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame()
    df["cost"] = [cost(r.model, r.prompt_tokens, r.completion_tokens, prices) for r in df.itertuples()]
    rows = []
    for (scenario, db, tech, model), g in df.groupby(["scenario", "db", "technique", "model"], sort=False):
        calls = g["llm_calls"].sum()
        priced = g["cost"].notna().all()
        rows.append({"scenario": scenario, "db": db, "technique": tech, "model": model, "pairs": len(g),
                     "llm calls": _round(g["llm_calls"].mean(), 2), "cached %": _pct(g["cached_calls"].sum(), calls),
                     "prompt tokens": _round(g["prompt_tokens"].mean(), 0),
                     "completion tokens": _round(g["completion_tokens"].mean(), 0),
                     "tokens estimated": bool(g["tokens_estimated"].any()),
                     "cost USD": _round(g["cost"].sum(), 4) if priced else None,
                     "cost per question USD": _round(g["cost"].mean(), 5) if priced else None,
                     "llm latency s": _round(g["llm_latency_s"].mean()), "wall s": _round(g["wall_s"].mean()),
                     "overhead ms per step": _round(1000 * g["overhead_s"].sum() / max(calls, 1), 2),
                     "ready s max": _round(g["ready_s"].max())})
    return pd.DataFrame(rows)


ITEM_COLUMNS = ["scenario", "question", "db", "technique", "model", "status", "decision", "label", "correct",
                "failure", "retrievals", "replans", "missed", "query_errors", "format_corrections", "rank", "regret",
                "relative_regret", "llm_calls", "cached_calls", "prompt_tokens", "completion_tokens", "llm_latency_s",
                "wall_s", "run_id", "final_answer", "error"]


def items(results: list[dict]) -> pd.DataFrame:
    """One row per question-database pair, for browsing and export."""
    df = _frame(results)
    return df[[c for c in ITEM_COLUMNS if c in df]] if not df.empty else df


def tables(results: list[dict], prices: dict[str, list[float]]) -> dict[str, pd.DataFrame]:
    """Every report, by name."""
    return {"accuracy": accuracy(results), "paper_layout": paper_layout(results),
            "retrieval_split": retrieval_split(results), "replans": replans(results), "missed": missed(results),
            "failures": failures(results), "regret": regret(results), "costs": costs(results, prices),
            "items": items(results)}


def export(results: list[dict], prices: dict[str, list[float]], directory: str | Path) -> list[Path]:
    """Write each report as ``NAME.csv`` and all of them as ``report.json`` into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written, everything = [], {}
    for name, df in tables(results, prices).items():
        path = directory / f"{name}.csv"
        df.to_csv(path, index=False)
        written.append(path)
        everything[name] = json.loads(df.to_json(orient="records"))
    path = directory / "report.json"
    path.write_text(json.dumps(everything, indent=1), encoding="utf-8")
    return written + [path]
