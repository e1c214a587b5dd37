"""The paper's tables from a benchmark's results (the dicts core.benchmark.runner stores), as pandas DataFrames,
with the paper's GPT-4 figures beside; and their export to CSV and JSON.

- accuracy / paper_layout: per scenario x database x technique (Tables 4-5; SQL databases are RDB, graph GDB),
  with n and a 95% Wilson interval; items that could not run (``status`` "error", from
  core.benchmark.results.read_errors) count in n as not correct, in their own column; beside it the
  optimal-decision rate (regret 0 by the simulator: a pick tied with the best counts) and the mean regret;
- paired: each pair of techniques on the same items (both / only A / only B / neither right, exact McNemar
  p-value, accuracy difference with Newcombe's 95% interval);
- undecided: the answers graded ambiguous or deciding nothing, listed apart;
- retrieval_split: single- vs multi-retrieval questions (Figure 5), split by each run's own retrievals and, where
  the results have IterRAG on the same question and database, by IterRAG's (as the paper does);
- replans: re-plan count buckets and their accuracy (Table 7), for the techniques that re-plan;
- missed: rate of pairs that did not see every value deciding the question, by the simulator (Table 6,
  measured; the keyword heuristic beside, labelled);
- failures: failure categories of the wrong answers (Figure 6), as rates over all pairs;
- regret: how far the wrong picks fall behind the best decision in the simulator's ranking;
- costs: LLM calls, tokens, cost, latency and framework overhead per question;
- not_run: the items that could not run (network, auth, server failures past their retries), with what happened.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pandas as pd

from core.model.technique import TECHNIQUES
from core.backends.registry import BACKENDS
from core.benchmark import paper
from core.benchmark.failures import PRECEDENCE, UNCLASSIFIED
from core.llm.prices import cost
from core.benchmark.stats import paired as paired_stats
from core.benchmark.stats import wilson
from core.benchmark.epochs import agreement, clustered, paired_rates
from core.analysis.summary import technique_label
from core.benchmark.trace import CRITICAL
from core.config.files import write_atomic
from core.analysis.grading import paper_rule, rank_text
from core import scenarios
from core.scenarios import ByScenario
from core.scenarios.dqa.source import DQA_SET
from core.config.secrets import scrub
from core.analysis.spreadsheet import csv_text

#: The technique whose queries split the others' questions in the paper's Figure 5 (``retrieval_baseline``).
BASELINE = next(t.name for t in TECHNIQUES.values() if t.retrieval_baseline)

KIND = {"sql": "RDB", "cypher": "GDB"}
GROUP = ["source", "scenario", "technique", "model"]
REPLAN_BUCKETS = ("0", "1", "2", "3", "4+")


def _order(name: str, known) -> tuple:
    names = list(known)
    return (names.index(name), "") if name in names else (len(names), name)


def _frame(results: list[dict]) -> pd.DataFrame:
    """The results in the paper's order (scenario, database, technique as registered; then question)."""
    registered = scenarios.names(), list(BACKENDS), list(TECHNIQUES)  # once, not per result (a registry look-up)
    df = pd.DataFrame(sorted(results, key=lambda r: (r.get("source", "dqa") != "dqa",
                                                     _order(r["scenario"], registered[0]),
                                                     _order(r["db"], registered[1]),
                                                     _order(r["technique"], registered[2]),
                                                     r["model"], r["question"])))
    if df.empty:
        return df
    for column, default in (("source", "dqa"), ("status", "finished"), ("grade_status", None), ("optimal", None),
                            ("all_tied", False), ("overridden", False), ("regret", None), ("language", None),
                            ("final_answer", None), ("label", None), ("epoch", 1), ("unconsulted", False),
                            ("failure", None)):
        if column not in df:
            df[column] = default
    df["source"] = df["source"].fillna("dqa")
    df["language"] = [lang if isinstance(lang, str) else language_of(db) for lang, db in zip(df["language"], df["db"])]
    if "set" not in df:  # results from before sets had names
        df["set"] = None
    df["set"] = [qset if isinstance(qset, str) else DQA_SET if source == "dqa" else source
                 for qset, source in zip(df["set"], df["source"])]
    df["kind"] = df["language"].map(KIND)
    df["right"] = df["correct"].fillna(False).astype(bool)
    df["errored"] = df["status"] == "error"
    df["optimal"] = [bool(o) if isinstance(o, bool) else (r == 0 if pd.notna(r) else False)
                     for o, r in zip(df["optimal"], df["regret"])]
    df["overridden"] = df["overridden"].fillna(False).astype(bool)
    df["all_tied"] = df["all_tied"].fillna(False).astype(bool)
    df["unconsulted"] = df["unconsulted"].fillna(False).astype(bool)
    df["epoch"] = df["epoch"].fillna(1).astype(int)
    return df


