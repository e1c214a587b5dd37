"""Repeated runs (issue 30): a 3-epoch benchmark over four DQA questions with PlanRAG and IterRAG, driven by scripted
transcripts whose replies vary by epoch (tests/bench_scripts.py), so that samples disagree. The figures are checked
against a hand computation; a rerun with more epochs runs only the missing ones; the reply cache keys epochs apart;
the vote takes the majority (ties to the first voted); a single epoch reports as before."""
from __future__ import annotations

import json
import math
import re

import pytest

from core.benchmark import reports
from core.benchmark.epochs import agreement, clustered, sign_flip_p, t_quantile
from core.benchmark.items import BenchError
from core.benchmark.results import read_results
from core.benchmark.runner import Bench, BenchConfig
from core.benchmark.vote import majority, spread
from core.store.runs import RunStore
from tests.bench_scripts import transcript

R, W, U = "right", "wrong", "undecided"
#: technique -> question -> what the transcript of epochs 1, 2, 3 does
PLAN = {"planrag": {1: (R, R, R), 2: (R, W, R), 3: (W, W, R), 4: (W, W, W)},
        "iterrag": {1: (R, R, R), 2: (R, R, R), 3: (R, R, R), 4: (U, W, R)}}
Z = 1.959963984540054


@pytest.fixture(scope="module")
def scripts(dqa, tmp_path_factory):
    """``locating-{q}-sqlite-{technique}-e{epoch}.json`` (epoch 1 without the suffix), as PLAN says."""
    folder = tmp_path_factory.mktemp("epoch_scripts")
    for technique, questions in PLAN.items():
        for number, variants in questions.items():
            question = dqa.question("locating", number)
            database = dqa.database(question)
            for epoch, variant in enumerate(variants, 1):
                replies, _ = transcript(question, database, "sqlite", technique, variant)
                suffix = f"-e{epoch}" if epoch > 1 else ""
                (folder / f"locating-{number}-sqlite-{technique}{suffix}.json").write_text(json.dumps(replies))
    return folder


def config(folder, tmp_path, dqa_dir, **kw) -> BenchConfig:
    kw = {"out": tmp_path / "out", "cache": False, **kw}
    return BenchConfig(["planrag", "iterrag"], f"replay:{folder}", scenario="locating", questions="1-4",
                       home=tmp_path / "home", dqa_root=dqa_dir, **kw)


def wilson_at(p: float, n: float) -> tuple[float, float]:
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return 100 * (centre - half), 100 * (centre + half)


@pytest.fixture(scope="module")
def bench_3(scripts, tmp_path_factory, dqa_dir):
    """Two epochs first, then a rerun asking three with a vote over three."""
    tmp = tmp_path_factory.mktemp("epochs")
    first = Bench(config(scripts, tmp, dqa_dir, epochs=2))
    assert len(first.work.items) == 16 and first.run().done == 16
    before = {r["run_id"] for r in read_results(tmp / "out")}
    rerun = Bench(config(scripts, tmp, dqa_dir, epochs=3, vote=3))
    return tmp, rerun, before, rerun.run()


def test_a_rerun_with_more_epochs_runs_only_the_missing_ones(bench_3, scripts, dqa_dir):
    tmp, rerun, before, progress = bench_3
    assert progress.skipped == 16 and progress.done == 8 and not progress.errors
    assert {i.epoch for i in rerun.pending} == {3} and len(rerun.pending) == 8
    samples = [r for r in read_results(tmp / "out") if "+vote" not in r["technique"]]
    assert len(samples) == 24 and before <= {r["run_id"] for r in samples}  # epochs 1-2 kept as they were
    assert sorted({r["epoch"] for r in samples}) == [1, 2, 3]
    assert len({r["run_id"] for r in samples}) == 24  # each epoch a run of its own
    again = Bench(config(scripts, tmp, dqa_dir, epochs=3, vote=3))
    assert again.pending == [] and again.run().done == 0


