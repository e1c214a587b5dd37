"""A tokenizer the user points at (issue 29 section 2): a Hugging Face ``tokenizer.json`` (PLANRAG_TOKENIZER,
``--tokenizer``, the Settings page) counts a request's tokens for the context estimate, before the server's tokenize
endpoint, and the estimate says so; a missing or malformed file is a clear error. The tokenizer files are built here
by the ``tokenizers`` library itself (nothing downloaded)."""
from __future__ import annotations

import argparse
import re

import pytest

from core.model.technique import technique
from core.config.settings import LLMSettings
from core.llm.client import LLMNotConfigured, open_llm
from core.llm.tokenizer_file import TokenizerFileError, counted_by, open_tokenizer
from core.model.run_settings import Limits, RunSettings
from tests.test_agents_runtime import ACT, FINAL, make_runtime, replay

WORDS = "select trade_node from flow where the merchant should go krakow lubeck novgorod"


def build_tokenizer(path):
    """A small word-level tokenizer.json (whitespace and punctuation split; unknown words one [UNK] each)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator([WORDS], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    tokenizer.save(str(path))
    return tokenizer


@pytest.fixture
def tokenizer_file(tmp_path):
    path = tmp_path / "tokenizer.json"
    build_tokenizer(path)
    return path


def test_a_tokenizer_file_counts_as_the_library_does(tokenizer_file):
    from tokenizers import Tokenizer

    count = open_tokenizer(tokenizer_file)
    text = "SELECT trade_node FROM flow WHERE dest = 'baltic_sea'; krakow?"
    assert count(text) == len(Tokenizer.from_file(str(tokenizer_file)).encode(text, add_special_tokens=False).ids)
    assert count("krakow lubeck") == 2 and count("") == 0
    assert open_tokenizer(tokenizer_file) is count  # read once while the file stays unchanged
    assert counted_by(tokenizer_file) == "tokenizer file tokenizer.json"


def test_a_missing_or_malformed_tokenizer_file_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerFileError, match=r"^tokenizer file .*nowhere\.json not found$"):
        open_tokenizer(tmp_path / "nowhere.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerFileError, match=r"bad\.json is not a Hugging Face tokenizer\.json \("):
        open_tokenizer(bad)
    other = tmp_path / "config.json"  # JSON, but a model's config, not a tokenizer
    other.write_text('{"model_type": "qwen2", "vocab_size": 151936}')
    with pytest.raises(TokenizerFileError, match=r"config\.json is not a Hugging Face tokenizer\.json"):
        open_tokenizer(other)
    binary = tmp_path / "tokenizer.model"  # a SentencePiece model, not JSON text
    binary.write_bytes(b"\x0a\x8f\xff\xfe\x00")
    with pytest.raises(TokenizerFileError, match=r"not UTF-8 text"):
        open_tokenizer(binary)
    with pytest.raises(TokenizerFileError, match=r"^tokenizer file .*: a folder where a tokenizer file is expected"):
        open_tokenizer(tmp_path)


def test_the_model_counts_with_the_tokenizer_file_before_the_servers(tokenizer_file, monkeypatch):
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", api_key=None, tokenizer=str(tokenizer_file))
    llm = open_llm("stand-in", settings)
    assert llm.counted_by == "tokenizer file tokenizer.json" and llm.count_tokens("krakow lubeck novgorod") == 3
    served = open_llm("stand-in", LLMSettings(base_url="http://127.0.0.1:9/v1", api_key=None, tokenizer=None))
    assert served.counted_by == "the server's tokenizer"
    with pytest.raises(LLMNotConfigured, match="not found") as raised:
        open_llm("stand-in", LLMSettings(base_url="http://127.0.0.1:9/v1", api_key=None,
                                         tokenizer=str(tokenizer_file.parent / "missing.json")))
    assert raised.value.kind == "config"
    monkeypatch.setenv("PLANRAG_TOKENIZER", str(tokenizer_file))
    assert LLMSettings().tokenizer == str(tokenizer_file)


def test_a_runs_context_estimate_says_it_counted_with_the_tokenizer_file(tokenizer_file, tmp_path):
    """A window too small for the first request: the run is sent to its answer, and the message gives the estimate
    the tokenizer file made (the prompt's words are mostly unknown to it: one token each) and names the file."""
    from tokenizers import Tokenizer

    runtime = make_runtime(tmp_path / "home", llm_settings=LLMSettings(api_key=None, tokenizer=str(tokenizer_file)))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", replay(tmp_path, [ACT, FINAL, FINAL]),
                                       limits=Limits(context_tokens=256)))
    record = runtime.store.get(result.run_id)
    [full] = [e for e in record.events if e.kind == "error" and "context window full" in e.message]
    assert ("tokens needed (estimate: tokenizer file tokenizer.json, with ChatML's 5 tokens a message for the chat "
            "template), ") in full.message
    state = runtime._graph_of(technique("iterrag"), RunSettings.prompts).get_state(runtime._config(result.run_id)).values
    assert state["counted_by"] == "tokenizer file tokenizer.json"
    first = "\n".join([state["prompt"], state["messages"][0]["content"]])
    tokens = len(Tokenizer.from_file(str(tokenizer_file)).encode(first, add_special_tokens=False).ids)
    need = int(full.message.split("about ", 1)[1].split(" tokens", 1)[0].replace(",", ""))
    assert tokens < need < (tokens + 16) * 1.2  # the count, with the template's tokens and the estimate's margin
    assert need < len(first) / 3  # the character estimate would have said more


