"""A benchmark's budget: what its LLM calls may spend in tokens, estimated cost (at the price table's rate for the
model) and calls, shared by every thread and process running its items. It is a row of the benchmark's result
store (``budgets``; ``bench_budgets`` in the team store), named by a budget id: each worker reopens it by that id.

Each call to the model (cached replies are free) is reserved before it is made, by one conditional ``UPDATE`` that
counts it in flight only while no cap is reached, and settled after it (its tokens counted) or released when it
failed without an answer. A call cap counts the calls in flight, so it is never exceeded; the tokens and cost of
the calls in flight are not known yet, so those caps are overshot by at most those calls. The benchmark stops
cleanly at a cap: the finished items are kept and a rerun goes on with the rest."""
from __future__ import annotations

from core.agents.guards import call_cost
from core.benchmark.items import BenchError
from core.benchmark.results import ResultStore
from core.llm.client import Completion, LLMError

_COLUMNS = ("max_tokens", "max_cost_usd", "max_calls", "price_prompt", "price_completion", "calls",
            "prompt_tokens", "completion_tokens", "in_flight")
#: No cap is reached (the same rule as Budget.reached): a call may be reserved.
_ROOM = ("(max_tokens IS NULL OR prompt_tokens + completion_tokens < max_tokens)"
         " AND (max_cost_usd IS NULL OR (prompt_tokens * price_prompt + completion_tokens * price_completion)"
         " / 1000000.0 < max_cost_usd)"
         " AND (max_calls IS NULL OR calls + in_flight < max_calls)")
_GO_ON = "finished items are kept, rerun to go on with the rest"


class BudgetReached(LLMError):
    """The next call would go past the benchmark's budget (kind ``budget``)."""

    def __init__(self, message: str):
        super().__init__("budget", message)


def check_caps(max_tokens: int | None = None, max_cost_usd: float | None = None, max_calls: int | None = None,
               price: list[float] | None = None, model: str = "") -> None:
    """BenchError for caps a budget cannot have (None: no cap). ``price``: USD per 1M prompt and completion tokens
    (None: unknown, then the cost is unknown and cannot be capped)."""
    if max_tokens is not None and max_tokens < 1:
        raise BenchError("the token budget must be at least 1 token")
    if max_cost_usd is not None and max_cost_usd <= 0:
        raise BenchError("the cost budget must be a positive number of US dollars")
    if max_calls is not None and max_calls < 1:
        raise BenchError("the call budget must be at least 1 LLM call")
    if max_cost_usd is not None and price is None:
        raise BenchError(f"a cost budget needs the model's price, and {model!r} is not in the price table: add "
                         "it there, or use a token budget")


