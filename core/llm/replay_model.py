"""A fake chat model playing back recorded replies (``replay:FILE``), apart from core.llm.client so that reading
runs and settings does not load langchain_core."""
from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel



class ReplayExhausted(Exception):
    """A replay was asked for more replies than it holds."""


class ReplayChatModel(GenericFakeChatModel):
    """A fake chat model playing back recorded replies in order, with a clear error when they run out."""

    source: str = "replay"
    count: int = 0  # replies in the file, for the error message

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except StopIteration:
            raise ReplayExhausted(f"replay {self.source} ran out of replies: it holds {self.count} and the "
                                  "agent asked for another") from None
