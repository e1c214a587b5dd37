"""How soon the words a model streams show on the Run page (issue 29, target: 0.5 s), measured in headless Chromium:
the app is started against a stub OpenAI-compatible server that streams its replies (tests/streaming_stub.py) a few
words at a time at a model's pace (a random gap of ``--gap`` seconds between pieces), each piece carrying a word
found nowhere else; the browser notes the animation frame each word is first on the page (a MutationObserver), and
the stub when it sent it. Each round starts one PlanRAG run on the demo Locating question (two replies: a plan and
query, then the final answer). Prints, over all words, the median, 90th percentile and worst delay from sent to
shown (and how much of it the browser took, from the app's message with the word to the word shown), and apart the
first words of each reply (sent as soon as the request arrives), with the load (``uptime``) before and after; flags
a median over the target and exits 1 then. The figures rest on this machine's load.

No DQA data, no model, no network: the app runs on a free localhost port with a temporary PLANRAG_HOME.

Usage: python bench/bench_streaming.py [--rounds 3] [--words 8] [--gap 0.2 0.9] [--target 0.5]
"""
from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from screenshots import CHROMIUM, CHROMIUM_ARGS, streamlit_app  # noqa: E402

from tests.streaming_stub import StreamingStub  # noqa: E402

WAIT_MS = 120_000  # a hang guard, never a speed target

# Notes, per word looked for, the first animation frame the page holds it, and when the first of the app's messages
# (its WebSocket) holding it arrived: the delay split between the server and the browser.
OBSERVER = """
window.__words = %s;
window.__shown = {};
new MutationObserver(() => {
  const text = document.body ? document.body.textContent : '';
  for (const word of window.__words) {
    if (!(word in window.__shown) && text.includes(word)) {
      window.__shown[word] = null;
      requestAnimationFrame(() => { window.__shown[word] = Date.now(); });
    }
  }
}).observe(document, {childList: true, subtree: true, characterData: true});
window.__received = {};
window.WebSocket = class extends window.WebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', event => {
      const at = Date.now();
      const read = text => { for (const word of window.__words)
                               if (!(word in window.__received) && text.includes(word)) window.__received[word] = at; };
      if (typeof event.data === 'string') read(event.data);
      else if (event.data instanceof Blob) event.data.arrayBuffer().then(b => read(new TextDecoder().decode(b)));
      else read(new TextDecoder().decode(event.data));
    });
  }
};
"""


def word(round_: int, reply: int, i: int) -> str:
    """A word of the stream found nowhere else on the page (none is a part of another)."""
    return f"Zq{round_}r{reply}x{i:02d}w"


def replies(round_: int, words: int) -> list[list[str]]:
    """One round's two replies in pieces, each piece with one word of its own."""
    plan = [f"Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\nThought: "
            f"{word(round_, 1, 0)} "] + [f"{word(round_, 1, i)} " for i in range(1, words)]
    plan.append("\nAction: Relational DB\nAction input: SELECT * FROM trade_node LIMIT 3")
    answer = [f"Re-plan: N\nThought: {word(round_, 2, 0)} "] + [f"{word(round_, 2, i)} " for i in range(1, words)]
    answer.append("I now know the answer.\nFinal answer: krakow")
    return [plan, answer]


def one_round(browser, url: str, words: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Start a run on the Run page and follow it to its end: when each word was shown, and when the browser
    received the app's first message holding it (epoch s)."""
    context = browser.new_context(viewport={"width": 1600, "height": 1200})
    context.add_init_script(OBSERVER % words)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    page.get_by_role("heading", name="Scenarios").wait_for()
    page.get_by_role("link", name="Run", exact=True).click()
    page.get_by_role("heading", name="Run").wait_for()
    page.get_by_role("button", name="Start").click()
    page.get_by_text("Final answer:").first.wait_for()
    page.wait_for_function(f"Object.values(window.__shown).filter(t => t !== null).length >= {len(words)}",
                           timeout=WAIT_MS)
    shown = {w: t / 1000 for w, t in page.evaluate("window.__shown").items()}
    received = {w: t / 1000 for w, t in page.evaluate("window.__received").items()}
    context.close()
    return shown, received


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=8, help="streamed words per reply")
    parser.add_argument("--gap", type=float, nargs=2, default=(0.2, 0.9), metavar=("MIN", "MAX"),
                        help="seconds between pieces, drawn uniformly")
    parser.add_argument("--target", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    stub = StreamingStub([r for n in range(args.rounds) for r in replies(n, args.words)], hold=False,
                         gap=lambda: draw.uniform(*args.gap))
    print(f"load before: {uptime()}")
    shown_after: list[float] = []  # from the stub sending a word to the page showing it
    received_after: list[float] = []  # from the stub sending it to the browser receiving the app's message with it
    first: list[float] = []  # shown_after of each reply's first word (sent as soon as the request came)
    try:
        with tempfile.TemporaryDirectory() as home, \
                streamlit_app(Path(home), env={"OPENAI_MODEL": "stand-in", "OPENAI_BASE_URL": stub.url}) as url, \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for n in range(args.rounds):
                words = [word(n, reply, i) for reply in (1, 2) for i in range(args.words)]
                shown, received = one_round(browser, url, words)
                sent = {w: at for at, piece in stub.sent for w in words if w in piece}
                delays = [shown[w] - sent[w] for w in words]
                shown_after += delays
                received_after += [received[w] - sent[w] for w in words if w in received]
                first += [shown[w] - sent[w] for w in words if w.endswith("x00w")]
                print(f"round {n + 1}: median {statistics.median(delays):.2f} s over {len(words)} words, "
                      f"worst {max(delays):.2f} s")
            browser.close()
    finally:
        stub.close()
    print(f"load after: {uptime()}")
    median = statistics.median(shown_after)
    miss = median > args.target
    print(f"streamed words shown after they were sent, n={len(shown_after)}: median {median:.2f} s, "
          f"90th percentile {quantile(shown_after, 0.9):.2f} s, worst {max(shown_after):.2f} s (target: median <= "
          f"{args.target} s){'  MISS' if miss else ''}")
    print(f"  of which in the browser's hands (received to shown): median "
          f"{statistics.median(shown_after) - statistics.median(received_after):.2f} s; the app's message with "
          f"the word reached the browser after a median {statistics.median(received_after):.2f} s (n="
          f"{len(received_after)})")
    print(f"first words of a reply, n={len(first)}: median {statistics.median(first):.2f} s, "
          f"worst {max(first):.2f} s")
    sys.exit(1 if miss else 0)


if __name__ == "__main__":
    main()