class Budget:
    """The budget ``budget_id`` in ``store`` (made by ``open``): its caps, what its calls spent and how many are in
    flight, read from the store at each use."""

    def __init__(self, store: ResultStore, budget_id: str):
        self.id, self._scope = budget_id, store.scope
        self._row()  # BenchError when there is no such budget

    @classmethod
    def open(cls, store: ResultStore, budget_id: str, max_tokens: int | None = None,
             max_cost_usd: float | None = None, max_calls: int | None = None, price: list[float] | None = None,
             model: str = "") -> Budget:
        """The budget ``budget_id``, made with these caps (check_caps) if the store has none by that id; one that
        is there keeps its own caps (the first process to open it set them)."""
        check_caps(max_tokens, max_cost_usd, max_calls, price, model)
        sc = store.scope
        with sc.db.transaction() as con:
            con.execute(sc.upsert("budgets", ("id", *_COLUMNS), ("id",), replace=False),
                        (*sc.params, budget_id, max_tokens, max_cost_usd, max_calls, *(price or (None, None)),
                         0, 0, 0, 0))
        return cls(store, budget_id)

    def _update(self, assignments: str, params: tuple = (), condition: str = "1 = 1") -> int:
        """One UPDATE of this budget's row (``assignments`` with ``params``) where ``condition`` holds; the rows it
        changed (0 or 1)."""
        sc = self._scope
        with sc.db.transaction() as con:
            return con.execute(f"UPDATE {sc.table('budgets')} SET {assignments}" + sc.where(f"id = ? AND {condition}"),
                               (*params, *sc.params, self.id)).rowcount

    def _row(self) -> dict:
        sc = self._scope
        rows = sc.db.rows(f"SELECT {', '.join(_COLUMNS)} FROM {sc.table('budgets')}" + sc.where("id = ?"),
                          (*sc.params, self.id))
        if not rows:
            raise BenchError(f"no benchmark budget {self.id!r} in {self._scope.db.label}")
        return dict(zip(_COLUMNS, rows[0]))

    @staticmethod
    def _price(row: dict) -> list[float] | None:
        return None if row["price_prompt"] is None else [row["price_prompt"], row["price_completion"]]

    @property
    def tokens(self) -> int:
        row = self._row()
        return row["prompt_tokens"] + row["completion_tokens"]

    @property
    def cost_usd(self) -> float | None:
        row = self._row()
        return call_cost(self._price(row), row["prompt_tokens"], row["completion_tokens"])

    @property
    def calls(self) -> int:
        """Calls the model answered."""
        return self._row()["calls"]

    @property
    def in_flight(self) -> int:
        """Calls reserved and not yet settled or released."""
        return self._row()["in_flight"]

    def reached(self) -> str | None:
        """Which cap was reached, said for the user; None while a call may be reserved."""
        return self._reason(self._row())

    @classmethod
    def _reason(cls, row: dict) -> str | None:
        """The rule of ``_ROOM``, said: the same arithmetic, so the store and this agree on every row."""
        tokens = row["prompt_tokens"] + row["completion_tokens"]
        if row["max_tokens"] is not None and tokens >= row["max_tokens"]:
            return (f"benchmark token budget reached: {tokens:,} tokens spent of the {row['max_tokens']:,} "
                    f"allowed; {_GO_ON}")
        cost = call_cost(cls._price(row), row["prompt_tokens"], row["completion_tokens"])
        if row["max_cost_usd"] is not None and cost is not None and cost >= row["max_cost_usd"]:
            return (f"benchmark cost budget reached: ${cost:.4f} spent of the ${row['max_cost_usd']:.4f} allowed; "
                    f"{_GO_ON}")
        if row["max_calls"] is not None and row["calls"] + row["in_flight"] >= row["max_calls"]:
            flying = f" and {row['in_flight']:,} in flight" if row["in_flight"] else ""
            return (f"benchmark call budget reached: {row['calls']:,} LLM calls made{flying} of the "
                    f"{row['max_calls']:,} allowed; {_GO_ON}")
        return None

    def reserve(self) -> None:
        """Before a call to the model: count it in flight, or raise BudgetReached when a cap is reached."""
        while not self._update("in_flight = in_flight + 1", condition=_ROOM):
            reason = self.reached()
            if reason:
                raise BudgetReached(reason)
            # a call in flight was released between the UPDATE and the read: try again

    def settle(self, completion: Completion) -> None:
        """After a reserved call the model answered: count it and its tokens (those of the attempts abandoned
        before its answer too), no longer in flight."""
        self._update("calls = calls + 1, prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?, "
                     "in_flight = in_flight - 1",
                     (completion.prompt_tokens + completion.failed_prompt_tokens,
                      completion.completion_tokens + completion.failed_completion_tokens))

    def release(self, attempts: list[dict] = ()) -> None:
        """After a reserved call that failed without an answer: no longer in flight; what its abandoned
        ``attempts`` spent (their prompt_tokens, completion_tokens) counted."""
        self._update("in_flight = in_flight - 1, prompt_tokens = prompt_tokens + ?, "
                     "completion_tokens = completion_tokens + ?",
                     (sum(a.get("prompt_tokens", 0) for a in attempts),
                      sum(a.get("completion_tokens", 0) for a in attempts)))