def _label(value):
    """A label as stored (a name or an id; a float where pandas mixed ids with gaps), None for a gap."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _epoched(df: pd.DataFrame) -> bool:
    """Whether the results hold repeated samples (epochs after the first): the reports then gain their figures."""
    return not df.empty and int(df["epoch"].max()) > 1


def _ran(df: pd.DataFrame) -> pd.DataFrame:
    """The items that ran (those that could not run have no trace to analyse)."""
    return df[~df["errored"]] if not df.empty else df


def language_of(db: str) -> str | None:
    """The query language of a backend (sql or cypher), None for one this version does not know."""
    return BACKENDS[db][0] if db in BACKENDS else None


def _pct(part, whole):
    return round(100.0 * part / whole, 1) if whole else None


def _interval(k: int, n: int) -> tuple[float | None, float | None]:
    if not n:
        return None, None
    low, high = wilson(int(k), int(n))
    return round(100 * low, 1), round(100 * high, 1)


#: The columns of accuracy.csv (also when there is no result yet: a header, never an empty file).
ACCURACY_COLUMNS = ["set", "source", "scenario", "db", "kind", "technique", "model", "n", "correct", "errors", "total",
                    "accuracy", "ci95_low", "ci95_high", "answered", "answered accuracy", "optimal", "optimal rate",
                    "optimal ci95_low", "optimal ci95_high", "undecided", "overridden", "all tied", "mean regret",
                    "stuck", "unconsulted", "paper", "paper rule accuracy"]
#: The columns accuracy.csv gains when the results hold repeated samples (epochs): n is then the samples.
EPOCH_COLUMNS = ["questions", "epochs", "samples", "design effect", "agreement", "all right %", "some right %",
                 "none right %"]
#: The columns of regret.csv (also when no pick was wrong).
REGRET_COLUMNS = ["source", "scenario", "technique", "model", "wrong", "ranked", "mean regret", "median regret",
                  "mean relative regret %", "median rank"]


def accuracy(results: list[dict]) -> pd.DataFrame:
    """The accuracy table, per question set, source, scenario, database, technique and model: n (items that could not
    run included), correct, errors, label accuracy and optimal-decision rate with 95% Wilson intervals, answered-only
    accuracy, undecided, overridden and all-tied answers, mean regret, stuck and unconsulted runs; and the paper's
    figure (DQA only)."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame(columns=ACCURACY_COLUMNS)
    rows = []
    epoched = _epoched(df)
    keys = ["set", "source", "scenario", "db", "kind", "technique", "model"]
    for (qset, source, scenario, db, kind, tech, model), g in df.groupby(keys, sort=False, dropna=False):
        n, right, optimal = len(g), int(g["right"].sum()), int(g["optimal"].sum())
        errors = int(g["errored"].sum())
        answered = n - errors
        low, high = _interval(right, n)
        o_low, o_high = _interval(optimal, n)
        repeated = {}
        if epoched:  # the samples of a question are a cluster: the intervals and the figures of repeats
            repeated, (low, high), (o_low, o_high) = _repeats(g)
        regrets = g["regret"].dropna()
        rows.append({"set": qset, "source": source, "scenario": scenario, "db": db, "kind": kind, "technique": tech,
                     "model": model, "n": n, "correct": right, "errors": errors, "total": n,
                     "accuracy": _pct(right, n), "ci95_low": low, "ci95_high": high,
                     "answered": answered, "answered accuracy": _pct(right, answered),
                     "optimal": optimal, "optimal rate": _pct(optimal, n), "optimal ci95_low": o_low,
                     "optimal ci95_high": o_high,
                     "undecided": int(g["grade_status"].isin(["ambiguous", "none"]).sum()),
                     "overridden": int(g["overridden"].sum()), "all tied": int(g["all_tied"].sum()),
                     "mean regret": _round(regrets.mean()) if len(regrets) else None,
                     "stuck": int((g["status"] == "stuck").sum()), "unconsulted": int(g["unconsulted"].sum()),
                     "paper": paper.ACCURACY.get((scenario, kind), {}).get(tech) if qset == DQA_SET else None,
                     # the authors' rule (the label appears in the answer), for a like-for-like look at "paper"
                     "paper rule accuracy": _pct(sum(bool(paper_rule(a, _label(lab))) for a, lab in
                                                     zip(g["final_answer"], g["label"])), n),
                     **repeated})
    return pd.DataFrame(rows, columns=ACCURACY_COLUMNS + (EPOCH_COLUMNS if epoched else []))


