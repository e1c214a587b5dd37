"""One identity per session (Streamlit AppTest), issue 40: the signed-in one, else a name the analyst gives once
(never the Unix account), used by every action (review, inbox, close, branch, grade override) and every presence
line; one browser is listed once however its name changed."""
from __future__ import annotations

import getpass

import pytest

import core.jobs.runs as jobs
from core.store.overrides import OverrideStore
from tests.page_app import button, isolate, open_page, shown
from tests.test_page_run_control import paused_run


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def looking_lines(at) -> list[str]:
    return [shown(m.value) for m in at.markdown if "looking" in m.value]


def test_a_name_given_once_names_every_action_and_one_presence_line(home):
    """Issue 40: the same browser was listed twice as looking ("Ben Okafor (15 s ago), root (19 s ago)"); Settings
    pre-filled "root"; stop, branch and grade override asked no name and were recorded as "root"."""
    run_id, other = paused_run(), paused_run()
    ben = open_page("pages/run.py")
    ben.session_state["run_id"] = run_id
    ben.run()  # no name yet: the sidebar's field is empty, the review asks for one
    assert ben.sidebar.text_input(key="reviewer_input").value == "" != getpass.getuser()
    assert button(ben, "Approve as proposed").disabled
    ben.text_input(key="review_name").input("Ben Okafor").run()  # given once, where the review asked
    assert ben.sidebar.text_input(key="reviewer_input").value == "Ben Okafor"
    assert not button(ben, "Approve as proposed").disabled
    assert not [t for t in ben.text_input if t.key == "inbox_name"]  # not asked again
    ana = open_page("pages/run.py")
    ana.session_state["reviewer"] = "Ana"
    ana.run()
    [line] = [v for v in looking_lines(ana) if run_id in v]
    assert "Ben Okafor (" in line and "local user" not in line  # the mark made before the name was taken back
    [close] = [b for b in ben.button if b.key == f"close-{other}"]
    close.click().run()
    assert [(r["action"], r["reviewer"]) for r in jobs.open_store().reviews(other)] == [("stop", "Ben Okafor")]
    button(ben, "Approve as proposed").click().run()
    record = jobs.open_store().get(run_id, events=False)
    assert record.status == "finished"
    assert [r["reviewer"] for r in jobs.open_store().reviews(run_id)] == ["Ben Okafor"]
    form = f"run-{run_id}"
    assert not [t for t in ben.text_input if t.key in (f"ov-by-{form}", f"ov-name-{form}")]  # no "Who" to type
    next(b for b in ben.get("form_submit_button") if b.label == "Save override").click().run()
    assert OverrideStore(home).get(run_id).by == "Ben Okafor"
    ben.radio(key=f"run-branch-change-{run_id}").set_value("note").run()
    ben.text_input(key=f"run-branch-note-{run_id}").set_value("look at the totals")
    button(ben, "Start the branch").click().run()
    assert jobs.open_store().started_by(ben.session_state["run_id"]) == "Ben Okafor"


def test_without_a_name_the_inbox_asks_for_one_and_then_reviews(home):
    run_id = paused_run()
    at = open_page("pages/run.py")
    assert any("recorded as local user" in c.value for c in at.sidebar.caption)
    [approve] = [b for b in at.button if b.key == f"inbox-approve-{run_id}"]
    assert approve.disabled
    at.text_input(key="inbox_name").input("Cleo").run()
    [approve] = [b for b in at.button if b.key == f"inbox-approve-{run_id}"]
    approve.click().run()
    jobs.job(run_id).join(120)
    assert [r["reviewer"] for r in jobs.open_store().reviews(run_id)] == ["Cleo"]


def test_a_given_name_is_never_taken_away_by_an_empty_box(home):
    """An emptied name box (or a stale empty value sent by the browser) leaves the session its name: the review
    stays enabled, recorded under the name given once."""
    run_id = paused_run()
    at = open_page("pages/run.py")
    at.session_state["run_id"] = run_id
    at.run()
    at.sidebar.text_input(key="reviewer_input").input("Dana").run()
    assert not button(at, "Approve as proposed").disabled
    at.sidebar.text_input(key="reviewer_input").input("").run()
    assert at.sidebar.text_input(key="reviewer_input").value == "Dana"
    assert not button(at, "Approve as proposed").disabled
    button(at, "Approve as proposed").click().run()
    assert [r["reviewer"] for r in jobs.open_store().reviews(run_id)] == ["Dana"]
