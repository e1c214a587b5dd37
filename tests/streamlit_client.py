"""A Streamlit session without a browser: the websocket a browser tab opens (``/_stcore/stream``), a request to run
one page, and what the run sent back until it finished. The server sees a session as it sees a tab's; no
JavaScript runs, so many sessions can be opened at the same instant on two cores."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


@dataclass
class PageRun:
    """What one page's first run sent: its headings' texts, the exceptions it showed, and how it ended (a name of
    ``ForwardMsg.ScriptFinishedStatus``, "" while it has not)."""

    page: str
    headings: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    ended: str = ""


async def open_page(url: str, page: str, timeout: float) -> PageRun:
    """Open ``url``'s page ``page`` (its URL path, "" for the default page) as a new session; its first run."""
    seen = PageRun(page)
    stream = url.replace("http://", "ws://", 1) + "/_stcore/stream"
    # no keep-alive pings: a server busy importing a page's libraries on a loaded machine may not answer one in time
    async with websockets.connect(stream, subprotocols=["streamlit"], max_size=None, ping_interval=None) as ws:
        request = BackMsg()
        request.rerun_script.query_string = ""
        request.rerun_script.page_script_hash = ""
        request.rerun_script.page_name = page
        await ws.send(request.SerializeToString())
        async with asyncio.timeout(timeout):
            async for data in ws:
                message = ForwardMsg()
                message.ParseFromString(data)
                kind = message.WhichOneof("type")
                if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                    element = message.delta.new_element
                    if element.WhichOneof("type") == "exception":
                        seen.exceptions.append(f"{element.exception.type}: {element.exception.message}")
                    elif element.WhichOneof("type") == "heading":
                        seen.headings.append(element.heading.body)
                elif kind == "script_finished":
                    seen.ended = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)
                    if seen.ended != "FINISHED_EARLY_FOR_RERUN":  # a rerun the page asked for comes next
                        break
    return seen


async def open_pages(url: str, pages: list[str], timeout: float) -> list[PageRun]:
    """Open each of ``pages`` as a session of its own, all at once."""
    return await asyncio.gather(*(open_page(url, page, timeout) for page in pages))