def _repeats(g: pd.DataFrame) -> tuple[dict, tuple, tuple]:
    """The repeated-sample figures of one group (EPOCH_COLUMNS), and the clustered 95% intervals (percent) of its
    label accuracy and optimal-decision rate (core.benchmark.epochs)."""
    per = g.groupby("question", sort=False)
    samples = per.size().tolist()
    right = per["right"].sum().astype(int).tolist()
    label = clustered(right, samples)
    best = clustered(per["optimal"].sum().astype(int).tolist(), samples)
    decisions = [[d if isinstance(d, (str, int)) else None for d in q["decision"]] if "decision" in q else []
                 for _, q in per]
    agreements = [a for a in map(agreement, decisions) if a is not None]
    questions = len(samples)
    figures = {"questions": questions, "epochs": max(samples), "samples": sum(samples),
               "design effect": round(label.deff, 2),
               "agreement": _pct(sum(agreements), len(agreements)) if agreements else None,
               "all right %": _pct(sum(r == m for r, m in zip(right, samples)), questions),
               "some right %": _pct(sum(0 < r < m for r, m in zip(right, samples)), questions),
               "none right %": _pct(sum(r == 0 for r in right), questions)}
    return figures, _percent(label), _percent(best)


def _percent(c) -> tuple[float, float]:
    return round(100 * c.low, 1), round(100 * c.high, 1)


#: The paper's number of questions per scenario (each on RDB and on GDB), for the interval of its figures.
PAPER_N = ByScenario("paper_n")


def bar_data(acc: pd.DataFrame) -> pd.DataFrame:
    """Long data for bars with intervals: per scenario, technique and series (a database, or ``paper RDB`` /
    ``paper GDB``), the label accuracy and the optimal-decision rate (metric), value %, its 95% Wilson interval
    (low, high; plus and minus from the value) and n as text. The paper's intervals come from its n."""
    rows = []
    for r in acc.to_dict("records"):
        for metric, value, low, high in (("label accuracy", r["accuracy"], r["ci95_low"], r["ci95_high"]),
                                         ("optimal decisions", r["optimal rate"], r["optimal ci95_low"],
                                          r["optimal ci95_high"])):
            repeats = f" ({r['questions']}×{int(r['epochs'])})" if r.get("epochs", 1) > 1 else ""
            rows.append({"scenario": r["scenario"], "technique": r["technique"], "series": r["db"], "metric": metric,
                         "value": value, "low": low, "high": high, "n": f"n={r['n']}{repeats}"})
    if "paper" in acc:
        for r in acc.dropna(subset=["paper"]).drop_duplicates(["scenario", "technique", "kind"]).to_dict("records"):
            n = PAPER_N[r["scenario"]]
            low, high = _interval(round(r["paper"] * n / 100), n)
            rows.append({"scenario": r["scenario"], "technique": r["technique"], "series": f"paper {r['kind']}",
                         "metric": "label accuracy", "value": r["paper"], "low": low, "high": high, "n": f"n={n}"})
    data = pd.DataFrame(rows)
    if not data.empty:
        data["plus"], data["minus"] = data["high"] - data["value"], data["value"] - data["low"]
    return data


