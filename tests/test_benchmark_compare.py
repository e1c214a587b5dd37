"""Dataset-level comparison (issue 28 section 5): a candidate setting against a baseline, question by question,
with the paired statistics; on the Benchmark page, two result sets picked and the regressions filtered."""
from core.benchmark import compare


def _result(question, correct, technique="planrag", model="m", epoch=1, status="finished"):
    return {"source": "dqa", "scenario": "locating", "question": question, "db": "sqlite", "technique": technique,
            "model": model, "correct": correct, "epoch": epoch, "status": status}


def test_regressions_and_improvements_with_mcnemar():
    base = [_result(q, q <= 6) for q in range(1, 11)]  # 1-6 right
    cand = [_result(q, q >= 3, model="m2") for q in range(1, 12)]  # 3-11 right; 11 only the candidate ran
    settings = compare.settings(base), compare.settings(cand)
    assert settings == ([(("technique", "planrag"), ("db", "sqlite"), ("model", "m"))],
                        [(("technique", "planrag"), ("db", "sqlite"), ("model", "m2"))])
    c = compare.compare(base, settings[0][0], cand, settings[1][0])
    by = {ch.question: ch.change for ch in c.changes}
    assert by[1] == by[2] == "regressed" and by[7] == "improved" and by[4] == "still right" and len(by) == 10
    assert (c.count("improved"), c.count("regressed"), c.only_candidate, c.only_baseline) == (4, 2, 1, 0)
    assert c.method == "exact McNemar" and c.diff == 20.0 and not c.significant
    assert c.p_value == 0.6875  # exact two-sided binomial on 4 vs 2 discordant pairs
    assert "+20.0 points" in c.text() and "4 improved, 2 regressed" in c.text()


def test_repeated_samples_use_the_sign_flip_test_and_errors_count_wrong():
    base = [_result(q, e == 1, epoch=e) for q in (1, 2, 3) for e in (1, 2)]  # half right
    cand = [_result(q, True, technique="iterrag", epoch=e, status="error" if q == 3 else "finished")
            for q in (1, 2, 3) for e in (1, 2)]
    c = compare.compare(base, compare.settings(base)[0], cand, compare.settings(cand)[0])
    assert c.method == "exact sign-flip permutation test"
    assert [(ch.question, ch.baseline, ch.candidate, ch.change) for ch in c.changes] == [
        (1, 0.5, 1.0, "improved"), (2, 0.5, 1.0, "improved"), (3, 0.5, 0.0, "regressed")]


def test_the_benchmark_page_compares_two_result_sets(monkeypatch, tmp_path):
    from core.benchmark.results import ResultStore
    from tests.page_app import isolate, open_page
    from tests.test_benchmark_reports import RESULTS

    home = isolate(monkeypatch, tmp_path)
    for name, model, right in (("baseline", "m", lambda q: q <= 6), ("candidate", "m2", lambda q: q >= 3)):
        store = ResultStore(home / "bench" / name)
        for q in range(1, 11):
            store.put({**RESULTS[0], **_result(q, right(q), model=model), "finished": 0.0, "run_id": f"{name}-{q}",
                       "decision": f"d{q}{name[0]}"})
        store.close()
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Compare sets")
    assert not at.exception
    at.selectbox(key="set_compare_Candidate_dir").set_value(str(home / "bench" / "candidate")).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Paired questions"], metrics["Improved"], metrics["Regressed"]) == ("10", "4", "2")
    assert metrics["Accuracy change"] == "+20.0 pts"
    assert any("exact McNemar p=0.688, not significant" in i.value for i in at.info), [i.value for i in at.info]
    table = next(d.value for d in at.dataframe if "candidate right" in d.value.columns)
    assert sorted(table["change"]) == ["improved"] * 4 + ["regressed"] * 2
    at.multiselect(key="set_compare_changes").set_value(["regressed"]).run()
    table = next(d.value for d in at.dataframe if "candidate right" in d.value.columns)
    assert list(table["question"]) == [1, 2]

    # Issue 40 (LangSmith's drill-down): a question where the sets differ opens both runs side by side
    assert list(table["side by side"]) == [f"compare?q=dqa%2Flocating%2F{q}&runs=baseline-{q}%2Ccandidate-{q}"
                                           for q in (1, 2)]
    at.session_state["set_compare_table_2"] = {"selection": {"rows": [1], "columns": []}}
    at.run()
    assert any(m.value == "**dqa/locating/2: regressed**" for m in at.markdown)
    decided = [d.value.to_dict("records") for d in at.dataframe if "verdict" in d.value.columns]
    assert [(r[0]["decision"], r[0]["verdict"], r[0]["run"]) for r in decided] == [
        ("d2b", "right", "baseline-2"), ("d2c", "wrong", "candidate-2")]
    at.button(key="set_compare_open").click().run()
    assert at.title[0].value == "Compare"  # with both runs linked (none is in this test's run store)
    from core.config.settings import dqa_dir

    if dqa_dir() is not None and (dqa_dir() / "locating").is_dir():
        assert any("`baseline-2`, `candidate-2`" in w.value for w in at.warning), [w.value for w in at.warning]
    else:  # no DQA data (a newcomer's checkout): the page says the linked question cannot be opened here
        assert any("`dqa/locating/2`, which cannot be opened here" in e.value for e in at.error), at.error
