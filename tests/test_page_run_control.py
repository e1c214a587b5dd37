"""Run control on the pages (Streamlit AppTest): two sessions reviewing one pause, the review form's guard against
losing an edit, the banner at a pause, query review, interrupted runs closed, and branching from History."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from core.auth.roles import local_admin
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.llm.replays import replays
from tests.page_app import button, isolate, keyed, open_page
from tests.page_app import shown
from core.model.outcome import RunOutcome


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def paused_run(hitl: str = "approve-replans", **kw) -> str:
    """A demo PlanRAG run paused at its re-plan (``hitl``: or at its first plan), as another process would leave
    it."""
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "planrag")[0].spec
    paused = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", spec, hitl=hitl,
                                       source="demo", **kw))
    runtime.close()
    assert paused.status == "paused"
    return paused.run_id


def session(run_id: str, reviewer: str):
    at = open_page("pages/run.py")
    at.session_state["run_id"] = run_id
    at.session_state["reviewer"] = reviewer
    return at.run()


def analyst_reviews(run_id: str) -> list[dict]:
    return [e for e in jobs.open_store().get(run_id).events if e.kind == "plan" and e.origin == "analyst"]


def test_the_pause_screen_banner_form_first_proposed_plan_and_replay_label(home):
    run_id = paused_run()
    at = session(run_id, "ana")
    assert "Waiting for your review" in at.warning[0].value and "(review 1)" in at.warning[0].value
    assert "The agent wants to change its plan" in at.subheader[0].value
    assert any("replays recorded replies" in i.value for i in at.info)
    assert any("**Proposed plan** — waiting for your review" in m.value for m in at.markdown)


def test_a_paused_run_can_be_closed_and_start_waits_for_its_review(home):
    """Issue 28: the Paused and interrupted runs list only offered Open, so it only grew; Start stayed enabled
    while this page's run waited for review."""
    run_id, other = paused_run(), paused_run()
    at = session(run_id, "ana")
    [start] = [b for b in at.button if b.label == "Start"]
    assert start.disabled and "waits for your review" in start.help
    [close] = [b for b in at.button if b.key == f"close-{other}"]
    close.click().run()
    assert jobs.open_store().get(other, events=False).status == "stopped"
    assert not [b for b in at.button if b.key == f"close-{other}"]  # gone from the list
    [close] = [b for b in at.button if b.key == f"close-{run_id}"]
    close.click().run()  # this page's own run: closed, Start usable again
    assert jobs.open_store().get(run_id, events=False).status == "stopped"
    [start] = [b for b in at.button if b.label == "Start"]
    assert not start.disabled and not any("Waiting for your review" in w.value for w in at.warning)


def test_a_pause_reviewed_in_another_session_is_said_so_with_the_edits_dropped(home):
    """Issue 28: after another analyst approved the pause shown, the form stayed (then vanished on the next click)
    with no word that this session's edits were dropped."""
    run_id = paused_run()
    first, second = session(run_id, "ana"), session(run_id, "ben")
    [t for t in first.text_input if "-step-" in (t.key or "")][0].set_value("my own first step")
    button(second, "Approve as proposed").click().run()
    first.run()  # the page redrawn (ui.live does it within 2 s in the browser)
    [taken] = [shown(w.value) for w in first.warning if "no longer current" in w.value]
    assert "ben reviewed it (approve)" in taken and "not applied" in taken
    assert not [b for b in first.button if b.label == "Approve as proposed"]
    first.run()
    assert not [w for w in first.warning if "no longer current" in w.value]  # said once
    # this session's own review is not reported as someone else's
    other = paused_run()
    third = session(other, "ana")
    button(third, "Approve as proposed").click().run()
    assert not [w for w in third.warning if "no longer current" in w.value]


def test_a_second_tab_reviewing_the_same_pause_is_refused_with_the_state_now(home):
    run_id = paused_run()
    first, second = session(run_id, "ana"), session(run_id, "ben")  # both show pause p1
    second.text_input(key=keyed(second.text_input, "-note")[0].key).set_value("looks wrong")
    button(first, "Approve as proposed").click().run()
    assert jobs.open_store().get(run_id, events=False).status == "finished"
    button(second, "Reject with the note").click().run()  # the tab that still shows p1
    [error] = [shown(e.value) for e in second.error if "not applied" in e.value]
    assert "pause p1 of run" in error and "ana reviewed it (approve)" in error and "finished" in error
    assert [(e.status, e.reviewer) for e in analyst_reviews(run_id)] == [("approved", "ana")]


