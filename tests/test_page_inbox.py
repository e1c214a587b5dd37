"""The inbox on the Run page (Streamlit AppTest), issue 40: a row shows the proposal itself (for a re-plan, what
changed from the plan in force) with approve, edit, reject with a note (needed) and open the run, each recorded
under the session's identity; and a review, in a row or on the run's form, never moves to another pause without a
click."""
from __future__ import annotations

import pytest

import core.jobs.runs as jobs
from tests.page_app import button, isolate, open_page, shown
from tests.test_page_run_control import paused_run, session


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def prefixed(elements, prefix: str):
    """The one element whose key starts with ``prefix``."""
    [found] = [e for e in elements if (e.key or "").startswith(prefix)]
    return found


def inbox(reviewer: str):
    at = open_page("pages/run.py")
    at.session_state["reviewer"] = reviewer
    return at.run()


def test_a_row_shows_the_new_plan_against_the_plan_in_force_and_reviews_it(home):
    """Issue 40: a row said only "waits for approval of a new plan (pause p2)" beside Approve: blind approval."""
    run_id = paused_run()
    pause = jobs.open_store().get(run_id, events=False).pause
    at = inbox("ana")
    row = shown("\n".join(m.value for m in at.expander[0].markdown))
    assert "approval of a new plan (review 1)" in row and "pause p1" not in row
    for step in pause["plan"]:
        assert step in row
    assert "(added)" in row or "(removed)" in row
    assert any("added steps in green" in c.value for c in at.expander[0].caption)
    # reject needs a note: refused without one, the run still waiting
    button(at, "Reject with this note").click().run()
    assert any("write a note for the agent" in e.value for e in at.error)
    assert jobs.open_store().get(run_id, events=False).status == "paused"
    prefixed(at.text_input, "inbox-note-").set_value("compare the cheaper cities").run()
    button(at, "Reject with this note").click().run()
    jobs.job(run_id).join(120)
    [review] = jobs.open_store().reviews(run_id)
    assert (review["action"], review["reviewer"], review["review"]["note"]) == ("reject", "ana",
                                                                                "compare the cheaper cities")


def test_a_row_approves_an_edited_plan_and_opens_the_run(home):
    run_id = paused_run()
    at = inbox("ben")
    prefixed(at.text_area, "inbox-edited-").set_value("Find the cities\n\nPick the best").run()
    button(at, "Approve this plan").click().run()
    jobs.job(run_id).join(120)
    [review] = jobs.open_store().reviews(run_id)
    assert (review["action"], review["reviewer"], review["review"]["plan"]) == ("edit", "ben",
                                                                                ["Find the cities", "Pick the best"])
    other = paused_run()
    at.run()
    [opened] = [b for b in at.button if b.key == f"open-{other}"]
    assert opened.label == "Open the run"
    opened.click().run()
    assert at.session_state["run_id"] == other and any("Waiting for your review" in w.value for w in at.warning)


def test_a_form_never_moves_to_the_next_pause_without_a_click(home):
    """Issue 40: when one analyst approved p1 from the inbox, the other's open form switched to p2 within 7 s
    without a word, so he could approve a plan he never read."""
    run_id = paused_run(hitl="approve-every-plan")
    ben = session(run_id, "ben")
    assert button(ben, "Approve as proposed")
    ana = inbox("ana")
    [approve] = [b for b in ana.button if b.key == f"inbox-approve-{run_id}"]
    approve.click().run()
    jobs.job(run_id).join(120)
    record = jobs.open_store().get(run_id, events=False)
    assert record.status == "paused" and record.pause["id"] == "p2"
    ana.run()  # her own review: her row goes on to review 2 without asking
    assert not [w for w in ana.warning if "this is review 2" in w.value]
    ben.run()  # the page redrawn (the form's check does it within 2 s in the browser)
    said = [shown(w.value) for w in ben.warning if "this is review 2" in w.value]
    assert said and all(s.startswith("ana approved review 1 at ") for s in said)
    assert not [b for b in ben.button if b.label in ("Approve as proposed", "Approve")]
    ben.run()
    assert not [b for b in ben.button if b.label == "Approve as proposed"]  # still not without a click
    [show] = [b for b in ben.button if b.key == f"form-show-{run_id}-p2"]
    show.click().run()
    assert button(ben, "Approve as proposed") and "The agent wants to change its plan" in ben.subheader[0].value


def _texts(node):
    """The Markdown texts in ``node`` and below it."""
    if getattr(node, "type", None) == "markdown":
        yield node.value
    for child in getattr(node, "children", {}).values():
        yield from _texts(child)


def test_a_row_keeps_its_place_in_the_inbox_once_the_name_is_given(home):
    """The inbox asks for a name before its rows; once it is given the rows must stay where they were: the rerun
    drawing them one place up kept the run before's copy, one place down, until it ended (the row shown twice for a
    moment; a browser test met both copies)."""
    paused_run()
    at = open_page("pages/run.py")  # no name yet: the inbox asks for it

    def row_place() -> list[int]:
        box = at.expander[0]
        return [i for i, child in box.children.items() if any("waits for approval" in t for t in _texts(child))]

    before = row_place()
    assert len(before) == 1 and any(t.key == "inbox_name" for t in at.text_input)
    [asked] = [t for t in at.text_input if t.key == "inbox_name"]
    asked.set_value("Ana").run()
    assert at.session_state["reviewer"] == "Ana" and not any(t.key == "inbox_name" for t in at.text_input)
    assert row_place() == before