def test_the_figures_match_a_hand_computation(bench_3):
    tmp = bench_3[0]
    acc = {r["technique"]: r for r in reports.accuracy(read_results(tmp / "out")).to_dict("records")}
    plan, it = acc["planrag"], acc["iterrag"]
    # PlanRAG: right 3, 2, 1, 0 of 3 -> 6/12; the cluster-robust variance sum (y - p m)^2 / N^2 = 5/144 against the
    # binomial 0.25/12 = 3/144: design effect 5/3, effective n 12 / (5/3) = 7.2
    assert (plan["n"], plan["correct"], plan["questions"], plan["epochs"], plan["samples"]) == (12, 6, 4, 3, 12)
    assert plan["accuracy"] == 50.0 and plan["design effect"] == pytest.approx(1.67, abs=0.005)
    low, high = wilson_at(0.5, 7.2)
    assert (plan["ci95_low"], plan["ci95_high"]) == (round(low, 1), round(high, 1)) == (20.5, 79.5)
    # agreement: pairs of samples with the same decision: 3/3, 1/3, 1/3, 3/3 -> 2/3; every / some / no epoch right
    assert plan["agreement"] == 66.7
    assert (plan["all right %"], plan["some right %"], plan["none right %"]) == (25.0, 50.0, 25.0)
    # IterRAG: 3, 3, 3, 1 of 3 -> 10/12; (0.5^2 * 3 + 1.5^2) / 144 = 3/144 against (10/12)(2/12)/12: deff 1.8
    assert (it["correct"], it["accuracy"], it["design effect"]) == (10, 83.3, 1.8)
    low, high = wilson_at(10 / 12, 12 / 1.8)
    assert (it["ci95_low"], it["ci95_high"]) == (round(low, 1), round(high, 1))
    assert it["agreement"] == 75.0  # question 4: no decision, a wrong one and the right one: no pair agrees
    assert (it["all right %"], it["some right %"], it["none right %"]) == (75.0, 25.0, 0.0)
    assert "n=12 samples of 4 questions × 3 epochs (clustered interval)" in reports.accuracy_text(plan)


def test_the_paired_comparison_uses_the_per_question_rates(bench_3):
    tmp = bench_3[0]
    rows = reports.paired(read_results(tmp / "out")).to_dict("records")
    row = next(r for r in rows if (r["a"], r["b"]) == ("iterrag", "planrag"))  # in the registered order
    # rates IterRAG 1, 1, 1, 1/3; PlanRAG 1, 2/3, 1/3, 0: differences 0, 1/3, 2/3, 1/3 (in thirds 0, 1, 2, 1).
    # Sign flips of 1, 2, 1: sums 4, 2, 0, -2, 2, 0, -2, -4; |sum| >= 4 in 2 of 8 -> p = 0.25.
    assert (row["method"], row["epochs"], row["n"]) == (reports.SIGN_FLIP, 3, 4)
    assert (row["only_a"], row["only_b"], row["equal"], row["p_value"]) == (3, 0, 1, 0.25)
    # mean 1/3; sd of the differences sqrt(2/27); t(3) 97.5% = 3.182: 33.3 ± 43.3
    half = t_quantile(3) * math.sqrt(2 / 27) / 2
    assert t_quantile(3) == pytest.approx(3.1824, abs=1e-4)
    assert (row["diff"], row["diff_ci95_low"], row["diff_ci95_high"]) == (
        33.3, round(100 * (1 / 3 - half), 1), round(100 * (1 / 3 + half), 1)) == (33.3, -10.0, 76.6)
    assert not row["significant"]
    assert "exact sign-flip permutation test p=0.25" in reports.paired_text(row)


def test_the_vote_picks_the_majority_and_links_its_samples(bench_3):
    tmp = bench_3[0]
    results = read_results(tmp / "out")
    votes = {(r["technique"], r["question"]): r for r in results if "+vote" in r["technique"]}
    assert len(votes) == 8
    samples = {(r["technique"], r["question"], r["epoch"]): r for r in results if "+vote" not in r["technique"]}
    # PlanRAG 2 of 3 right on question 2 -> right; 1 of 3 on question 3 -> wrong
    assert [votes["planrag+vote3", q]["correct"] for q in (1, 2, 3, 4)] == [True, True, False, False]
    # IterRAG question 4: no decision, wrong, right: a tie of one vote each goes to the first voted (epoch 2: wrong)
    tie = votes["iterrag+vote3", 4]
    assert tie["voters"] == 2 and not tie["correct"] and tie["decision"] == samples["iterrag", 4, 2]["decision"]
    assert tie["samples"] == [samples["iterrag", 4, e]["run_id"] for e in (1, 2, 3)]
    assert tie["llm_calls"] == sum(samples["iterrag", 4, e]["llm_calls"] for e in (1, 2, 3))
    acc = {r["technique"]: r for r in reports.accuracy(results).to_dict("records")}
    assert (acc["planrag+vote3"]["correct"], acc["planrag+vote3"]["n"], acc["planrag+vote3"]["epochs"]) == (2, 4, 1)
    assert acc["iterrag+vote3"]["correct"] == 3
    costs = {r["technique"]: r for r in reports.costs(results, {}).to_dict("records")}
    assert costs["planrag+vote3"]["llm calls"] == pytest.approx(3 * costs["planrag"]["llm calls"])
    assert reports.technique_name("planrag+vote3") == "PlanRAG (vote of 3)"


