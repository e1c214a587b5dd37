"""Runs that do not burn tokens for nothing (issues 19 and 20): the loop guard and the ``stuck`` status, the run's
budgets (calls, tokens, cost) with the answer-only fallback saying which limit sent it there, the context window,
final answers that are no answers (Re-plan: Y, a plan, empty or cut-off replies), and corrections that help a
model recover. Each on a scripted transcript (hand-written, not recorded) and a tiny fake database."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.model.run_settings import Limits, Review
from core.model.run_settings import RunSettings
from core.agents.guards import answer_messages, collected_data, fit, not_an_answer, reply_cap, reply_room
from core.agents.parsing import parse_reply
from core.techniques.reaper.plan import parse_plan
from core.backends.base import QueryResult, QuerySyntaxError
from core.llm.client import Completion, LLMSettings, open_llm
from tests.test_agents_runtime import home  # noqa: F401 - a fixture
from tests.test_agents_runtime import ACT, FINAL, FakeBackend, kinds, make_runtime, replay, settings
from tests.stub_server import StubServer, completion, not_found, send_json
from tests.test_llm import StandIn

FAILING = "Thought: get the values\nAction: Relational DB\nAction input: SELECT T1.local_value FROM trade_node"
PLAN = "Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\n"


class FailingBackend(FakeBackend):
    """The fake database, where queries naming ``T1.`` fail as SQLite says (the loop of issue 19)."""

    def query(self, text, *, timeout_s=10.0, row_cap=200):
        if "T1." in text:
            self.queries.append(text)
            raise QuerySyntaxError("no such column: T1.local_value")
        return super().query(text, timeout_s=timeout_s, row_cap=row_cap)


class WideBackend(FakeBackend):
    """Every query returns one long row (about ``chars`` characters)."""

    def __init__(self, chars: int = 4000):
        super().__init__()
        self.chars = chars

    def query(self, text, *, timeout_s=10.0, row_cap=200):
        self.queries.append(text)
        return QueryResult(["trade_node", "notes"], [["krakow", "x" * self.chars]], 1, 0.001, text)


@dataclass
class Scripted:
    """A scripted model: replies as text or (text, finish_reason), with the server's token counts (estimated from
    characters here); records every request it gets."""

    replies: list
    prompt_tokens: int | None = None  # a fixed count per call instead of the estimate
    chars_per_token: float = 4.0  # the estimate's rate (3: text as dense as SQL and tables)

    def __post_init__(self):
        self.requests: list[list] = []

    def complete(self, messages, stop, on_retry=None):
        self.requests.append(messages)
        reply = self.replies.pop(0)
        text, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        prompt = self.prompt_tokens or int(sum(len(m.content) for m in messages) / self.chars_per_token)
        return Completion(text, prompt, max(1, len(text) // 4), 0.0, False, finish_reason=finish)


def scripted_runtime(home, model: Scripted, backend=None):
    return make_runtime(home, backend, llm_opener=lambda spec, settings, skip=0: model)


def events_of(runtime, result) -> list[dict]:
    return runtime.store.get(result.run_id).events


# ------------------------------------------------------------------------------------------------- loop guard

def test_the_same_failing_query_is_not_run_again_and_the_run_ends_stuck(home, tmp_path):
    backend = FailingBackend()
    runtime = make_runtime(home, backend)
    again = FAILING.replace("SELECT T1.local_value", "select   t1.local_value")  # whitespace and case aside
    result = runtime.start(settings(replay(tmp_path, [FAILING] + [again] * 19), limits=Limits(max_repeats=3)))
    events = events_of(runtime, result)
    assert result.status == "stuck" and len(backend.queries) == 1
    # not 20 calls: 4, then the one request for the final answer (issue 29), which the loop answers with its query
    assert result.outcome.llm_calls == 5 and result.outcome.repeats == 3
    repeats = [e for e in events if e.kind == "observation" and e.error_kind == "repeat"]
    assert len(repeats) == 2
    assert "Not run: you already took this action (LLM call 1)" in repeats[0].text
    assert "no such column: T1.local_value" in repeats[0].text  # with the earlier error
    asked = next(e for e in events if e.kind == "error" and e.error_kind == "stuck")
    assert not asked.fatal and asked.message.endswith("asking the agent for its final answer now")
    assert events[-1].kind == "error" and events[-1].error_kind == "stuck" and events[-1].fatal
    assert "repeated itself 3 times" in result.outcome.error
    assert "asked once for its final answer, it gave none" in result.outcome.error
    assert runtime.store.get(result.run_id, events=False).status == "stuck"
    assert runtime.store.list(status="stuck")[0].id == result.run_id


def test_a_stuck_run_asks_once_for_the_final_answer_from_what_it_observed(home, tmp_path):
    backend = FakeBackend()
    model = Scripted([ACT, ACT, ACT, FINAL])
    runtime = scripted_runtime(home, model, backend)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted", limits=Limits(max_repeats=2)))
    events = events_of(runtime, result)
    assert result.status == "stuck" and result.outcome.llm_calls == 4 and len(backend.queries) == 1
    asked = model.requests[-1][-1].content  # the answer request: the question and the rows the query got
    assert "The data collected to answer it" in asked and "krakow" in asked and "Final answer" in asked
    stuck = next(e for e in events if e.kind == "error")
    assert stuck.error_kind == "stuck" and not stuck.fatal and events[-1].kind == "final"
    assert result.outcome.decision == "krakow" and result.outcome.correct is True
    assert result.outcome.error == ("the agent repeated itself 2 times (last: the same action as at LLM call 1: "
                                       "SELECT trade_node FROM trade_node); it then gave its final answer from what "
                                       "it had observed")
    assert runtime.store.list(status="stuck")[0].id == result.run_id


def test_a_stuck_run_with_no_call_left_ends_without_asking(home, tmp_path):
    model = Scripted([ACT, ACT, ACT, FINAL], prompt_tokens=1000)
    runtime = scripted_runtime(home, model)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted",
                                       limits=Limits(max_repeats=2, max_tokens=3000)))
    assert result.status == "stuck" and result.outcome.llm_calls == 3 and len(model.replies) == 1
    assert result.outcome.error.endswith("; the run ends here") and result.outcome.final_answer is None


def test_a_repeated_good_query_gets_its_earlier_result_and_the_agent_goes_on(home, tmp_path):
    backend = FakeBackend()
    runtime = make_runtime(home, backend)
    result = runtime.start(settings(replay(tmp_path, [ACT, ACT + "  ", FINAL])))
    events = events_of(runtime, result)
    assert result.status == "finished" and result.outcome.decision == "krakow" and len(backend.queries) == 1
    repeat = next(e for e in events if getattr(e, "error_kind", None) == "repeat")
    assert "it gave:" in repeat.text and "krakow" in repeat.text and "Do something different" in repeat.text
    # a repeat is not a retrieval: no action event for it
    assert kinds(events).count("action") == 1


def test_other_queries_failing_with_the_same_error_count_as_repeats(home, tmp_path):
    backend = FailingBackend()
    runtime = make_runtime(home, backend)
    replies = [FAILING + f" WHERE {i} = {i}" for i in range(5)]
    result = runtime.start(settings(replay(tmp_path, replies), limits=Limits(max_repeats=2)))
    events = events_of(runtime, result)
    assert result.status == "stuck" and len(backend.queries) == 3
    said = [e.text for e in events if e.kind == "observation"]
    assert "The same error as your query at LLM call 1" in said[1]
    assert "the same error: no such column" in events[-1].message


def test_the_same_invalid_reply_again_counts_as_a_repeat(home, tmp_path):
    runtime = make_runtime(home)
    bad = "Thought: I will look\nAction: Trade Database\nAction input: SELECT trade_node FROM trade_node"
    result = runtime.start(settings(replay(tmp_path, [bad] * 5), limits=Limits(max_repeats=2)))
    events = events_of(runtime, result)
    assert result.status == "stuck" and result.outcome.llm_calls == 4  # and the request for the final answer
    assert "you sent this same reply before (LLM call 1)" in [e for e in events if e.kind == "observation"][1].text


# ---------------------------------------------------------------------------------------------------- budgets

@pytest.mark.parametrize("limits,limit,said", [
    (Limits(max_llm_calls=3), "llm_calls", "step limit reached (3 LLM calls)"),
    (Limits(max_tokens=150_000), "tokens", "token limit reached"),
    (Limits(max_cost_usd=0.4, max_tokens=10**8), "cost", "cost limit reached ($0.50"),  # + completion tokens
])
def test_each_limit_sends_the_run_to_its_answer_and_the_trace_says_which(home, limits, limit, said):
    # gpt-4o at $2.50 per 1M prompt tokens: 100,000 prompt tokens a call cost $0.25; the third call is the answer
    model = Scripted([ACT, ACT.replace("trade_node FROM", "local_value FROM"), FINAL], prompt_tokens=100_000)
    runtime = scripted_runtime(home, model)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "gpt-4o", limits=limits))
    events = events_of(runtime, result)
    notice = next(e for e in events if e.kind == "error")
    assert notice.error_kind == "limit" and not notice.fatal and said in notice.message
    assert result.status == "finished" and result.outcome.limit == limit
    assert result.outcome.decision == "krakow" and result.outcome.cost_usd > 0


def test_a_cost_limit_needs_a_price(home, tmp_path):
    runtime = make_runtime(home)
    with pytest.raises(ValueError, match="not in the price table"):
        runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "my-local-model", base_url="http://x/v1",
                                  limits=Limits(max_cost_usd=1.0)))
    with pytest.raises(ValueError, match="repeat limit"):
        runtime.start(settings(replay(tmp_path, [FINAL]), limits=Limits(max_repeats=0)))


def test_the_answer_request_holds_the_question_and_the_data_not_the_react_transcript(home):
    model = Scripted([ACT, ACT + " WHERE 1 = 1", "Final answer: krakow"])
    runtime = scripted_runtime(home, model)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted", limits=Limits(max_llm_calls=3)))
    assert result.status == "finished"
    request = model.requests[-1]
    assert "make your Final answer immediately" in request[0].content
    assert [m.type for m in request] == ["system", "human"]  # no assistant turns to go on from
    data = request[1].content
    assert data.startswith("Question: Where should I allocate") and data.count("Action input: SELECT") == 2
    assert "krakow" in data and data.rstrip().endswith("Final answer: ...")


# ------------------------------------------------------------------------------------------- no-answer answers

def test_replan_y_at_the_answer_step_is_not_an_answer(home):
    model = Scripted([ACT, "Re-plan: Y", "Final answer: lubeck"])
    runtime = scripted_runtime(home, model)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "singlerag", "scripted"))
    events = events_of(runtime, result)
    correction = [e for e in events if e.kind == "observation" and e.error_kind == "format"]
    assert "not a final answer (it has replan)" in correction[0].text
    assert result.status == "finished" and result.outcome.final_answer == "lubeck"
    assert [m.type for m in model.requests[2]] == ["system", "human", "ai", "human"]  # the retry shows the miss


def test_an_answer_step_that_never_answers_fails_saying_why(home):
    runtime = scripted_runtime(home, Scripted([ACT, ACT, ACT]))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "singlerag", "scripted"))
    assert result.status == "failed" and result.outcome.llm_calls == 3
    assert "no final answer when asked for it: your reply is not a final answer" in result.outcome.error


def test_empty_replies_end_the_run_instead_of_using_every_call(home):
    runtime = scripted_runtime(home, Scripted(["", "  ", ""]))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted"))
    events = events_of(runtime, result)
    assert result.status == "failed" and result.outcome.llm_calls == 3
    assert events[-1].error_kind == "empty_reply" and "3 empty replies in a row" in events[-1].message
    assert "your reply was empty" in events[0].text


def test_replies_cut_by_the_length_limit_are_not_taken_as_complete(home):
    cut = ("Thought: get the values\nAction: Relational DB\nAction input: SELECT trade_node, local_value FROM "
           "trade_node WHERE trade_node IN (SELECT source FROM flow WHERE", "length")
    backend = FakeBackend()
    runtime = scripted_runtime(home, Scripted([cut, ACT, ("Thought: I now know.\nFinal answer: krakow, because",
                                                          "length")]), backend)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted"))
    events = events_of(runtime, result)
    assert backend.queries == ["SELECT trade_node FROM trade_node"]  # the cut query never ran
    assert "cut off at the reply length limit" in events[0].text
    notes = [e for e in events if e.kind == "error" and e.error_kind == "truncated"]
    assert notes and not notes[0].fatal and result.status == "finished" and result.outcome.decision == "krakow"


def test_replies_cut_off_every_time_end_the_run_naming_the_reply_cap(home):
    cut = ("Thought: I need to look at the whole network and", "length")
    runtime = scripted_runtime(home, Scripted([cut] * 6))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted"))
    assert result.status == "stuck"
    assert result.outcome.error.startswith("the model's replies were cut off at the reply length limit")
    assert "--max-reply-tokens" in result.outcome.error and "repeated itself" not in result.outcome.error


def test_the_client_reports_the_servers_finish_reason():
    body = completion("Thought: a long")
    body["choices"][0]["finish_reason"] = "length"
    server = StandIn([(200, body)])
    try:
        llm = open_llm("stand-in", LLMSettings(base_url=server.url, api_key=None))
        from langchain_core.messages import HumanMessage
        c = llm.complete([HumanMessage("hi")], ["\nObservation:"])
    finally:
        server.close()
    assert c.finish_reason == "length"


def test_a_final_answer_naming_no_decision_is_kept_as_such(home, tmp_path):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT, "Final answer: I cannot tell from this data."])))
    assert result.status == "finished" and result.outcome.decision is None
    assert result.outcome.no_decision is True and result.outcome.final_answer.startswith("I cannot tell")


def test_what_is_and_is_not_an_answer():
    assert not_an_answer(parse_reply("Final answer: krakow")) is None
    assert not_an_answer(parse_reply("I would allocate to krakow.")) is None  # plain text is an answer
    assert not_an_answer(parse_reply("Re-plan: Y")) == "your reply is not a final answer (it has replan)"
    assert "plan steps" in not_an_answer(parse_reply("Step 1: x - #E1 = Relational DB[SELECT 1]"))
    assert not_an_answer(parse_reply("")) == "your reply was empty"
    assert "cut off" in not_an_answer(parse_reply("Thought: so the answer is"), "length")


# ---------------------------------------------------------------------------------------------- context window

def test_older_observations_are_shortened_to_fit_the_context_window(home):
    model = Scripted([ACT, ACT + " WHERE 1 = 1", ACT + " WHERE 2 = 2", FINAL])
    runtime = scripted_runtime(home, model, WideBackend(chars=4000))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted",
                                       limits=Limits(context_tokens=4096, observation_chars=5000,
                                                     reply_tokens=1024)))
    assert result.status == "finished"
    last = [m.content for m in model.requests[-1]]
    observations = [c for c in last if c.startswith("Observation:")]
    assert "[shortened to fit the model's context window" in observations[0]
    assert "shortened" not in observations[-1] and len(observations[-1]) > 3000  # the latest stays whole
    assert last[1].startswith("Question:") and all(len(c) < 9000 for c in last)
    notes = [e for e in events_of(runtime, result) if e.kind == "error" and e.error_kind == "context"]
    assert notes and "shortened to fit the model's 4,096-token context window" in notes[0].message


def test_a_request_that_cannot_fit_ends_with_its_own_status(home):
    model = Scripted([ACT, FINAL])
    runtime = scripted_runtime(home, model, WideBackend(chars=20_000))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted",
                                       limits=Limits(context_tokens=2048, observation_chars=30_000)))
    events = events_of(runtime, result)
    assert result.status == "context_exceeded" and len(model.requests) == 1  # no request was sent too big
    assert events[-2].error_kind == "limit" and "context window full" in events[-2].message
    # the message says what is kept for the reply, and where the window came from (issue 29)
    assert events[-1].error_kind == "context" and ("1,024 available: a 2,048-token window less 1,024 kept for "
                                                   "the reply; the window set for the run") in result.outcome.error


def test_fit_keeps_the_question_the_replies_and_the_latest_observation():
    messages = [{"role": "human", "content": "Question: q"}, {"role": "ai", "content": "Plan: [Step 1: a]"},
                {"role": "human", "content": "Observation: " + "a" * 3000},
                {"role": "ai", "content": "Action: x"}, {"role": "human", "content": "Observation: " + "b" * 3000}]
    assert fit("system", messages, None)[0] is messages
    fitted, shortened, _ = fit("system", messages, 1500 + 256)
    assert shortened == 1 and fitted[:2] == messages[:2] and fitted[3:] == messages[3:]
    assert fit("system", messages, 800)[0] is None


def _capped_run(home, limits: Limits) -> tuple[Scripted, list, object]:
    """An IterRAG run with two observations of about 9,000 characters each, on a runtime whose reply cap is 2,048
    tokens: the model, the reply caps it was opened with, and the result."""
    model, caps = Scripted([ACT, ACT + " WHERE 1 = 1", FINAL], chars_per_token=3), []  # dense: tables

    def opener(spec, llm_settings, skip=0):
        caps.append(llm_settings.max_reply_tokens)
        return model

    runtime = make_runtime(home, WideBackend(chars=9000), llm_opener=opener,
                           llm_settings=LLMSettings(api_key=None, max_reply_tokens=2048))
    return model, caps, runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted", limits=limits))


def test_the_room_kept_for_the_reply_is_the_reply_cap_sent(home):
    wide = {"observation_chars": 10_000, "cell_chars": 10_000}
    whole, _, unbounded = _capped_run(home, Limits(**wide))  # no window known: nothing shortened
    request = [{"role": "human" if m.type == "human" else "ai", "content": m.content} for m in whole.requests[-1][1:]]
    _, shortened, need = fit(whole.requests[-1][0].content, request, 8192)  # the reserve of old: sent whole
    assert unbounded.status == "finished" and "shortened" not in whole.requests[-1][-3].content
    assert 8192 - 2048 < need <= 8192 - 1024 and shortened == 0

    model, caps, result = _capped_run(home, Limits(context_tokens=8192, **wide))
    observations = [m.content for m in model.requests[-1] if m.content.startswith("Observation:")]
    assert result.status == "finished" and caps == [2048]
    assert "[shortened to fit the model's context window" in observations[0] and "shortened" not in observations[-1]
    assert sum(len(m.content) for m in model.requests[-1]) / 3 <= 8192 - 2048


def test_the_reply_cap_leaves_the_prompt_half_the_window_and_old_runs_keep_their_reserve():
    assert reply_room(8192, 2048) == 2048 and reply_room(8192, 100_000) == 4096
    assert reply_room(8192, None) == 1024 and reply_room(2048, None) == 512  # no cap sent: as before
    assert reply_cap(Limits(context_tokens=8192, reply_tokens=16_384)) == 4096  # the cap sent is cut to fit
    assert reply_cap(Limits(reply_tokens=16_384)) == 16_384  # no window known: sent as set
    stored = Limits.from_dict({"context_tokens": 8192, "max_repeats": 3})  # a run stored before the reply cap
    assert stored.reply_tokens is None and reply_cap(stored) is None


# --------------------------------------------------------------------------------------------- corrections

def test_after_a_rejected_plan_the_agent_is_asked_for_a_plan_not_an_answer(home, tmp_path):
    runtime = make_runtime(home)
    replies = [PLAN + ACT, "Thought: I now know the answer.\nFinal answer: krakow", PLAN + ACT, FINAL]
    first = runtime.start(settings(replay(tmp_path, replies), "planrag", hitl="approve-every-plan"))
    assert first.status == "paused"
    rejected = runtime.resume(first.run_id, Review.reject("look at the flows first"))
    assert rejected.status == "paused"  # the agent wrote a new plan after the correction
    said = [e.text for e in events_of(runtime, first) if e.kind == "observation"]
    assert "write it (Plan: [Step 1:" in said[0]
    assert "no Plan is in force" in said[1] and "Write your Plan" in said[1] and "Final answer" not in said[1]
    assert runtime.resume(first.run_id, Review.approve()).status == "finished"


def test_replan_y_without_a_plan_asks_for_the_new_plan(home, tmp_path):
    runtime = make_runtime(home)
    replies = [PLAN + ACT, "Re-plan: Y\nThought: the plan does not help.",
               "Re-plan: Y\nPlan: [Step 1: compare, Step 2: choose]\nCurrent step: Step 1: compare\n" + ACT
               + " WHERE 1 = 1", "Re-plan: N\n" + FINAL]
    result = runtime.start(settings(replay(tmp_path, replies), "planrag"))
    said = [e.text for e in events_of(runtime, result) if e.kind == "observation"]
    assert "you answered Re-plan: Y but wrote no new Plan" in said[1] and "Write your Plan" in said[1]
    assert result.status == "finished" and result.outcome.plan == ["compare", "choose"]


def test_a_query_in_the_action_line_is_run_when_unambiguous(home, tmp_path):
    backend = FakeBackend()
    runtime = make_runtime(home, backend)
    query = "SELECT trade_node FROM trade_node"
    in_action = f"Thought: look\nAction: {query}\nAction input: {query}"
    swapped = "Thought: more\nAction: SELECT local_value FROM trade_node\nAction input: Relational DB"
    both = "Thought: hmm\nAction: SELECT 1 FROM trade_node\nAction input: SELECT 2 FROM trade_node"
    result = runtime.start(settings(replay(tmp_path, [in_action, swapped, both, FINAL])))
    events = events_of(runtime, result)
    assert backend.queries == ["SELECT trade_node FROM trade_node", "SELECT local_value FROM trade_node"]
    assert [e.tool for e in events if e.kind == "action"] == ["Relational DB", "Relational DB"]
    told = [e.text for e in events if e.kind == "observation" and e.error_kind == "format"]
    assert "write the tool name in Action and the query in Action input" in told[0]


class OneColumnBackend(FakeBackend):
    def query(self, text, *, timeout_s=10.0, row_cap=200):
        r = super().query(text, timeout_s=timeout_s, row_cap=row_cap)
        return QueryResult(r.columns[:1], [row[:1] for row in r.rows], r.total_rows, 0.001, text)


def test_reaper_steps_without_the_tool_and_reused_labels_run(home, tmp_path):
    backend = OneColumnBackend()
    runtime = make_runtime(home, backend)
    plan = ("Step 1: the nodes - #E1 = SELECT trade_node\nFROM trade_node\n"
            "Step 2: their values - #E1 = Relational DB[SELECT local_value FROM trade_node WHERE trade_node IN (#E1)]")
    result = runtime.start(settings(replay(tmp_path, [plan, "Final answer: krakow"]), "reaper"))
    events = events_of(runtime, result)
    assert result.status == "finished" and len(backend.queries) == 2
    assert backend.queries[0] == "SELECT trade_node\nFROM trade_node"  # the multi-line query whole
    assert "IN (\"krakow\", \"lubeck\")" in backend.queries[1]
    shown = next(e for e in events if e.kind == "plan").steps
    assert shown[0] == "the nodes - #E1 = Relational DB[SELECT trade_node\nFROM trade_node]"
    assert shown[1].startswith("their values - #E2 = Relational DB[")


def test_reaper_answer_step_refuses_a_plan_as_the_final_answer(home, tmp_path):
    runtime = make_runtime(home)
    plan = "Step 1: the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node]"
    result = runtime.start(settings(replay(tmp_path, [plan, plan, "Final answer: krakow"]), "reaper"))
    events = events_of(runtime, result)
    assert result.status == "finished" and result.outcome.final_answer == "krakow"
    assert any("not a final answer (it has plan steps)" in e.text for e in events if e.kind == "observation")


def test_a_renumbered_replan_reusing_labels_refers_to_its_own_steps():
    steps = parse_plan("Step 3: again - #E1 = Relational DB[SELECT a FROM t]\n"
                       "Step 4: then - #E2 = Relational DB[SELECT b FROM t WHERE a IN (#E1)]", "sql", known={1, 2})
    assert [(s.label, s.query, s.problem) for s in steps] == [(3, "SELECT a FROM t", None),
                                                             (4, "SELECT b FROM t WHERE a IN (#E3)", None)]


def test_collected_data_leaves_out_corrections():
    messages = [{"role": "human", "content": "Question: q"}, {"role": "ai", "content": ACT},
                {"role": "human", "content": "Observation: rows"}, {"role": "ai", "content": "Action: x"},
                {"role": "human", "content": "Observation: Invalid format: your Action has no Action input."}]
    data = collected_data(messages)
    assert data == ["Action: Relational DB\nAction input: SELECT trade_node FROM trade_node\nObservation: rows"]
    assert answer_messages("Question: q", data)[0]["content"].startswith("Question: q\n\nThe data collected")


def test_a_full_context_sends_the_run_to_its_answer_with_older_data_shortened(home):
    long = "Thought: " + "let me think about it. " * 110 + "\n" + ACT.split("\n", 1)[1]  # long ReAct replies
    model = Scripted([long, long + " WHERE 1 = 1", long + " WHERE 2 = 2", "Final answer: krakow"], chars_per_token=3)
    runtime = scripted_runtime(home, model, WideBackend(chars=4200))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted",
                                       limits=Limits(context_tokens=4608, observation_chars=5000, cell_chars=5000,
                                                     reply_tokens=1024)))
    assert result.status == "finished" and result.outcome.limit == "context"
    data = model.requests[-1][1].content
    assert data.count("[shortened to fit the model's context window") >= 1 and data.count("x" * 4100) == 1
    notice = next(e for e in events_of(runtime, result) if e.kind == "error" and e.error_kind == "limit")
    assert "context window full" in notice.message and len(model.requests) == 4


def model_server(pages: dict[str, dict]) -> StubServer:
    """A stub OpenAI-compatible server: GET answers from ``pages`` (path -> JSON, else 404), POST with a final
    answer."""
    def page(handler, body):
        send_json(handler, 200, pages[handler.path]) if handler.path in pages else not_found(handler)

    return StubServer({"GET *": page, "POST *": lambda handler, body: send_json(handler, 200, completion(FINAL))})


@pytest.mark.parametrize("pages,size", [
    ({"/props": {"default_generation_settings": {"n_ctx": 8192}}}, 8192),  # llama.cpp
    ({"/v1/models": {"data": [{"id": "other", "max_model_len": 1024}, {"id": "stand-in", "max_model_len": 32768}]}},
     32768),  # vLLM
    ({}, None),  # says nothing
])
def test_the_context_window_is_what_the_server_reports_unless_set(home, pages, size):
    server = model_server(pages)
    try:
        runtime = make_runtime(home, llm_settings=LLMSettings(api_key=None))
        result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url))
        chosen = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url,
                                           limits=Limits(context_tokens=4096)))
    finally:
        server.close()
    assert result.status == "finished"
    assert runtime.store.get(result.run_id, events=False).settings.limits.context_tokens == size
    assert runtime.store.get(chosen.run_id, events=False).settings.limits.context_tokens == 4096


def test_reaper_answers_from_what_it_has_when_the_replan_cannot_fit(home):
    plan = "Step 1: the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node WHERE x = 1]\n" \
           "Step 2: more - #E2 = Relational DB[SELEKT broken]"
    model = Scripted([plan, "Final answer: krakow"])

    class WideFailing(WideBackend):
        def query(self, text, **kw):
            if "SELEKT" in text:
                raise QuerySyntaxError("near SELEKT: syntax error")
            return super().query(text, **kw)

    runtime = scripted_runtime(home, model, WideFailing(chars=13_000))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "reaper", "scripted",
                                       limits=Limits(context_tokens=4096, observation_chars=14_000,
                                                     cell_chars=14_000)))
    events = events_of(runtime, result)
    notice = next(e for e in events if e.kind == "error")
    assert notice.error_kind == "limit" and "context window full" in notice.message
    assert result.status == "finished" and result.outcome.limit == "context" and len(model.requests) == 2


def test_a_reaper_plan_cut_off_runs_its_whole_steps_and_says_so(home):
    plan = ("Step 1: the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node]\n"
            "Step 2: their values - #E2 = Relational DB[SELECT local_value FROM trade_node WHERE trade_", "length")
    backend = FakeBackend()
    runtime = scripted_runtime(home, Scripted([plan, "Final answer: krakow"]), backend)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "reaper", "scripted", replan_on_failure=False))
    events = events_of(runtime, result)
    assert backend.queries == ["SELECT trade_node FROM trade_node"]
    assert any(e.kind == "error" and e.error_kind == "truncated" and not e.fatal for e in events)
    assert result.status == "finished"


def test_timeouts_of_different_queries_are_not_repeats(home, tmp_path):
    runtime = make_runtime(home)
    slow = [ACT.replace("trade_node FROM", f"SLEEP({i}) FROM") for i in range(4)]
    result = runtime.start(settings(replay(tmp_path, slow + [FINAL]), limits=Limits(max_repeats=2)))
    assert result.status == "finished" and result.outcome.repeats == 0


def test_a_server_refusing_a_request_past_its_context_ends_the_run_as_context_exceeded(home):
    full = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": 9944, "n_ctx": 8192}}
    server = StandIn([(200, completion(ACT)), (400, full)])
    try:
        runtime = make_runtime(home, llm_settings=LLMSettings(api_key=None))
        result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url))
    finally:
        server.close()
    events = events_of(runtime, result)
    assert result.status == "context_exceeded" and len(server.requests) == 2
    assert events[-1].kind == "error" and events[-1].error_kind == "context"
    assert "exceeds the available context size" in result.outcome.error and "--context-tokens" in result.outcome.error


def test_a_server_that_did_not_report_its_context_at_first_is_asked_again():
    from core.llm.server_info import context_window

    pages = {}
    server = model_server(pages)  # up, but not saying yet (as a server still loading its model)
    try:
        assert context_window(server.url, "stand-in") is None
        pages["/props"] = {"default_generation_settings": {"n_ctx": 8192}}
        assert context_window(server.url, "stand-in") == 8192
        pages.clear()
        assert context_window(server.url, "stand-in") == 8192  # a size found is remembered
    finally:
        server.close()


# --------------------------------------------------------------------------- answers that consulted no database

def test_an_answer_before_any_query_is_noted_once_and_recorded(home, tmp_path):
    backend = FakeBackend()
    model = Scripted([FINAL, FINAL])
    runtime = scripted_runtime(home, model, backend)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted"))
    events = events_of(runtime, result)
    note = [e for e in events if e.kind == "observation"]
    assert len(note) == 1 and note[0].error_kind == "unqueried" and "not queried the Relational DB yet" in note[0].text
    assert result.status == "finished" and result.outcome.llm_calls == 2 and backend.queries == []
    assert result.outcome.unconsulted is True and result.outcome.decision == "krakow"
    told = Scripted([FINAL, ACT, FINAL])
    result = scripted_runtime(home, told, backend).start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted"))
    assert result.outcome.unconsulted is False and result.outcome.llm_calls == 3


def test_the_paper_setting_is_not_told_and_records_the_unconsulted_answer(home, tmp_path):
    model = Scripted(["Thought: I know.\nFinal answer: krakow"])
    runtime = scripted_runtime(home, model)
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "scripted", prompts="paper"))
    assert result.status == "finished" and result.outcome.llm_calls == 1
    assert result.outcome.unconsulted is True
    assert not [e for e in events_of(runtime, result) if e.kind == "observation"]