def test_two_sessions_clicking_at_once_apply_one_review(home):
    run_id = paused_run()
    tabs = [session(run_id, "ana"), session(run_id, "ben")]
    for tab, label in zip(tabs, ("Approve as proposed", "Reject with the note")):
        tab.text_input(key=keyed(tab.text_input, "-note")[0].key).set_value("a note")
    clicks = [threading.Thread(target=lambda t=tab, b=label: button(t, b).click().run())
              for tab, b in zip(tabs, ("Approve as proposed", "Reject with the note"))]
    for c in clicks:
        c.start()
    for c in clicks:
        c.join(120)
    refused = [t for t in tabs if any("not applied" in e.value for e in t.error)]
    assert len(analyst_reviews(run_id)) == 1 and len(refused) == 1
    assert len(jobs.open_store().reviews(run_id)) == 1


def test_approve_as_proposed_over_edits_asks_first(home):
    run_id = paused_run()
    at = session(run_id, "ana")
    boxes = [t for t in at.text_input if "-step-" in (t.key or "")]
    proposed = [b.value for b in boxes]
    boxes[0].set_value("My own first step")
    button(at, "Approve as proposed").click().run()
    assert any("You edited the plan" in w.value for w in at.warning)
    assert jobs.open_store().get(run_id, events=False).status == "paused"  # nothing applied yet
    button(at, "Apply my edits").click().run()
    [review] = analyst_reviews(run_id)
    assert review.status == "edited" and review.steps == ["My own first step", *proposed[1:]]
    assert review.reviewer == "ana"


def test_discarding_the_edits_approves_the_plan_as_proposed(home):
    run_id = paused_run()
    at = session(run_id, "ana")
    boxes = [t for t in at.text_input if "-step-" in (t.key or "")]
    proposed = [b.value for b in boxes]
    boxes[1].set_value("something else")
    button(at, "Approve as proposed").click().run()
    button(at, "Discard my edits, approve as proposed").click().run()
    [review] = analyst_reviews(run_id)
    assert review.status == "approved" and review.steps == proposed


def test_every_query_is_approved_edited_or_rejected_on_the_page(home):
    at = open_page("pages/run.py")
    at.session_state["reviewer"] = "ana"
    at.selectbox(key="run_technique").set_value("iterrag").run()
    at.checkbox(key="run_review_queries").check().run()
    button(at, "Start").click().run()
    run_id = at.session_state["run_id"]
    assert "The agent wants to run a query" in at.subheader[0].value
    query = at.text_area[0]
    query.set_value(query.value.strip() + " LIMIT 5")
    button(at, "Run the edited query").click().run()
    [note] = [t for t in at.text_input if t.key and t.key.endswith("-note")]
    note.set_value("Use the flow table instead.")
    button(at, "Reject with the note").click().run()
    while jobs.open_store().get(run_id, events=False).status == "paused":
        button(at, "Approve as proposed").click().run()
    events = jobs.open_store().get(run_id).events
    reviews = [e for e in events if e.kind == "query_review"]
    assert reviews[0].status == "edited" and reviews[0].query.endswith("LIMIT 5")
    assert reviews[1].status == "rejected" and reviews[1].note == "Use the flow table instead."
    assert all(r.status == "approved" for r in reviews[2:]) and not at.exception
    told = [i.value for i in at.info if "Use the flow table instead." in shown(i.value)]  # what the agent was told
    assert told and not [x for x in at.error if "Use the flow table instead." in x.value]


def test_an_interrupted_run_is_shown_and_can_be_closed(home):
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "iterrag")[0].spec
    done = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", spec, source="demo"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with runtime.store.db.transaction() as con:  # as if its process had been killed mid-run
        con.execute("UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, heartbeat = ? WHERE id = ?",
                    (dead.pid, socket.gethostname(), time.time(), done.run_id))
    runtime.close()
    at = session(done.run_id, "ana")
    assert any("interrupted" in w.value for w in at.warning)
    button(at, "Close the run").click().run()
    assert jobs.open_store().get(done.run_id, events=False).status == "stopped"