def accuracy_text(row) -> str:
    """An accuracy as shown everywhere: ``62.5% [40.9–80.0], n=24`` (row: an ``accuracy`` row or its dict); with
    repeated samples ``..., n=60 samples of 20 questions × 3 epochs (clustered interval)``."""
    get = row.get if isinstance(row, dict) else lambda k: getattr(row, k, None)
    if not get("n"):
        return "–"
    text = f"{get('accuracy'):.1f}% [{get('ci95_low'):.1f}–{get('ci95_high'):.1f}], n={get('n')}"
    epochs = get("epochs")
    if epochs is not None and epochs == epochs and epochs > 1:
        text += f" samples of {get('questions')} questions × {int(epochs)} epochs (clustered interval)"
    return text


def _rates(df: pd.DataFrame) -> dict:
    """Question -> (right samples, samples) in ``df`` (one aggregation: a group per question is slow)."""
    per = df.groupby("question", sort=False)["right"].agg(["sum", "size"])
    return dict(zip(per.index.tolist(), zip(per["sum"].astype(int).tolist(), per["size"].tolist())))


def paired(results: list[dict]) -> pd.DataFrame:
    """Each pair of techniques (a, b, in the registered order) run on the same questions with the same source,
    scenario, database and model: the questions both got right, only a, only b, neither (an item that could not
    run is not right), the exact McNemar p-value, a's accuracy minus b's in percentage points with its 95%
    interval (Newcombe), and whether the difference is significant at 5%."""
    df = _frame(results)
    if df.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    rows = []
    epoched = _epoched(df)
    for (source, scenario, db, model), g in df.groupby(["source", "scenario", "db", "model"], sort=False):
        rates = {t: _rates(by) for t, by in g.groupby("technique", sort=False)}
        techniques = list(rates)
        for i, a in enumerate(techniques):
            for b in techniques[i + 1:]:
                common = sorted(set(rates[a]) & set(rates[b]))
                if not common:
                    continue
                row = {"source": source, "scenario": scenario, "db": db, "model": model, "a": a, "b": b}
                epochs = max(rates[t][q][1] for t in (a, b) for q in common)
                if epochs > 1:
                    row.update(_paired_rates(rates[a], rates[b], common), epochs=epochs)
                else:
                    p = paired_stats([rates[a][q][0] == 1 for q in common], [rates[b][q][0] == 1 for q in common])
                    row.update({"n": p.n, "both": p.both, "only_a": p.only_a, "only_b": p.only_b,
                                "neither": p.neither, "p_value": round(p.p_value, 4), "diff": round(100 * p.diff, 1),
                                "diff_ci95_low": round(100 * p.low, 1), "diff_ci95_high": round(100 * p.high, 1),
                                "significant": p.significant, "method": MCNEMAR, "epochs": 1})
                rows.append(row)
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS + (PAIRED_EPOCH_COLUMNS if epoched else []))


MCNEMAR = "exact McNemar"
SIGN_FLIP = "sign-flip permutation on per-question rates"
#: The columns paired.csv gains when the results hold repeated samples; with more than one epoch, only_a and only_b
#: are the questions where a's (b's) rate of right samples is higher, equal those where the rates are equal, both and
#: neither are empty, p_value is the exact sign-flip permutation test's and the interval a t interval.
PAIRED_EPOCH_COLUMNS = ["method", "epochs", "equal"]


def _paired_rates(a: dict, b: dict, common: list) -> dict:
    """The paired comparison of two techniques' per-question rates (right, samples) on the common questions."""
    p = paired_rates([Fraction(*a[q]) for q in common], [Fraction(*b[q]) for q in common])
    return {"n": p.n, "both": None, "only_a": p.a_higher, "only_b": p.b_higher, "neither": None, "equal": p.equal,
            "p_value": round(p.p_value, 4), "diff": round(100 * p.diff, 1), "diff_ci95_low": round(100 * p.low, 1),
            "diff_ci95_high": round(100 * p.high, 1), "significant": p.significant, "method": SIGN_FLIP}