def test_the_estimate_says_what_it_rests_on():
    from core.agents import guards
    from core.agents.state import completed

    def basis(**state):  # a run's state as its nodes read it
        return guards.estimate_basis(completed({"actions": 0, **state}))

    assert basis(chars_per_token=None) == "3 characters a token"
    assert basis(chars_per_token=4.2) == "the prompt tokens the server reported for the last call"
    assert basis(chars_per_token=4.2, counted_by="the server's tokenizer") == (
        "the server's tokenizer, with ChatML's 5 tokens a message for the chat template")
    assert basis(chars_per_token=4.2, counted_by="the server's tokenizer", template_tokens=5.5) == (
        "the server's tokenizer, with 5.5 tokens a message for the chat template, measured on the reported usage")


def test_the_command_line_takes_a_tokenizer_and_refuses_a_bad_one(tokenizer_file, tmp_path, capsys):
    import core.cli.main as cli
    from core.cli.args import add_llm_arguments, llm_settings

    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    assert llm_settings(parser.parse_args(["--tokenizer", str(tokenizer_file)])).tokenizer == str(tokenizer_file)
    with pytest.raises(ValueError, match="not found"):
        llm_settings(parser.parse_args(["--tokenizer", str(tmp_path / "none.json")]))
    code = cli.main(["run", "--source", "demo", "--scenario", "building", "--question", "1", "--db", "sqlite",
                     "--technique", "iterrag", "--llm", "replay:none.json", "--tokenizer", str(tmp_path / "x.json")])
    assert code == 2 and capsys.readouterr().err.startswith("error (settings): tokenizer file ")


def test_settings_takes_a_tokenizer_file_and_shows_a_bad_one(tokenizer_file, tmp_path):
    from tests.test_page_settings import open_page, shown

    at = open_page()
    at.segmented_control(key="llm_provider").set_value("compatible").run()
    at.text_input(key="llm_model").set_value("stand-in")
    at.text_input(key="llm_base_url").set_value("http://127.0.0.1:9/v1")
    at.text_input(key="llm_tokenizer").set_value(str(tmp_path / "missing.json"))
    at.button(key="llm_use").click().run()
    assert "not found" in shown(at.error[0].value) and "llm" not in at.session_state  # not taken
    at.text_input(key="llm_tokenizer").set_value(str(tokenizer_file))
    at.button(key="llm_use").click().run()
    assert at.session_state["llm"].tokenizer == str(tokenizer_file) and not at.error
    assert any("tokens counted by tokenizer file tokenizer.json" in shown(c.value) for c in at.caption)


