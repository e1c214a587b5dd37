"""What keeps a run from burning tokens for nothing, shared by the agent graphs (graph.py, REAPER's):

- the loop guard: an action the agent already took (the same tool and query, whitespace and case aside) is not
  run again, and repeats are counted (``Limits.max_repeats`` of them end the run as ``stuck``);
- the run's budgets: LLM calls, tokens and estimated cost, checked before each call;
- the context window: each request kept within ``Limits.context_tokens``, with room for the reply cap, by
  shortening older observations; its tokens counted by the model's tokenizer where one is known (a tokenizer file
  the user points at, or the server's), else estimated from characters, calibrated by each call's reported usage;
  the estimate says which (``estimate_basis``);
- the answer-only request (the question and the data collected, without the ReAct transcript that would invite
  more actions) and what does not count as a final answer.
"""
from __future__ import annotations

import math
import re

from core.llm.client import CHAT_TEMPLATE_TOKENS
from core.model.run_settings import Limits
from core.agents.parsing import Reply, parse_reply

#: Characters per token assumed until the server's tokenizer or a call's usage says (a low figure: SQL, numbers and
#: tables tokenise densely, and an overestimate of the tokens only shortens observations a little early).
CHARS_PER_TOKEN = 3.0
#: A figure measured on the last call's usage is taken this much lower: the next request's text (more data, less
#: prose) may tokenise a little more densely. A count by the model's own tokenizer is of the request itself: none.
MEASURED_MARGIN = 0.9
#: What a figure measured on a call's reported usage is named by (estimate_basis).
USAGE = "the prompt tokens the server reported for the last call"
#: Tokens a chat template adds per message (and once for the reply's opening), on top of the text the tokenizer
#: counts, until a call's reported usage says (``template_tokens``).
TEMPLATE_TOKENS = CHAT_TEMPLATE_TOKENS
#: Tokens of the context window kept free for the reply when no reply cap is sent.
REPLY_RESERVE = 1024
#: Characters of an observation kept when it is shortened.
SHORT_KEEP = 300
#: What an earlier result shows when an action is repeated.
EARLIER_CHARS = 1500
#: Empty replies in a row that end the run.
MAX_EMPTY_REPLIES = 3
SHORTENED = "[shortened to fit the model's context window: {n} characters left out]"
_STEP_ASSIGN = re.compile(r"#E\d+[ \t*]*=")


# ------------------------------------------------------------------------------------------------- loop guard

def action_key(tool: str, query: str) -> str:
    """An action as the loop guard compares it: the tool and the query with whitespace runs made one space and
    letters lower-cased."""
    return f"{tool}:{' '.join(query.split()).lower()}"


def reply_key(text: str) -> str:
    return "reply:" + " ".join(text.split()).lower()


def earlier_result(text: str) -> str:
    """What an earlier observation said, kept short enough to repeat."""
    return text if len(text) <= EARLIER_CHARS else text[:EARLIER_CHARS] + f" [... {len(text) - EARLIER_CHARS} " \
                                                                          "more characters, as observed then]"


# ---------------------------------------------------------------------------------------------------- budgets