def test_reports_and_csvs_gain_the_fields_and_a_single_epoch_reports_as_before(bench_3):
    tmp = bench_3[0]
    results = read_results(tmp / "out")
    written = reports.export(results, {}, tmp / "report")
    report = json.loads((tmp / "report" / "report.json").read_text())
    assert {"questions", "epochs", "samples", "agreement", "design effect"} <= set(report["accuracy"][0])
    assert {"method", "epochs", "equal"} <= set(report["paired"][0])
    assert "epoch" in (tmp / "report" / "items.csv").read_text().splitlines()[0].split(",")
    assert any(p.name == "accuracy.csv" for p in written)
    single = [r for r in results if r["epoch"] == 1 and "+vote" not in r["technique"]]
    assert list(reports.accuracy(single).columns) == reports.ACCURACY_COLUMNS
    assert list(reports.paired(single).columns) == reports.PAIRED_COLUMNS
    assert "epoch" not in reports.items(single).columns
    row = reports.paired(single).to_dict("records")[0]
    assert "McNemar" in reports.paired_text(row)


def test_the_reply_cache_keys_epochs_apart(dqa, tmp_path, dqa_dir):
    folder = tmp_path / "one"
    folder.mkdir()
    question = dqa.question("locating", 1)
    replies, _ = transcript(question, dqa.database(question), "sqlite", "iterrag", R)
    (folder / "locating-1-sqlite-iterrag.json").write_text(json.dumps(replies))  # the same reply every epoch

    def run(out, **kw):
        progress = Bench(BenchConfig(["iterrag"], f"replay:{folder}", scenario="locating", questions="1", epochs=2,
                                     out=tmp_path / out, home=tmp_path / "home", dqa_root=dqa_dir, **kw)).run()
        return {r["epoch"]: r for r in read_results(tmp_path / out)}, progress

    first, progress = run("a")
    assert first[1]["cached_calls"] == 0 and first[2]["cached_calls"] == 0  # epoch 2 asked the model anew
    # the budget counts every epoch's calls
    assert progress.tokens == sum(first[e]["prompt_tokens"] + first[e]["completion_tokens"] for e in (1, 2)) > 0
    again, _ = run("b")
    assert all(again[e]["cached_calls"] == again[e]["llm_calls"] > 0 for e in (1, 2))  # each served its own
    seeded, _ = run("c", seed=7, top_p=0.9)  # another key: the model asked again, each epoch its seed
    assert all(seeded[e]["cached_calls"] == 0 for e in (1, 2))
    store = RunStore(tmp_path / "home" / "runs.sqlite")
    assert [store.get(seeded[e]["run_id"]).settings.seed for e in (1, 2)] == [7, 8]
    assert store.get(seeded[2]["run_id"]).settings.top_p == 0.9
    with pytest.raises(BenchError, match=r"other parameters \(seed 7 -> 8"):
        run("c", seed=8, top_p=0.9)  # the results were made with seed 7


def test_the_seed_and_top_p_reach_the_server():
    from core.llm.client import open_llm
    from core.config.settings import LLMSettings

    llm = open_llm("gpt-4o", LLMSettings(api_key="sk-test", base_url="http://127.0.0.1:9/v1", seed=11, top_p=0.5))
    assert llm.model.seed == 11 and llm.model.top_p == 0.5


def test_units_and_bad_input():
    assert agreement(["a", "a", "b"]) == pytest.approx(1 / 3) and agreement(["a"]) is None
    assert majority([None, "b", "a", "a", "b"])[0] == "b"  # 2-2: the first voted
    assert majority([None, None])[0] is None
    one = clustered([1, 0, 1], [1, 1, 1])
    assert one.deff == 1.0  # one sample a question: Wilson's interval as before
    assert clustered([3, 3], [3, 3]).deff == 3  # all right: the worst case, one sample's worth per question
    assert sign_flip_p([]) == 1.0
    rows = spread(["x", None, "x", "y"], lambda d: f"rank of {d}")
    assert rows[0] == {"decision": "x", "samples": 2, "share %": 50.0, "rank": "rank of x"}
    assert [r["decision"] for r in rows] == ["x", None, "y"] and rows[1]["rank"] is None


