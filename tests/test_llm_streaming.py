"""The reply as it is written (issue 29 section 1): the model's reply streamed (LangChain's ChatOpenAI streaming)
into a view of the call in flight (``on_text``; a run job's ``partial``), the finished reply the event as before;
a server that does not stream falls back to one plain reply. Against a streaming stub server on localhost."""
from __future__ import annotations

import threading

from langchain_core.messages import HumanMessage

from core.auth.roles import local_admin
from core.llm.client import LLMSettings, open_llm
from core.model.run_settings import RunSettings
from tests.streaming_stub import StreamingStub
from tests.test_agents_runtime import ACT, FINAL, make_runtime

MESSAGES = [HumanMessage("Question: where?")]


def test_the_reply_streams_into_the_view_and_the_completion_is_the_whole_reply():
    server = StreamingStub([["Thought: I now ", "know the answer.\n", "Final answer: krakow"]], hold=False)
    try:
        llm = open_llm("stand-in", LLMSettings(base_url=server.url, api_key=None))
        seen = []
        c = llm.complete(MESSAGES, stop=["Observation:"], on_text=seen.append)
    finally:
        server.close()
    assert seen == ["Thought: I now ", "know the answer.\n", "Final answer: krakow"]  # only what is new
    assert c.text == "".join(seen) and (c.prompt_tokens, c.completion_tokens, c.estimated) == (100, 10, False)
    assert c.finish_reason == "stop" and server.requests[0]["stream"] is True


def test_a_server_that_does_not_stream_falls_back_to_one_reply():
    # the streamed request's reply comes as plain JSON, which is no stream: that reply is used (not asked for
    # again: the server computed it once), and later calls ask plainly
    server = StreamingStub([["Final answer: ", "krakow"], ["Final answer: lubeck"]], streams=False)
    try:
        llm = open_llm("stand-in", LLMSettings(base_url=server.url, api_key=None))
        seen = []
        first = llm.complete(MESSAGES, stop=[], on_text=seen.append)
        second = llm.complete(MESSAGES, stop=[], on_text=seen.append)
    finally:
        server.close()
    assert (first.text, second.text) == ("Final answer: krakow", "Final answer: lubeck")
    assert seen == ["Final answer: krakow"]  # the first reply, whole, as it came
    assert first.prompt_tokens == 100 and not first.estimated
    assert [r.get("stream", False) for r in server.requests] == [True, False]


def test_a_run_job_shows_the_reply_being_written_and_stores_the_events_as_before(tmp_path, monkeypatch):
    """The job's ``partial`` holds the reply while the server still writes it; the stored events are those of a
    run whose model does not stream."""
    import core.jobs.runs as jobs

    replies = [[ACT[:20], ACT[20:]], [FINAL[:25], FINAL[25:]]]
    server = StreamingStub(replies)
    plain = StreamingStub([["".join(r)] for r in replies], streams=False)
    try:
        def runtime_for(url):
            return lambda: make_runtime(tmp_path / url.rsplit(":", 1)[1].split("/")[0],
                                        llm_settings=LLMSettings(api_key=None))

        job = jobs.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url),
                         runtime_for(server.url), who=local_admin())
        deadline = threading.Event()
        while job.partial != ACT[:20] and not job.done:
            deadline.wait(0.02)
        assert job.partial == ACT[:20] and not job.done  # the first words, while the rest is held back
        assert (job.calling["call"], job.calling["attempt"]) == (1, 1) and job.calling["timeout_s"] > 0
        assert job.streams is True  # a page draws the reply closely (ui.live.closely)
        server.release.set()
        job.join(120)
        streamed = job.store().get(job.run_id)
        quiet = jobs.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=plain.url),
                           runtime_for(plain.url), who=local_admin())
        quiet.join(120)
        unstreamed = quiet.store().get(quiet.run_id)
    finally:
        server.close()
        plain.close()
    assert streamed.status == unstreamed.status == "finished" and job.partial == ""
    assert quiet.streams is False  # told by the attempts after the fallback: the page keeps its slower pace

    def shown(record):
        return [(e.kind, getattr(e, "text", None), getattr(e, "query", None), getattr(e, "answer", None),
                 e.llm.reply if e.llm else None) for e in record.events]

    assert shown(streamed) == shown(unstreamed)