def call_cost(price: list[float] | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for the tokens at ``price`` ([prompt, completion] per 1M tokens); None when the price is unknown."""
    return None if price is None else (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def limit_reached(state: dict, limits: Limits, keep_answer_call: bool = True) -> tuple[str, str] | None:
    """Before an LLM call: the limit the run has reached (``llm_calls``, ``tokens`` or ``cost``) and what to say
    about it, or None. The call limit keeps the last call for the final answer (unless ``keep_answer_call`` is
    off: the paper setting asks for none)."""
    if state["llm_calls"] + keep_answer_call >= limits.max_llm_calls:
        return "llm_calls", f"step limit reached ({limits.max_llm_calls} LLM calls)"
    used = state["prompt_tokens"] + state["completion_tokens"]
    if used >= limits.max_tokens:
        return "tokens", f"token limit reached ({used} tokens used, limit {limits.max_tokens})"
    spent = state["cost_usd"]
    if limits.max_cost_usd is not None and spent is not None and spent >= limits.max_cost_usd:
        return "cost", f"cost limit reached (${spent:.4f} spent, limit ${limits.max_cost_usd:.4f})"
    return None


def calls_left(state: dict, limits: Limits) -> bool:
    """Whether one more call stays within the run's call, token and cost limits."""
    used = state["prompt_tokens"] + state["completion_tokens"]
    spent = state["cost_usd"]
    return (state["llm_calls"] < limits.max_llm_calls and used < limits.max_tokens
            and not (limits.max_cost_usd is not None and spent is not None and spent >= limits.max_cost_usd))


# --------------------------------------------------------------------------------------------- context window

def _tokens(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token)


def request_chars(prompt: str, messages: list[dict]) -> int:
    return len(prompt) + sum(len(m["content"]) for m in messages)


def shorten(text: str) -> str:
    """An observation cut to its start, marked as shortened."""
    if len(text) <= SHORT_KEEP + len(SHORTENED) + 10:
        return text
    return text[:SHORT_KEEP].rstrip() + " " + SHORTENED.format(n=len(text) - SHORT_KEEP)


def reply_room(context_tokens: int, reply_tokens: int | None) -> int:
    """Tokens of a ``context_tokens`` window kept free for the reply: the reply cap sent (``reply_tokens``), at most
    half the window; with none sent, REPLY_RESERVE, at most a quarter of the window."""
    if reply_tokens is None:  # the server replies until the window is full
        return min(REPLY_RESERVE, context_tokens // 4)
    # the whole cap, as vLLM refuses a request whose prompt and cap together pass the window; a larger cap is cut to
    # half the window when sent (reply_cap), so the prompt keeps room
    return min(reply_tokens, context_tokens // 2)


def reply_cap(limits: Limits) -> int | None:
    """The reply cap a run sends: ``limits.reply_tokens`` cut to the room ``fit`` keeps for it (None: the LLM
    settings' cap, for a run stored before runs kept theirs)."""
    if limits.reply_tokens is None or limits.context_tokens is None:
        return limits.reply_tokens
    return reply_room(limits.context_tokens, limits.reply_tokens)


def fit(prompt: str, messages: list[dict], context_tokens: int | None, chars_per_token: float | None = None,
        reply_tokens: int | None = None, margin: float = MEASURED_MARGIN) -> tuple[list[dict] | None, int, int]:
    """The messages of a request kept within ``context_tokens`` (None: no limit, unchanged) less the room for the
    reply (``reply_room``): older observations are shortened, oldest first, until the request fits. Returns the
    messages (None when even that does not fit), how many were shortened, and the request's estimated tokens.
    ``margin``: how much lower a measured ``chars_per_token`` is taken."""
    cpt = chars_per_token * margin if chars_per_token else CHARS_PER_TOKEN
    need = _tokens(request_chars(prompt, messages), cpt)
    if context_tokens is None:
        return messages, 0, need
    budget = context_tokens - reply_room(context_tokens, reply_tokens)
    if need <= budget:
        return messages, 0, need
    fitted, shortened = list(messages), 0
    # user messages after the question, but not the last one: the system prompt (with the plan the run started
    # from), the question, every reply (with the plans) and the latest observation stay whole
    older = [i for i, m in enumerate(messages) if m["role"] == "human" and i > 0][:-1]
    for i in older:
        short = shorten(fitted[i]["content"])
        if short == fitted[i]["content"]:
            continue
        fitted[i] = {**fitted[i], "content": short}
        shortened += 1
        need = _tokens(request_chars(prompt, fitted), cpt)
        if need <= budget:
            return fitted, shortened, need
    return None, shortened, need


def count_request(prompt: str, messages: list[dict], count) -> int | None:
    """The tokens of a request's texts by the model's own tokenizer (``count``: text -> tokens, or None when there
    is none), the chat template's not included; None when it cannot say."""
    try:
        tokens = [count(text) if count else None for text in [prompt, *(m["content"] for m in messages)]]
    except Exception:  # noqa: BLE001 - a tokenize endpoint that fails is no tokenizer: the estimate stays
        return None
    return sum(tokens) if all(t is not None for t in tokens) else None


def template_tokens(prompt_tokens: int, counted: int, messages: int) -> float:
    """Tokens the chat template added per message, from a request's reported ``prompt_tokens`` and its texts'
    ``counted`` tokens (``messages``: after the system prompt)."""
    return min(max((prompt_tokens - counted) / (messages + 2), 0.0), 64.0)


def tokenized_chars_per_token(prompt: str, messages: list[dict], tokens: int | None,
                              template: float | None = None) -> float | None:
    """Characters per token of a request whose texts the model's tokenizer counted at ``tokens``, the chat
    template's tokens added (``template`` a message, default TEMPLATE_TOKENS); None without a count."""
    if not tokens:
        return None
    template = TEMPLATE_TOKENS if template is None else template
    return request_chars(prompt, messages) / (tokens + template * (len(messages) + 2))


def margin_of(state: dict) -> float:
    """How much lower a run's measured characters per token are taken: not at all when the model's own tokenizer
    counted the request (its count is of that text), MEASURED_MARGIN when they come from a call's usage."""
    return 1.0 if state["chars_per_token"] and state["counted_by"] not in (None, USAGE) else MEASURED_MARGIN


def estimate_basis(state: dict) -> str:
    """What a run's token estimate rests on: the tokenizer that counted it (``tokenizer file NAME``, ``the server's
    tokenizer``) with the chat template's tokens (ChatML's, or as measured on a call's reported usage), the last
    call's reported usage, or the characters alone."""
    if state["chars_per_token"] and state["counted_by"] == USAGE:
        return USAGE
    if state["chars_per_token"] and state["counted_by"]:
        measured = state["template_tokens"]
        template = (f"{measured:.1f} tokens a message for the chat template, measured on the reported usage"
                    if measured is not None else f"ChatML's {TEMPLATE_TOKENS} tokens a message for the chat template")
        return f"{state['counted_by']}, with {template}"
    return USAGE if state["chars_per_token"] else f"{CHARS_PER_TOKEN:g} characters a token"


def measured_chars_per_token(prompt: str, messages: list[dict], prompt_tokens: int) -> float | None:
    """Characters per token of a request whose prompt tokens the server reported (None when too few to say)."""
    return request_chars(prompt, messages) / prompt_tokens if prompt_tokens >= 50 else None


# ------------------------------------------------------------------------------------------------ final answer

def _data_observation(text: str) -> bool:
    return not text.startswith(("Observation: Invalid format", "Observation: Not run"))


def collected_data(messages: list[dict]) -> list[str]:
    """What the agent's actions observed, from a ReAct transcript: each action (tool and input) with its
    observation; corrections and repeats left out."""
    data = []
    for reply, observation in zip(messages[1::2], messages[2::2], strict=False):
        if reply["role"] != "ai" or observation["role"] != "human" or not _data_observation(observation["content"]):
            continue
        parsed = parse_reply(reply["content"])
        if parsed.action and parsed.action_input:
            data.append(f"Action: {parsed.action}\nAction input: {parsed.action_input}\n{observation['content']}")
    return data


def answer_messages(question: str, data: list[str], after: list[dict] = ()) -> list[dict]:
    """The request for the final answer at once (with the answer-only system prompt): one user message with the
    question and the data collected, then ``after`` (an earlier reply that was no answer, and its correction)."""
    body = "\n\n".join(data) if data else "(no data was collected)"
    text = (f"{question}\n\nThe data collected to answer it:\n\n{body}\n\nWrite your Final answer to the question "
            "now, from this data, as: Final answer: ...")
    return [{"role": "human", "content": text}, *after]


def fit_answer(prompt: str, question: str, data: list[str], after: list[dict], limits: Limits,
               chars_per_token: float | None = None) -> list[dict]:
    """``answer_messages`` kept within the context window of ``limits`` where it can be: the older data
    shortened, oldest first, the latest kept whole (``fit`` then tells whether it fits)."""
    data = list(data)
    messages = answer_messages(question, data, after)
    for i in range(len(data) - 1):
        if fit(prompt, messages, limits.context_tokens, chars_per_token, limits.reply_tokens)[0] is not None:
            break
        data[i] = shorten(data[i])
        messages = answer_messages(question, data, after)
    return messages


def not_an_answer(reply: Reply, finish_reason: str | None = None) -> str | None:
    """Why a reply to the request for the final answer is not one (None when it is): empty, cut off by the
    length limit with no Final answer, or another kind of reply (an action, a plan, a Re-plan, REAPER steps)."""
    if not reply.text.strip():
        return "your reply was empty"
    if reply.final_answer is not None:
        return None if reply.final_answer.strip() else "your Final answer is empty"
    if finish_reason == "length":
        return "your reply was cut off at the reply length limit before it gave a Final answer"
    labelled = [name for name in ("plan", "replan", "current_step", "action", "action_input") if reply.get(name)
                is not None]
    if labelled or _STEP_ASSIGN.search(reply.text):
        what = ", ".join(n.replace("_", " ") for n in labelled) if labelled else "plan steps"
        return f"your reply is not a final answer (it has {what})"
    return None


def answer_correction(problem: str) -> str:
    return (f"Observation: Not an answer: {problem}. Do not plan or query any more: answer the question now from "
            "the data above, in one line: Final answer: ...")
