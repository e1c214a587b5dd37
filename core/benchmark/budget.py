"""A benchmark's budget: what its LLM calls may spend in tokens and estimated cost (at the price table's rate for
the model), shared by the worker threads. It is checked before each call to the model (cached replies are free),
so the benchmark stops cleanly at the cap: the finished items are kept and a rerun goes on with the rest."""
from __future__ import annotations

import threading

from core.agents.guards import call_cost
from core.benchmark.items import BenchError
from core.llm.client import Completion, LLMError


class BudgetReached(LLMError):
    """The next call would go past the benchmark's budget (kind ``budget``)."""

    def __init__(self, message: str):
        super().__init__("budget", message)


class Budget:
    """Tokens and cost spent so far by a benchmark's model calls, against its caps (None: no cap). ``price``: USD
    per 1M prompt and completion tokens (None: unknown, then the cost is unknown and cannot be capped)."""

    def __init__(self, max_tokens: int | None = None, max_cost_usd: float | None = None,
                 price: list[float] | None = None, model: str = ""):
        if max_tokens is not None and max_tokens < 1:
            raise BenchError("the token budget must be at least 1 token")
        if max_cost_usd is not None and max_cost_usd <= 0:
            raise BenchError("the cost budget must be a positive number of US dollars")
        if max_cost_usd is not None and price is None:
            raise BenchError(f"a cost budget needs the model's price, and {model!r} is not in the price table: add "
                             "it there, or use a token budget")
        self.max_tokens, self.max_cost_usd, self.price = max_tokens, max_cost_usd, price
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self._lock = threading.Lock()

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> float | None:
        return call_cost(self.price, self.prompt_tokens, self.completion_tokens)

    def spend(self, completion: Completion) -> None:
        """Count a call the model answered."""
        with self._lock:
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens

    def reached(self) -> str | None:
        """Which cap was reached, said for the user; None while there is budget left."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return (f"benchmark token budget reached: {self.tokens:,} tokens spent of the {self.max_tokens:,} "
                    "allowed; finished items are kept, rerun to go on with the rest")
        cost = self.cost_usd
        if self.max_cost_usd is not None and cost is not None and cost >= self.max_cost_usd:
            return (f"benchmark cost budget reached: ${cost:.4f} spent of the ${self.max_cost_usd:.4f} allowed; "
                    "finished items are kept, rerun to go on with the rest")
        return None

    def check(self) -> None:
        """Before a call to the model: BudgetReached when a cap is reached."""
        reason = self.reached()
        if reason:
            raise BudgetReached(reason)