PAIRED_COLUMNS = ["source", "scenario", "db", "model", "a", "b", "n", "both", "only_a", "only_b", "neither", "p_value",
                  "diff", "diff_ci95_low", "diff_ci95_high", "significant"]


def paired_text(row) -> str:
    """A paired comparison in words: which technique did better, by how much, and whether that is significant."""
    get = row.get if isinstance(row, dict) else lambda k: getattr(row, k)
    a, b = technique_name(get("a")), technique_name(get("b"))
    verdict = ("significant" if get("significant") else "not significant: the data cannot tell them apart")
    epochs = get("epochs") if "epochs" in (row if isinstance(row, dict) else row._fields) else None
    if epochs is not None and epochs == epochs and epochs > 1:
        return (f"{a} − {b}: {get('diff'):+.1f} points [{get('diff_ci95_low'):+.1f}, {get('diff_ci95_high'):+.1f}] "
                f"in the per-question rate of right samples, on n={get('n')} paired questions × {int(epochs)} epochs "
                f"({a}'s rate higher on {get('only_a')}, {b}'s on {get('only_b')}, equal on {int(get('equal'))}); "
                f"exact sign-flip permutation test p={get('p_value'):.3g}, {verdict}")
    return (f"{a} − {b}: {get('diff'):+.1f} points [{get('diff_ci95_low'):+.1f}, {get('diff_ci95_high'):+.1f}] on "
            f"n={get('n')} paired questions (only {a} right {get('only_a')}, only {b} right {get('only_b')}); exact "
            f"McNemar p={get('p_value'):.3g}, {verdict}")


def technique_name(name: str) -> str:
    return technique_label(name)