def build_regex_tokenizer(path, pattern: str):
    """A tokenizer.json whose pre-tokenizer splits on ``pattern`` (a regular expression of the file's own)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), "isolated")
    tokenizer.save(str(path))


#: Backtracks past Oniguruma's retry limit on a long run of one letter: the Rust library panics (pyo3's
#: PanicException, a BaseException, not an Exception).
PANICS = "((a+)+)+c"
#: Backtracks within the retry limit at each of the run's positions: about a minute on 3,000 letters, hours on
#: 30,000, and no panic.
SLOW = r"a*a*(?!x)\z"
HOSTILE_TEXT = "a" * 3000 + "x"


@pytest.mark.parametrize("pattern, says", [(PANICS, "failed while counting (PanicException: "),
                                           (SLOW, "took longer than 1 s to count 3,001 characters")])
def test_a_tokenizer_that_panics_or_backtracks_without_end_is_set_aside(tmp_path, monkeypatch, pattern, says):
    """Issue 44 section B: the file counts in a process of its own, each count within COUNT_TIMEOUT_S; a panic
    or a count past it kills that process, and the file is set aside with a notice (its later counts refused at
    once): the caller's estimate falls back to the characters."""
    from core.config import home
    from core.llm import tokenizer_file

    monkeypatch.setattr(tokenizer_file, "COUNT_TIMEOUT_S", 1.0)
    path = tmp_path / "tokenizer.json"
    build_regex_tokenizer(path, pattern)
    count = open_tokenizer(path)
    assert count("krakow") == 1  # an ordinary text counts
    notices = len(home.notices())
    with pytest.raises(TokenizerFileError, match=re.escape(says)) as raised:
        count(HOSTILE_TEXT)
    assert str(raised.value).endswith("set aside, tokens are estimated from the characters")
    assert home.notices(notices) == [f"The {raised.value}."]
    with pytest.raises(TokenizerFileError, match="set aside"):
        count("krakow")  # set aside: no second wait


@pytest.mark.parametrize("pattern", [PANICS, SLOW])
def test_a_run_whose_tokenizer_panics_or_is_too_slow_goes_on_with_the_character_estimate(tmp_path, monkeypatch,
                                                                                          pattern):
    """Issue 44 section B: a panic of the native library made the run fail (before: a traceback, or a run left
    running); a slow regular expression held it for hours. Now either leaves the run to finish on the character
    estimate, the reason said as a notice."""
    from core.config import home
    from core.llm import tokenizer_file

    monkeypatch.setattr(tokenizer_file, "COUNT_TIMEOUT_S", 1.0)
    path = tmp_path / "tokenizer.json"
    build_regex_tokenizer(path, pattern)
    notices = len(home.notices())
    runtime = make_runtime(tmp_path / "home", llm_settings=LLMSettings(api_key=None, tokenizer=str(path)))
    long_act = ACT.replace("Thought: ", "Thought: " + HOSTILE_TEXT + " ", 1)  # counted with the next request
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", replay(tmp_path, [long_act, FINAL, FINAL]),
                                       limits=Limits(context_tokens=100_000)))
    record = runtime.store.get(result.run_id)
    assert record.status == "finished", (record.status, record.outcome)
    assert any("set aside, tokens are estimated from the characters" in n for n in home.notices(notices))


def test_a_tokenizer_file_over_its_cap_is_refused_before_it_is_parsed(tmp_path):
    from sims.files import MAX_BYTES, MB

    big = tmp_path / "tokenizer.json"
    with open(big, "wb") as f:
        f.truncate(MAX_BYTES["tokenizer file"] + 1)
    with pytest.raises(TokenizerFileError, match=rf"more than the {MAX_BYTES['tokenizer file'] // MB} MB"):
        open_tokenizer(big)
    assert MAX_BYTES["tokenizer file"] <= 24 * MB  # parsed at about 15 times its size: within 300 MB or so


def test_a_native_librarys_panic_within_a_run_ends_it_as_failed_with_its_reason(tmp_path):
    """Issue 44 section B: a native library's panic (pyo3's PanicException, a BaseException, not an Exception)
    escaped the run: a traceback on the command line, a run left running in the app. The tokenizer file now counts
    in a process of its own (above); a panic raised anywhere else in a run ends it as failed with its reason."""
    from tokenizers import Tokenizer

    from tests.test_agents_runtime import FakeBackend

    path = tmp_path / "tokenizer.json"
    build_regex_tokenizer(path, PANICS)
    native = Tokenizer.from_file(str(path))  # in this process: its panic is raised here

    class PanickingBackend(FakeBackend):
        def query(self, text, **kw):
            native.encode(HOSTILE_TEXT)

    with pytest.raises(BaseException) as raised:
        native.encode(HOSTILE_TEXT)
    assert not isinstance(raised.value, Exception)  # what the library raises: no Exception
    runtime = make_runtime(tmp_path / "home", backend=PanickingBackend())
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", replay(tmp_path, [ACT, FINAL, FINAL])))
    record = runtime.store.get(result.run_id)
    assert record.status == "failed" and "retry-limit-in-match" in record.outcome.error, record.outcome
    assert record.events[-1].kind == "error" and "PanicException" in record.events[-1].message