def test_bad_epoch_and_vote_settings_are_refused(scripts, tmp_path, dqa_dir):
    with pytest.raises(BenchError, match="the epochs must be a whole number from 1 to 50, not 0"):
        Bench(config(scripts, tmp_path, dqa_dir, epochs=0))
    with pytest.raises(BenchError, match="--vote needs at least 2"):
        Bench(config(scripts, tmp_path, dqa_dir, vote=1))
    with pytest.raises(BenchError, match="top-p"):
        Bench(config(scripts, tmp_path, dqa_dir, top_p=1.5))


def test_the_benchmark_page_shows_the_repeated_figures_with_their_n(bench_3, monkeypatch, tmp_path):
    from core.benchmark.results import ResultStore
    from tests.page_app import isolate, open_page

    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "epochs")
    for r in read_results(bench_3[0] / "out"):
        store.put(r)
    store.close()
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert not at.exception
    acc = next(d.value for d in at.dataframe if "ci95_low" in d.value.columns).set_index("technique")
    assert (acc.loc["PlanRAG", "n"], acc.loc["PlanRAG", "ci95_low"], acc.loc["PlanRAG", "ci95_high"]) == (12, 20.5, 79.5)
    assert "Repeated samples (epochs)" in [s.value for s in at.subheader]
    repeats = next(d.value for d in at.dataframe if "agreement" in d.value.columns
                   and "ci95_low" not in d.value.columns).set_index("technique")
    assert repeats.loc["PlanRAG", "accuracy"] == "50.0% [20.5–79.5]"
    assert tuple(repeats.loc["PlanRAG", ["n", "questions", "epochs", "samples"]]) == (12, 4, 3, 12)
    assert (repeats.loc["PlanRAG", "agreement"], repeats.loc["PlanRAG", "some right %"]) == ("66.7", 50.0)
    votes = next(d.value for d in at.dataframe if "cost per correct USD" in d.value.columns
                 and "accuracy" in d.value.columns).set_index("technique")
    assert votes.loc["PlanRAG (vote of 3)", "accuracy"].startswith("50.0% [") and \
        votes.loc["PlanRAG (vote of 3)", "accuracy"].endswith("n=4")
    said = [re.sub(r"\\(.)", r"\1", i.value) for i in at.info]  # as read (the text is Markdown-escaped)
    assert any("exact sign-flip permutation test p=0.25" in t and "× 3 epochs" in t for t in said)


def test_an_epoch_that_could_not_run_is_listed_with_its_epoch(tmp_path):
    from core.benchmark.items import Item
    from core.benchmark.results import ResultStore, read_errors, read_not_run

    store = ResultStore(tmp_path)
    store.put_not_run(Item("locating", 3, "sqlite", "planrag", "m", epoch=2), "timeout", "the server timed out")
    store.put_not_run(Item("locating", 3, "sqlite", "planrag", "m"), "timeout", "the server timed out")
    store.close()
    assert sorted(r["epoch"] for r in read_not_run(tmp_path)) == [1, 2]
    assert sorted(r["epoch"] for r in read_errors(tmp_path)) == [1, 2]
    table = reports.could_not_run(read_not_run(tmp_path))
    assert list(table.columns[:5]) == ["scenario", "question", "db", "technique", "epoch"]
    assert "epoch" not in reports.could_not_run([r for r in read_not_run(tmp_path) if r["epoch"] == 1]).columns


def test_an_item_that_could_not_run_is_read_back_under_its_key_whatever_its_model_label_holds(tmp_path):
    """A model label holding a URL ("m@http://...": a ":" in the key) is read back as the item it is, so the
    benchmark's follower matches the stored failure (it waited for ever when the source was read from any ":")."""
    from core.benchmark.items import Item
    from core.benchmark.results import ResultStore, read_not_run

    items = [Item("locating", 3, "sqlite", "iterrag", "m@http://127.0.0.1:9/v1"),
             Item("locating", 1, "sqlite", "iterrag", "m@http://127.0.0.1:9/v1", source="demo", epoch=2)]
    store = ResultStore(tmp_path)
    for item in items:
        store.put_not_run(item, "worker", "no data here")
    store.close()
    assert sorted(Item.of_row(r).key for r in read_not_run(tmp_path)) == sorted(i.key for i in items)