def undecided(results: list[dict]) -> pd.DataFrame:
    """The answers graded ambiguous or deciding nothing (they count as not correct), with the grader's reason."""
    df = _frame(results)
    columns = ["source", "scenario", "question", "db", "technique", "model", "grade_status", "grade_reason",
               "final_answer", "run_id"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    df = df[df["grade_status"].isin(["ambiguous", "none"])]
    return df[[c for c in columns if c in df]].reset_index(drop=True)


def paper_layout(results: list[dict]) -> pd.DataFrame:
    """Tables 4-5 side by side: a row per technique (and model), accuracy % per scenario and database, their
    average (Table 4) and, for the scenarios the paper ran, its figures in the columns marked ``paper``."""
    acc = accuracy(results)
    if acc.empty:
        return acc
    rows = []
    for (qset, source, tech, model), g in acc.groupby(["set", "source", "technique", "model"], sort=False):
        row = {"set": qset, "source": source, "technique": tech, "model": model}
        for scenario, s in g.groupby("scenario", sort=False):
            in_paper = PAPER_N.get(scenario) is not None  # a scenario the paper ran (no paper column otherwise)
            for r in s.to_dict("records"):
                cell = f"{scenario} {r['kind']} {r['db']}"
                row[cell] = r["accuracy"]
                row[f"{cell} 95% CI, n"] = f"{r['ci95_low']:.1f}–{r['ci95_high']:.1f}, n={r['n']}" + (
                    f" ({r['questions']} questions × {int(r['epochs'])})" if r.get("epochs", 1) > 1 else "")
                row[f"{cell} optimal"] = r["optimal rate"]
                if in_paper:
                    row[f"{scenario} {r['kind']} paper"] = r["paper"]
            row[f"{scenario} average"] = round(s["accuracy"].mean(), 1)
            if in_paper:
                row[f"{scenario} average paper"] = (paper.AVERAGE.get(scenario, {}).get(tech) if qset == DQA_SET
                                                    else None)
        rows.append(row)
    return pd.DataFrame(rows)


def retrieval_split(results: list[dict]) -> pd.DataFrame:
    """Accuracy on single-retrieval (SR: one database query) and multi-retrieval (MR) questions, and on those
    answered with no query (none): by each run's own queries (basis ``own``) and, for the other techniques on
    the pairs IterRAG also ran, by IterRAG's queries (basis ``IterRAG``, the paper's split)."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame()
    baseline = TECHNIQUES[BASELINE]
    base = {(r.source, r.model, r.scenario, r.question, r.db): r.retrievals
            for r in df[df["technique"] == baseline.name].itertuples()}
    theirs = df[df["technique"] != baseline.name]
    theirs = theirs.assign(n=[base.get((r.source, r.model, r.scenario, r.question, r.db))
                              for r in theirs.itertuples()])
    data = pd.concat([df.assign(basis="own", n=df["retrievals"]),
                      theirs.dropna(subset=["n"]).assign(basis=baseline.label)])
    data["split"] = ["none" if n == 0 else "SR" if n == 1 else "MR" for n in data["n"]]
    rows = []
    for (source, scenario, tech, model, basis), g in data.groupby(GROUP + ["basis"], sort=False):
        for split in ("SR", "MR", "none"):
            s = g[g["split"] == split]
            if split == "none" and s.empty:
                continue
            published = paper.RETRIEVAL_SPLIT.get((scenario, split), {}) if source == "dqa" else {}
            rows.append({"source": source, "scenario": scenario, "technique": tech, "model": model, "basis": basis,
                         "split": split, "pairs": len(s), "share": _pct(len(s), len(g)),
                         "correct": int(s["right"].sum()),
                         "accuracy": _pct(s["right"].sum(), len(s)),
                         **dict(zip(("ci95_low", "ci95_high"), _interval(s["right"].sum(), len(s)))),
                         "paper share": published.get("share"),
                         "paper": published.get(tech)})
    return pd.DataFrame(rows)


def replans(results: list[dict]) -> pd.DataFrame:
    """Pairs and accuracy by number of re-plans (0, 1, 2, 3, 4+), for the techniques that re-plan."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame()
    df = df[[getattr(TECHNIQUES.get(t), "replans", False) for t in df["technique"]]]
    df = df.assign(bucket=[REPLAN_BUCKETS[min(int(n), 4)] for n in df["replans"]])
    rows = []
    for (source, scenario, tech, model), g in df.groupby(GROUP, sort=False):
        for bucket in REPLAN_BUCKETS:
            s = g[g["bucket"] == bucket]
            published = paper.REPLANS.get(tech, {}).get(scenario, {}) if source == "dqa" else {}
            pairs, acc = published.get(bucket, (None, None))
            rows.append({"source": source, "scenario": scenario, "technique": tech, "model": model, "replans": bucket,
                         "pairs": len(s), "share": _pct(len(s), len(g)), "accuracy": _pct(s["right"].sum(), len(s)),
                         **dict(zip(("ci95_low", "ci95_high"), _interval(s["right"].sum(), len(s)))),
                         "paper pairs": pairs, "paper accuracy": acc})
    return pd.DataFrame(rows)


def missed(results: list[dict]) -> pd.DataFrame:
    """Missed data analysis (Table 6), measured: the pairs whose run did not see every value that decides the
    question (by the simulator; core.analysis.evidence), their rate %, the mean share of deciding values seen, and the
    values missed most; beside it the keyword heuristic (a critical column name never appeared in the queries or
    results), labelled as such, and the paper's rate."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame()
    if "evidence_total" not in df:
        df["evidence_total"], df["evidence_seen"], df["evidence_missing"] = None, None, None
    rows = []
    for (source, scenario, tech, model), g in df.groupby(GROUP, sort=False):
        measured = g[g["evidence_total"].notna() & (g["evidence_total"].fillna(0) > 0)]
        gaps = measured["evidence_seen"] < measured["evidence_total"]
        share = (measured["evidence_seen"] / measured["evidence_total"]).mean() if len(measured) else None
        counts: dict[str, int] = {}
        for missing in measured["evidence_missing"]:
            for label in missing or []:
                counts[label] = counts.get(label, 0) + 1
        top = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:5])
        keyword = g["missed"].map(lambda m: len(m) if isinstance(m, list) else 0) > 0
        by_value = ", ".join(f"{name} {sum(name in m for m in g['missed'] if isinstance(m, list))}"
                             for name in CRITICAL[scenario])
        rows.append({"source": source, "scenario": scenario, "technique": tech, "model": model, "pairs": len(g),
                     "measured pairs": len(measured), "missed": int(gaps.sum()) if len(measured) else None,
                     "rate": _pct(gaps.sum(), len(measured)), "mean coverage %": _round(100 * share, 1)
                     if share is not None else None, "most missed": top,
                     "heuristic missed": int(keyword.sum()), "heuristic rate": _pct(keyword.sum(), len(g)),
                     "heuristic by value": by_value,
                     "paper rate": paper.MISSED.get(scenario, {}).get(tech) if source == "dqa" else None})
    return pd.DataFrame(rows)


def failures(results: list[dict]) -> pd.DataFrame:
    """Wrong answers by failure category (count, and rate % over all pairs as in Figure 6), and ``heuristic``: the
    counts that rest on a heuristic (CAN always; MIS where the run has no evidence coverage, docs/evidence.md)."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame()
    if "evidence_total" not in df:
        df["evidence_total"] = None
    rows = []
    for (source, scenario, tech, model), g in df.groupby(GROUP, sort=False):
        row = {"source": source, "scenario": scenario, "technique": tech, "model": model, "pairs": len(g),
               "wrong": int(g["failure"].notna().sum())}  # wrong or not answered (unlabelled: neither)
        for category in PRECEDENCE + (UNCLASSIFIED,):
            n = int((g["failure"] == category).sum())
            row[category] = n
            row[f"{category} rate"] = _pct(n, len(g))
        guessed = int(((g["failure"] == "MIS") & ~(g["evidence_total"].fillna(0) > 0)).sum())
        row["heuristic"] = "CAN" + (f"; MIS of {guessed} (no evidence coverage)" if guessed else "")
        rows.append(row)
    return pd.DataFrame(rows)


def regret(results: list[dict]) -> pd.DataFrame:
    """The wrong picks that are candidates: their regret against the best decision (score units) and relative
    regret (% of the best score)."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame(columns=REGRET_COLUMNS)
    rows = []
    for (source, scenario, tech, model), g in df[df["failure"].notna()].groupby(GROUP, sort=False):
        w = g[g["regret"].notna()]
        rows.append({"source": source, "scenario": scenario, "technique": tech, "model": model, "wrong": len(g),
                     "ranked": len(w),
                     "mean regret": _round(w["regret"].mean()), "median regret": _round(w["regret"].median()),
                     "mean relative regret %": _round(w["relative_regret"].mean()),
                     "median rank": _round(w["rank"].median())})
    return pd.DataFrame(rows, columns=REGRET_COLUMNS)


def _round(value, digits: int = 3):
    return None if pd.isna(value) else round(float(value), digits)


def costs(results: list[dict], prices: dict[str, list[float]]) -> pd.DataFrame:
    """The cost table, per scenario, database, technique and model, per question on average: LLM calls (and the
    share cached), tokens, cost in USD at list price (None without a price), time waited for the model (cached
    replies apart), attempts per call, wall time, overhead per agent step and time to get a question ready."""
    df = _ran(_frame(results))
    if df.empty:
        return pd.DataFrame()
    for column in ("cached_latency_s", "llm_attempts"):  # results stored before these were recorded
        if column not in df:
            df[column] = None
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
                     "correct": int(g["right"].sum()),
                     "cost per correct USD": (_round(g["cost"].sum() / g["right"].sum(), 5)
                                              if priced and g["right"].sum() else None),
                     "llm latency s": _round(g["llm_latency_s"].mean()),
                     "cached latency s": _round(g["cached_latency_s"].mean()),
                     "attempts per call": _round(g["llm_attempts"].sum() / max(calls - g["cached_calls"].sum(), 1), 2)
                     if g["llm_attempts"].notna().all() else None,
                     "wall s": _round(g["wall_s"].mean()),
                     "overhead ms per step": _round(1000 * g["overhead_s"].sum() / max(calls, 1), 2),
                     "ready s max": _round(g["ready_s"].max())})
    return pd.DataFrame(rows)


ITEM_COLUMNS = ["set", "source", "scenario", "question", "db", "technique", "model", "status", "decision", "label",
                "correct", "grade_status", "grade_reason", "overridden", "override_by", "override_at", "optimal", "all_tied",
                "failure", "evidence_seen", "evidence_total", "evidence_missing", "retrievals", "replans", "missed",
                "query_errors", "format_corrections", "place", "rank", "tied", "candidates", "regret",
                "relative_regret", "error_kind", "llm_calls", "cached_calls", "prompt_tokens", "completion_tokens",
                "llm_latency_s", "cached_latency_s", "llm_attempts", "wall_s", "run_id", "final_answer", "error"]


#: The columns items.csv gains for voted results (core.benchmark.vote): the technique voted, the count of each decision,
#: the run ids of its samples and their decisions in epoch order.
VOTE_COLUMNS = ["vote_of", "votes", "samples", "sample_decisions"]


def items(results: list[dict]) -> pd.DataFrame:
    """One row per question-database pair, for browsing and export; ``place`` the pick's rank as pages show it
    (``tied 3rd–79th of 79``)."""
    df = _frame(results)
    if df.empty:
        return df
    if {"rank", "candidates"} <= set(df):
        tied = df["tied"] if "tied" in df else pd.Series(1, index=df.index)
        df["place"] = [rank_text(int(r), int(c), int(t) if pd.notna(t) else 1) if pd.notna(r) and pd.notna(c)
                       else None for r, c, t in zip(df["rank"], df["candidates"], tied)]
    columns = ITEM_COLUMNS[:4] + (["epoch"] if _epoched(df) else []) + ITEM_COLUMNS[4:]
    return df[[c for c in columns + VOTE_COLUMNS if c in df]]


def tables(results: list[dict], prices: dict[str, list[float]]) -> dict[str, pd.DataFrame]:
    """Every report, by name."""
    return {"accuracy": accuracy(results), "paired": paired(results), "undecided": undecided(results),
            "paper_layout": paper_layout(results),
            "retrieval_split": retrieval_split(results), "replans": replans(results), "missed": missed(results),
            "failures": failures(results), "regret": regret(results), "costs": costs(results, prices),
            "items": items(results)}


NOT_RUN_COLUMNS = ["scenario", "question", "db", "technique", "model", "error_kind", "error", "attempts"]


def could_not_run(items: list[dict]) -> pd.DataFrame:
    """The items that could not run (core.benchmark.results.read_not_run), with what happened and how many
    attempts the failed LLM call made; with repeated samples also the ``epoch``."""
    columns = NOT_RUN_COLUMNS[:4] + (["epoch"] if any(i.get("epoch", 1) > 1 for i in items) else []) + \
        NOT_RUN_COLUMNS[4:]
    rows = [{**{c: i.get(c) for c in columns}, "attempts": len(i.get("attempts") or [])} for i in items]
    return pd.DataFrame(rows, columns=columns)


def export(results: list[dict], prices: dict[str, list[float]], directory: str | Path,
           not_run: list[dict] | None = None) -> list[Path]:
    """Write each report as ``NAME.csv`` and all of them as ``report.json`` into ``directory``; with
    ``not_run`` (the items that could not run) also ``not_run.csv``. Every secret is scrubbed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written, everything = [], {}
    frames = tables(results, prices)
    if not_run is not None:
        frames["not_run"] = could_not_run(not_run)
    for name, df in frames.items():
        path = directory / f"{name}.csv"
        write_atomic(path, scrub(csv_text(df)))
        written.append(path)
        everything[name] = json.loads(df.to_json(orient="records"))
    path = directory / "report.json"
    write_atomic(path, scrub(json.dumps(everything, indent=1)))
    return written + [path]