def test_branch_from_a_step_in_history_opens_the_new_run(home):
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "planrag")[0].spec
    parent = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", spec, source="demo"))
    runtime.close()
    at = open_page("pages/history.py", history_run=parent.run_id)  # as a tick on its row opens it
    assert button(at, "Start the branch").disabled  # issue 40: recorded under a name, asked once
    at.text_input(key="history-branch-name-" + parent.run_id).input("ana").run()
    at.selectbox(key="history-branch-step-" + parent.run_id).set_value(2).run()
    at.radio(key="history-branch-change-" + parent.run_id).set_value("note").run()
    at.text_input(key="history-branch-note-" + parent.run_id).set_value("look at the totals")
    button(at, "Start the branch").click().run()
    new_id = at.session_state["run_id"]
    assert new_id != parent.run_id and not at.exception
    child = jobs.open_store().get(new_id)
    assert child.parent_id == parent.run_id and child.branch_step == 2
    history = open_page("pages/history.py", history_run=parent.run_id)
    table = history.dataframe[0].value
    assert list(table["run"])[:2] == [parent.run_id, new_id]  # the branch under its run
    assert table["branch"][1].endswith(f"step 2 of {parent.run_id}")
    [tree] = history.get("graphviz_chart")  # issue 28 section 5: the branch tree drawn
    spec = tree.proto.spec
    assert f'"{parent.run_id}" -> "{new_id}" [label="step 2"]' in spec and "penwidth" in spec


def test_a_branch_opens_with_the_plan_in_force_at_its_step(home):
    """Issue 28 section 5: branching at the step that made the first plan offered an empty plan box."""
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "planrag")[0].spec
    parent = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", spec, source="demo"))
    runtime.close()
    at = open_page("pages/history.py", history_run=parent.run_id)
    at.selectbox(key="history-branch-step-" + parent.run_id).set_value(1).run()
    [plan] = [t for t in at.text_area if t.key == f"history-branch-plan-{parent.run_id}-1"]
    assert plan.value.startswith('Find the trade nodes whose flow goes into "deccan"')


def test_compare_lines_up_a_run_and_its_branch_by_step(home):
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "planrag")[0].spec
    parent = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", spec, source="demo"))
    branch = runtime.branch(parent.run_id, 3, note="check the totals")
    runtime.close()
    at = open_page("pages/compare.py")
    at.multiselect(key="compare-demo/locating/1").set_value([parent.run_id]).run()
    assert any(s.value == "A run and its branches" for s in at.subheader)
    table = at.dataframe[-1].value
    column = f"branch {branch.run_id}"
    marked = table[table[column].str.startswith("\u21b3")]
    assert list(marked["step"]) == [3] and marked[column].iloc[0].startswith("\u21b3 branched here (note)")
    assert table[f"run {parent.run_id}"][0] == table[column][0]  # the same first step


def test_a_run_ended_without_an_answer_reads_neither_wrong_nor_none(home):
    """A run stopped before its final answer is "not answered" (not wrong) on Run, History and Compare; the tables
    show "–" where there is nothing (never "None"), and the review mode names query approval too."""
    stopped, paused = paused_run(), paused_run(review_queries=True)
    jobs.stop(stopped, who=local_admin())
    store = jobs.open_store()  # the outcome a run stopped mid-way gets: graded, with no answer
    store.update(stopped, "stopped", outcome=RunOutcome.from_dict({"decision": None, "correct": False, "label": "doab",
                                              "final_answer": "", "grade_status": "none"}))
    assert stopped not in {r.id for r in store.list(correct=False)}  # "wrong answers" does not list it
    run = session(stopped, "ana")
    assert not run.exception
    assert [m.value for m in run.metric if m.label == "Correct"] == ["not answered"]
    history = open_page("pages/history.py")
    table = history.dataframe[0].value.set_index("run")
    assert table.loc[stopped, "correct"] is None and table.loc[paused, "correct"] is None
    assert set(table["decision"]) == set(table["rank"]) == {"–"} and table.loc[paused, "grade"] == "–"
    assert table.loc[paused, "LLM calls"] == table.loc[paused, "time (s)"] == "–"  # a run with no outcome yet
    assert table.loc[paused, "review"] == "Approve re-plans + every query"
    compare = open_page("pages/compare.py")
    compare.multiselect(key="compare-demo/locating/1").set_value([stopped, paused]).run()
    rows = compare.dataframe[0].value
    assert "None" not in rows.astype(str).to_numpy().ravel().tolist() and list(rows["correct"]) == [None, None]


