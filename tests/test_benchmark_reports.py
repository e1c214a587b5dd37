"""The paper's tables from a crafted mix of right and wrong results, and their export."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from core.benchmark import reports
from core.llm.prices import DEFAULT_PRICES

MODEL = "gpt-4o"


def result(db, technique, question, correct, **kw):
    base = {"scenario": "locating", "question": question, "db": db, "technique": technique, "model": MODEL,
            "language": "sql" if db == "sqlite" else "cypher", "status": "finished", "correct": correct,
            "decision": "krakow", "label": "krakow", "retrievals": 2, "replans": 0, "missed": [], "query_errors": 0,
            "failure": None if correct else "unclassified", "regret": None, "relative_regret": None, "rank": None,
            "llm_calls": 4, "cached_calls": 0, "prompt_tokens": 1000, "completion_tokens": 100,
            "tokens_estimated": False, "llm_latency_s": 2.0, "wall_s": 2.1, "overhead_s": 0.02, "ready_s": 0.05,
            "run_id": f"{db}{technique}{question}", "final_answer": "krakow", "error": None}
    return {**base, **kw}


RESULTS = [
    result("sqlite", "iterrag", 1, True, retrievals=1),
    result("sqlite", "iterrag", 2, True, retrievals=3),
    result("sqlite", "iterrag", 3, False, retrievals=1, failure="CAN", decision=None),
    result("sqlite", "iterrag", 4, False, failure="MIS", missed=["ingoing"], regret=2.0, relative_regret=10.0, rank=3),
    result("sqlite", "planrag", 1, True),
    result("sqlite", "planrag", 2, True, replans=2),
    result("sqlite", "planrag", 3, True, replans=5),
    result("sqlite", "planrag", 4, False, retrievals=3, replans=1, regret=1.0, relative_regret=5.0, rank=2),
    result("ladybug", "planrag", 1, True),
    result("ladybug", "planrag", 2, False, failure="QUR", missed=["ingoing", "total_power"]),
]


def rows(df: pd.DataFrame, columns: list[str]) -> list[tuple]:
    return [tuple(None if pd.isna(v) else v for v in r) for r in df[columns].itertuples(index=False)]


def test_accuracy_in_the_layout_of_tables_4_and_5():
    acc = reports.accuracy(list(reversed(RESULTS)))  # order of the input does not matter
    assert rows(acc, ["db", "kind", "technique", "correct", "total", "accuracy", "paper"]) == [
        ("sqlite", "RDB", "iterrag", 2, 4, 50.0, 37.5), ("sqlite", "RDB", "planrag", 3, 4, 75.0, 64.5),
        ("ladybug", "GDB", "planrag", 1, 2, 50.0, 64.0)]
    layout = reports.paper_layout(RESULTS).set_index("technique")
    assert layout.loc["planrag", "locating RDB sqlite"] == 75.0 and layout.loc["planrag", "locating GDB ladybug"] == 50.0
    assert layout.loc["planrag", "locating average"] == 62.5 and layout.loc["planrag", "locating average paper"] == 64.3
    assert layout.loc["iterrag", "locating average"] == 50.0 and pd.isna(layout.loc["iterrag", "locating GDB ladybug"])


def test_single_and_multi_retrieval_split_by_own_and_by_iterrag_retrievals():
    split = reports.retrieval_split(RESULTS)
    assert rows(split, ["technique", "basis", "split", "pairs", "share", "correct", "accuracy", "paper"]) == [
        ("iterrag", "own", "SR", 2, 50.0, 1, 50.0, 43.9), ("iterrag", "own", "MR", 2, 50.0, 1, 50.0, 49.4),
        ("planrag", "own", "SR", 0, 0.0, 0, None, 65.6), ("planrag", "own", "MR", 6, 100.0, 4, 66.7, 61.9),
        ("planrag", "IterRAG", "SR", 2, 50.0, 2, 100.0, 65.6), ("planrag", "IterRAG", "MR", 2, 50.0, 1, 50.0, 61.9)]


def test_replans_missed_failures_and_regret():
    replans = reports.replans(RESULTS)
    assert set(replans["technique"]) == {"planrag"}  # IterRAG never re-plans
    assert rows(replans, ["replans", "pairs", "accuracy", "paper pairs", "paper accuracy"]) == [
        ("0", 3, 66.7, 376, 66.8), ("1", 1, 0.0, 0, None), ("2", 1, 100.0, 12, 41.7), ("3", 0, None, 5, 20.0),
        ("4+", 1, 100.0, 7, 0.0)]
    missed = reports.missed(RESULTS)
    assert rows(missed, ["technique", "pairs", "heuristic missed", "heuristic rate", "heuristic by value",
                         "paper rate"]) == [("iterrag", 4, 1, 25.0, "ingoing 1, total_power 0", 3.3),
                                            ("planrag", 6, 1, 16.7, "ingoing 1, total_power 1", 1.3)]
    assert rows(missed, ["measured pairs", "missed", "rate"]) == [(0, None, None), (0, None, None)]  # no evidence
    measured = reports.missed([result("sqlite", "planrag", 1, True, evidence_total=7, evidence_seen=7,
                                      evidence_missing=[]),
                               result("sqlite", "planrag", 2, False, evidence_total=7, evidence_seen=4,
                                      evidence_missing=["trade_node.ingoing of krakow"])])
    assert rows(measured, ["measured pairs", "missed", "rate", "mean coverage %", "most missed"]) == [
        (2, 1, 50.0, 78.6, "trade_node.ingoing of krakow 1")]
    failures = reports.failures(RESULTS).set_index("technique")
    assert failures.loc["iterrag", ["wrong", "CAN", "CAN rate", "MIS", "MIS rate", "QUR"]].tolist() == [2, 1, 25.0, 1,
                                                                                                      25.0, 0]
    assert failures.loc["planrag", ["wrong", "QUR", "QUR rate", "unclassified", "unclassified rate"]].tolist() == [
        2, 1, 16.7, 1, 16.7]
    # which counts rest on a heuristic: CAN always, MIS where the run has no evidence coverage (issue 10)
    assert failures["heuristic"].tolist() == ["CAN; MIS of 1 (no evidence coverage)", "CAN"]
    measured_mis = reports.failures([result("sqlite", "planrag", 1, False, failure="MIS", evidence_total=7,
                                            evidence_seen=4)])
    assert measured_mis["heuristic"].tolist() == ["CAN"]
    regret = reports.regret(RESULTS)
    assert rows(regret, ["technique", "wrong", "ranked", "mean regret", "mean relative regret %", "median rank"]) == [
        ("iterrag", 2, 1, 2.0, 10.0, 3.0), ("planrag", 2, 1, 1.0, 5.0, 2.0)]


def test_costs_and_export(tmp_path):
    costs = reports.costs(RESULTS, DEFAULT_PRICES)
    first = costs.iloc[0]
    assert (first["db"], first["technique"], first["pairs"], first["llm calls"]) == ("sqlite", "iterrag", 4, 4.0)
    assert first["cost USD"] == pytest.approx(4 * (1000 * 2.5 + 100 * 10) / 1e6)
    assert first["overhead ms per step"] == 5.0 and first["ready s max"] == 0.05
    assert reports.costs(RESULTS, {})["cost USD"].isna().all()  # no price: unknown, not free
    written = reports.export(RESULTS, DEFAULT_PRICES, tmp_path)
    assert {p.name for p in written} == {f"{n}.csv" for n in reports.tables([], {})} | {"report.json"}
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["accuracy"][0]["correct"] == 2 and len(report["items"]) == len(RESULTS)
    assert pd.read_csv(tmp_path / "failures.csv")["pairs"].tolist() == [4, 6]
    assert all(df.empty for df in reports.tables([], {}).values())


def test_accuracy_rows_carry_n_errors_and_wilson_interval_and_the_optimal_rate():
    errored = {"scenario": "locating", "question": 5, "db": "sqlite", "technique": "planrag", "model": MODEL,
               "status": "error", "error_kind": "timeout", "error": "read timed out", "correct": False}
    tied_pick = result("sqlite", "iterrag", 5, False, decision="kongo", regret=0.0, rank=1, tied=2, optimal=True)
    acc = reports.accuracy(RESULTS + [errored, tied_pick]).set_index(["db", "technique"])
    planrag = acc.loc[("sqlite", "planrag")]
    assert (planrag["n"], planrag["correct"], planrag["errors"], planrag["answered"]) == (5, 3, 1, 4)
    assert planrag["accuracy"] == 60.0 and planrag["answered accuracy"] == 75.0
    assert (planrag["ci95_low"], planrag["ci95_high"]) == (23.1, 88.2)  # Wilson 3/5
    iterrag = acc.loc[("sqlite", "iterrag")]
    assert (iterrag["n"], iterrag["correct"], iterrag["optimal"]) == (5, 2, 1)  # the label is right twice, but
    # only the tied pick has regret 0 on record here (the crafted rights carry no regret)
    assert reports.accuracy_text(planrag.to_dict() | {"n": 5}) == "60.0% [23.1–88.2], n=5"


def test_paired_comparison_on_the_same_questions():
    pairs = reports.paired(RESULTS)
    assert list(pairs.columns[:16]) == ["source", "scenario", "db", "model", "a", "b", "n", "both", "only_a", "only_b",
                                        "neither", "p_value", "diff", "diff_ci95_low", "diff_ci95_high", "significant"]
    row = pairs.iloc[0]
    assert (row["db"], row["a"], row["b"], row["n"]) == ("sqlite", "iterrag", "planrag", 4)
    assert (row["both"], row["only_a"], row["only_b"], row["neither"]) == (2, 0, 1, 1)
    assert row["p_value"] == 1.0 and row["diff"] == -25.0 and not row["significant"]
    assert row["diff_ci95_low"] < -25.0 < row["diff_ci95_high"]
    assert "not significant" in reports.paired_text(row.to_dict())
    assert len(pairs) == 1  # ladybug has one technique only


def test_errors_and_undecided_answers_reach_the_report_files(tmp_path):
    errored = {"scenario": "locating", "question": 9, "db": "sqlite", "technique": "planrag", "model": MODEL,
               "status": "error", "error_kind": "rate_limit", "error": "429", "correct": False}
    vague = result("sqlite", "planrag", 8, False, decision=None, grade_status="ambiguous",
                   grade_reason="it commits to no single candidate: krakow or novgorod")
    reports.export(RESULTS + [errored, vague], DEFAULT_PRICES, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    row = next(r for r in report["accuracy"] if r["db"] == "sqlite" and r["technique"] == "planrag")
    assert {k: row[k] for k in ("n", "correct", "errors")} == {"n": 6, "correct": 3, "errors": 1}
    assert {"ci95_low", "ci95_high"} <= set(row) and report["paired"][0]["n"] == 4
    assert [(r["question"], r["grade_status"]) for r in report["undecided"]] == [(8, "ambiguous")]
    items = pd.read_csv(tmp_path / "items.csv")
    assert items[items["question"] == 9]["status"].tolist() == ["error"]
    assert set(pd.read_csv(tmp_path / "paired.csv").columns) >= {"p_value", "diff_ci95_low", "diff_ci95_high"}
    assert "cost per correct USD" in pd.read_csv(tmp_path / "costs.csv").columns


def test_overrides_replace_the_grade_and_are_counted(tmp_path):
    from core.analysis.grading import make_override
    from core.store.overrides import OverrideStore, apply

    store = OverrideStore(tmp_path)
    store.put("sqliteiterrag3", make_override("krakow", "krakow", by="ana", note="the answer says krakow"))
    results = apply(RESULTS, store.all())
    row = next(r for r in results if r["run_id"] == "sqliteiterrag3")
    assert (row["correct"], row["auto_correct"], row["override_by"], row["overridden"]) == (True, False, "ana", True)
    acc = reports.accuracy(results).set_index(["db", "technique"])
    assert acc.loc[("sqlite", "iterrag"), "correct"] == 3 and acc.loc[("sqlite", "iterrag"), "overridden"] == 1
    assert store.clear("sqliteiterrag3") and store.get("sqliteiterrag3") is None


def test_items_show_a_tied_rank_as_a_tie():
    """Issue 10: a pick in a tie group reads ``tied 3rd–79th of 79`` in the Questions tab and items.csv."""
    picks = [result("sqlite", "planrag", 1, False, rank=3, tied=77, candidates=79, regret=0.08),
             result("sqlite", "planrag", 2, True, rank=1, tied=1, candidates=79, regret=0.0),
             result("sqlite", "planrag", 3, False, decision=None)]
    assert rows(reports.items(picks), ["place"]) == [("tied 3rd–79th of 79",), ("1 of 79",), (None,)]


def test_the_contract_csvs_have_their_header_with_no_rows(tmp_path):
    """Tools read accuracy.csv and regret.csv by column name: with no result yet, or no wrong pick, each is a header
    line, not an empty file; report.json holds empty lists."""
    every_pick_right = [r for r in RESULTS if r["correct"]]
    reports.export(every_pick_right, DEFAULT_PRICES, tmp_path / "right")
    assert (tmp_path / "right/regret.csv").read_text().splitlines() == [",".join(reports.REGRET_COLUMNS)]
    reports.export([], DEFAULT_PRICES, tmp_path / "none", not_run=[])
    header = (tmp_path / "none/accuracy.csv").read_text().splitlines()
    assert header == [",".join(reports.ACCURACY_COLUMNS)]
    for key in ("n", "correct", "errors", "ci95_low", "ci95_high"):
        assert key in reports.ACCURACY_COLUMNS
    assert list(reports.accuracy(RESULTS).columns) == reports.ACCURACY_COLUMNS
    saved = json.loads((tmp_path / "none/report.json").read_text())
    assert saved["accuracy"] == [] and saved["paired"] == [] and saved["regret"] == []


def test_the_papers_rule_is_shown_beside_the_grade():
    """Issue 28: the authors counted an answer correct when the label appears in it ("... is not 2399" for label
    2399); the accuracy table shows that rule's accuracy beside the grade's, for a like-for-like look at the
    paper's figures."""
    from core.benchmark.reports import accuracy
    from core.analysis.grading import paper_rule

    assert paper_rule("Building 2399 is not the answer; choose 2465.", 2399) is True
    assert paper_rule("Choose 23990.", 2399) is False and paper_rule("Allocate to the North Sea", "north_sea")
    answers = [result("sqlite", "planrag", 1, True),
               result("sqlite", "planrag", 2, False, decision=None, final_answer="not krakow, rather lubeck"),
               result("sqlite", "planrag", 3, False, decision="lubeck", final_answer="lubeck")]
    row = accuracy(answers).iloc[0]
    assert (row["accuracy"], row["paper rule accuracy"]) == (33.3, 66.7)
