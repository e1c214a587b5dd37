"""The scenarios folder as a session setting: each context (a Streamlit session's script run) sees the scenarios of
the folder it chose, threads started for it (a run, a benchmark and its items) see the same, and the Settings page
checks a folder: what it found, and the errors of a broken scenario with their file and line."""
from __future__ import annotations

import json
import threading

import pytest

from core.scenarios import catalog
from core import scenarios
from core.cli.main import main
from core.scenarios.plugins import checks
from tests.page_app import isolate, on_tab, open_page


@pytest.fixture
def folders(tmp_path):
    """Two scenarios folders: ``mine`` with a working scenario (the skeleton) and a broken one, ``other`` empty;
    the registry rescanned before and after."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    other.mkdir()
    assert main(["scenario", "new", "supplier-pick", "--dir", str(mine)]) == 0
    (mine / "broken").mkdir()
    (mine / "broken" / "scenario.toml").write_text('name = "broken"\ntitle = "Broken"\n[data\ncsv = "data"\n')
    scenarios.reload()
    yield mine, other
    scenarios.use_folder(None)
    scenarios.reload()


def _names_in(folder) -> list[str]:
    seen = []

    def look():
        scenarios.use_folder(folder)
        seen.extend(scenarios.names())

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen


def test_each_context_sees_its_own_folder(folders):
    mine, other = folders
    assert "supplier-pick" in _names_in(mine) and "supplier-pick" not in _names_in(other)
    assert "depot" in _names_in(other)  # the shipped scenarios are everywhere
    assert scenarios.scenarios_dir() != mine  # this thread kept the configured folder


def test_threads_started_in_context_see_the_chosen_folder(folders):
    mine, _ = folders
    scenarios.use_folder(mine)
    seen = []
    thread = threading.Thread(target=scenarios.in_context(lambda: seen.append(scenarios.scenarios_dir())))
    thread.start()
    thread.join()
    assert seen == [mine]
    assert catalog.question("scenario", "supplier-pick", 1).scenario == "supplier-pick"


def test_check_folder_lists_good_and_broken_scenarios(folders):
    mine, other = folders
    results = {path.name: (problems, facts) for path, problems, facts in checks.check_folder(mine)}
    assert results["supplier-pick"][0] == [] and "scenario supplier-pick" in results["supplier-pick"][1][0]
    assert "scenario.toml, line 3: not valid TOML" in results["broken"][0][0]
    assert checks.check_folder(other) == []
    [(_, problems, _)] = checks.check_folder(other / "nowhere")
    assert "no such folder" in problems[0]


def test_settings_page_uses_and_checks_a_folder(folders, monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    mine, _ = folders
    at = open_page("pages/settings.py", None)
    at.text_input(key="scenarios_dir_input").set_value(str(mine))
    at.button(key="scenarios_dir_use").click().run()
    assert at.session_state["scenarios_dir"] == str(mine)
    assert any("supplier-pick" in s.value and "2 questions" in s.value for s in at.success)
    assert any("broken" in e.value and "line 3" in e.value for e in at.error)
    at.switch_page("pages/scenarios.py").run()  # every page: the session's folder
    assert not at.exception
    assert "Supplier Pick" in at.segmented_control(key="scenarios_scenario").options


def test_benchmark_over_a_user_scenario_of_the_session_folder(folders, monkeypatch, tmp_path):
    """The Benchmark page on the skeleton scenario of the session's folder: the benchmark's threads find it, and
    its results are grouped under its name."""
    import core.jobs.benchmarks as bench_jobs

    isolate(monkeypatch, tmp_path)
    mine, _ = folders
    reply = tmp_path / "reply.json"
    reply.write_text(json.dumps(["Thought: the cheapest supplier.\nFinal answer: Cobalt"]))
    at = open_page("pages/benchmark.py", None)
    at.session_state["scenarios_dir"] = str(mine)
    at.run()
    at.segmented_control(key="bench_source").set_value("scenario")
    at.selectbox(key="bench_scenario").set_value("supplier-pick")
    at.multiselect(key="bench_techniques").set_value(["iterrag"])
    at.selectbox(key="bench_db").set_value("sqlite")
    at.text_input(key="bench_model").input(f"replay:{reply}")
    at.text_input(key="bench_questions").input("1-2")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = bench_jobs.jobs()[-1]
    job.join(120)
    assert job.error is None and job.bench.progress.done == 2
    on_tab(at, "Results")
    acc = next(d.value for d in at.dataframe if "optimal rate" in d.value.columns)
    rows = acc[acc["scenario"] == "Supplier Pick"]  # by its title
    assert len(rows) == 1 and rows.iloc[0]["n"] == 2 and set(rows["source"]) == {"scenario"}


def test_smoke_over_plugin_scenarios_leaves_out_those_without_a_shipped_transcript(folders):
    """A user scenario without transcripts in the session's folder does not break the smoke benchmark."""
    from core.benchmark.smoke import smoke_config
    from core.benchmark.items import scenarios_of

    mine, _ = folders
    scenarios.use_folder(mine)
    config = smoke_config(source="scenario", db="sqlite")
    assert config.scenario == "depot"
    assert scenarios_of("depot,supplier-pick", "scenario") == ["depot", "supplier-pick"]


def test_a_thread_without_the_sessions_context_still_finds_its_scenario(folders):
    """A Streamlit fragment's rerun (or any thread that did not inherit the session's context) lists the configured
    folder, but still finds by name a scenario of a folder some session scanned."""
    mine, _ = folders
    assert "supplier-pick" in _names_in(mine)  # a session scanned it
    assert "supplier-pick" not in scenarios.names()
    assert scenarios.get("supplier-pick").origin == str((mine / "supplier-pick").resolve())
    with pytest.raises(KeyError, match="unknown scenario 'nowhere'"):
        scenarios.get("nowhere")