def test_a_run_driven_by_another_process_is_followed_live(home):
    """Issue 24: a run driven by another process was shown as it stood, with a Refresh button; it is followed like
    this process's own runs (ui.live), with Stop."""
    from core.model.events import ActionEvent, FinalEvent, ThoughtEvent

    store = jobs.open_store()
    spec = replays("demo", "locating", 1, "sql", "iterrag")[0].spec
    store.create("far", RunSettings("locating", 1, "sqlite", "iterrag", spec, source="demo"))
    store.add_event("far", ThoughtEvent(text="Looking for the sources", step=1))
    at = open_page("pages/run.py")
    at.session_state["run_id"] = "far"
    at.run()
    assert any("running in another process" in i.value for i in at.info)
    assert [b.label for b in at.button if b.label in ("Stop", "Refresh")] == ["Stop"]
    assert any("Looking for the sources" in m.value for m in at.markdown)
    store.add_event("far", ActionEvent(tool="Relational DB", query="SELECT source FROM flow", language="sql", step=1))
    at.run()  # the fragment's next rerun, in the browser
    assert [c.value for c in at.code] == ["SELECT source FROM flow"]
    store.add_event("far", FinalEvent(answer="doab", step=2))
    store.update("far", "finished", outcome=RunOutcome.from_dict({"final_answer": "doab", "decision": "doab"}))
    at.run()
    assert not [b for b in at.button if b.label == "Stop"] and not any("another process" in i.value for i in at.info)
    assert any("Final answer" in s.value for s in at.success)


def test_the_inbox_reviews_from_the_list_and_says_who_is_looking(home):
    """Issue 28 section 5: one inbox of every run waiting for review, with approve / reject from the list and who
    is looking at what."""
    looked_at, other = paused_run(), paused_run()
    session(looked_at, "ben")  # ben has the first run open
    at = open_page("pages/run.py")
    at.session_state["reviewer"] = "ana"
    at.run()
    assert "Inbox: 2 waiting for review" in at.expander[0].label
    assert any(looked_at in m.value and ":material/visibility: ben" in m.value and "looking" in m.value
               for m in at.markdown)
    assert not any(f"`{other}`" in m.value and "looking" in m.value for m in at.markdown)
    [approve] = [b for b in at.button if b.key == f"inbox-approve-{other}"]
    approve.click().run()
    jobs.job(other).join(120)
    assert [(e.status, e.reviewer) for e in analyst_reviews(other)] == [("approved", "ana")]
    [note] = [t for t in at.text_input if t.key == f"inbox-note-{looked_at}-p1"]
    note.set_value("another plan").run()
    [reject] = [b for b in at.button if b.key == f"inbox-reject-{looked_at}"]
    reject.click().run()
    jobs.job(looked_at).join(120)
    [review] = jobs.open_store().reviews(looked_at)
    assert (review["action"], review["reviewer"]) == ("reject", "ana")
    assert not at.exception


def test_without_a_name_the_inbox_cannot_approve(home):
    run_id = paused_run()
    at = open_page("pages/run.py")
    [approve] = [b for b in at.button if b.key == f"inbox-approve-{run_id}"]
    assert approve.disabled and at.text_input(key="inbox_name").label.startswith("Your name")


def finished_run() -> str:
    runtime = jobs.open_runtime()
    spec = replays("demo", "locating", 1, "sql", "planrag")[0].spec
    done = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", spec, source="demo"))
    runtime.close()
    return done.run_id


def branch_with_a_nul(run_id: str):
    """The Run page's branch form given a note with a NUL: the page after Start the branch."""
    at = session(run_id, "ana")
    at.selectbox(key="run-branch-step-" + run_id).set_value(2).run()
    at.radio(key="run-branch-change-" + run_id).set_value("note").run()
    at.text_input(key="run-branch-note-" + run_id).set_value("look at\x00 the totals")
    return button(at, "Start the branch").click().run()


def test_a_nul_in_a_branch_note_is_refused_at_the_form_with_a_message(home):
    """Issue 44 section A: a note with a NUL left the branch queued with no job and the raw exception on the Run
    page. It is refused at the form with one line, and no run is recorded (the team store's case:
    tests/test_jobs_payload.py)."""
    parent = finished_run()
    at = branch_with_a_nul(parent)
    assert not at.exception, at.exception
    assert [shown(e.value) for e in at.error] == ["the note may hold any character but NUL (\\x00): remove it"]
    assert at.session_state["run_id"] == parent and [r.id for r in jobs.open_store().list()] == [parent]
