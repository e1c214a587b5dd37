"""Grading a final answer: the decision it concludes with (a trade node, or a building id, among the question's
candidates), whether that is the labelled best decision, and where it falls in a simulator's ranking.

An answer often compares before it concludes ("novgorod adds 0.02 while krakow adds 0.08, so place it in
krakow"), so the decision is not simply the first candidate named. Each mention of a candidate gets a strength
from where it stands, strongest first:

5. on a ``Final answer:`` (``Answer:``, ``Decision:``, ``Recommendation:``...) line;
4. after a conclusion cue in the same clause (so, therefore, thus, answer, best, choose, recommend, should,
   instead, ...), or followed by "is the best / is better", a superlative ("X yields the highest profit") or
   "instead";
3. in markdown emphasis (``**krakow**``);
2. the winner of a comparison ("X adds more than Y", "Y adds less than X", "but X adds more"), the first item of a
   numbered ranking (on lines or on one line) or of "Top 3: X, Y, Z", or the answer's opening words;
1. anywhere else.

A mention is dropped when it is negated or compared against: "not X", "neither X nor Y", "rather than X",
"instead of X", "than X", "over X", "X would be a mistake", "X is second", "X would yield less", the list after
"among / comparing", later items of a ranking, the lesser side of "X by 1.7 while Y only by 0.3". The decision is
the only candidate named at the strongest level found (the last such line or clause); several there ("either krakow or
novgorod") make the answer *ambiguous*, none at all (or "I cannot determine") make it decide *none*.
Ambiguous and undecided answers are not correct. Numbers count as building ids unless they read as quantities
(levels, prices, percentages); what the words are comes from the scenario model (core.scenarios.DECISION_WORDS).
"""
from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import asdict, dataclass

from core import scenarios
from core.scenarios import DECISION_WORDS, catalog
from core.model.grade import Override
from core.model.outcome import GradeStatus, RunOutcome
from core.model.question import DecisionWords
from core.model.run_settings import RunSettings

_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+|[#$£€%]", re.UNICODE)
STATUSES = ("decided", "ambiguous", "none")

_FINAL_LINE = re.compile(r"^[\s>#*_-]*(?:final answer|final decision|final|answer|decision|recommendation|conclusion"
                         r"|verdict|my choice|choice|my pick|pick)[*_]*\s*(?::|[-–—]\s)[*_\s]*(.*)$", re.I | re.M)
_CUE = re.compile(r"\b(?:so|therefore|thus|hence|consequently|accordingly|in conclusion|to conclude|overall|in summary"
                  r"|answer|best|optimal|optimum|ideal|choose|chose|choosing|pick|picking|select|selecting"
                  r"|recommend|recommended|recommendation|recommends|should|instead|go with|opt for|winner"
                  r"|top choice|decision|conclude|most profitable|most effective|clear choice)\b", re.I)
_NOT_A_CUE = re.compile(r"\b(?:second|next|third|2nd|3rd)[- ]best\b|\bshould not\b|\bshouldn't\b", re.I)
_BREAK = re.compile(r"\b(?:because|since|while|whereas|although|though|but|than|compared|versus|vs|unlike|which"
                    r"|given|whilst)\b|;|\bas (?:it|its|this|that|the)\b", re.I)
_NEGATION = re.compile(r"(?:\bnot\b|n't\b|\bnever\b|\bno\b|\bneither\b|\bnor\b|\brather than\b|\binstead of\b|\bthan\b|\bover\b|\bversus\b"
                       r"|\bvs\b|\bcompared (?:to|with)\b|\bunlike\b|\bavoid\b|\bavoiding\b|\bexcept\b|\bahead of\b"
                       r"|\bbeats?\b|\boutperforms?\b|\bagainst\b|\bexclude\b|\bdiscard\b|\bskip\b|>)"
                       r"(?:\W+\w+){0,4}\W*$", re.I)
_AFTER_NEGATION = re.compile(r"^[\W_]*(?:\w+\W+){0,2}?(?:would be a mistake|is a mistake|would be worse|is worse"
                             r"|is not\b|isn't|is wrong|is inferior|is suboptimal|is a poor|is a weak|would not"
                             r"|wouldn't|does not|doesn't|loses|falls? (?:short|behind)"
                             r"|(?:comes?|ranks?|is|in|placed|would be|would come) (?:only )?"
                             r"(?:second|2nd|third|3rd|last)|second[- ]best|runner[- ]up|should be avoided"
                             r"|is not recommended|ranks? lower|is less|is lower|trails|(?:a\s+)?(?:distant|close)\s+(?:second|third))", re.I)
#: A clause stating that an action has no (or the wrong) effect: "1518 by 5 will not decrease the price", "it is not
#: possible to decrease it by raising 818": the candidate in it is not chosen.
_NEGATIVE_CLAIM = re.compile(r"\b(?:will not|won't|would not|wouldn't|does not|doesn't|did not|didn't|cannot|can't"
                             r"|can not|(?:is|are|was|would be) not possible|impossible)\b(?!\s+only\b)", re.I)
#: A raw table row given as the answer ("0  472  19.3  57.9  3"): numbers only, no decision stated.
_TABLE_ROW = re.compile(r"^\s*[-+]?\d[\d.,]*(?:[ \t|]+[-+]?\d[\d.,eE+-]*){2,}\s*$")
_AFTER_CUE = re.compile(r"^[\W_]*(?:is|would be|remains|looks|seems|stands out as|comes out as)\s+"
                        r"(?:clearly\s+|still\s+)?"
                        r"(?:the\s+)?(?:clear\s+|obvious\s+)?(?:better|best|optimal|strongest|winner|right|top|correct"
                        r"|most profitable|most effective|ideal)\b", re.I)
_LIST_INTRO = re.compile(r"\b(?:comparing|among|between)\W*$", re.I)  # "after comparing lubeck, novgorod and krakow"
_CONTRAST = re.compile(r"\b(?:but|however|yet|still|whereas|while)\b", re.I)
_INSTEAD_AFTER = re.compile(r"^[\W_]*instead\b(?!\s+of\b)", re.I)  # "raise building 1485 instead"
_INLINE_ITEM = re.compile(r"(?:^|[\s:,;(])(\d{1,2})[.)]\s*$")  # "1. novgorod 2. krakow" on one line
_RANKING_HEAD = re.compile(r"\b(?:top(?:\s+\d+|\s+(?:three|five))?|ranking|ranked|in order(?: of \w+)?)"
                           r"(?:\s+(?:candidates|choices|picks|options|nodes|buildings))?\s*[:–—-]\s*$", re.I)
_LATER_ITEM = re.compile(r"^\s*(?:,|>|then|,\s*then|→|->)\s*$", re.I)  # "Top 3: krakow, novgorod, lubeck"
_ONLY_BY = re.compile(r"^[\W_]*(?:\w+\W+){0,4}?(?:only|just|merely)\s+(?:by\s+)?(?:about\s+)?[-+−]?[$£€]?\d", re.I)
_CONTRASTED = re.compile(r"\b(?:while|whereas|whilst|but|compared (?:to|with))\b", re.I)
_UNDECIDED = re.compile(r"\bcannot (?:be )?(?:determine|decide|tell|say|identify|conclude)|\bcan't (?:determine|decide"
                        r"|tell|say)|\bunable to\b|\bnot (?:possible|able) to\b|\binsufficient\b|\bnot enough "
                        r"(?:information|data)\b|\bno (?:single |clear )?(?:best|winner|answer)\b|\bunclear\b"
                        r"|\bdepends on\b|\bneed more (?:data|information)\b", re.I)
_EMPHASIS = re.compile(r"\*\*(.+?)\*\*|__(.+?)__|(?<![*\w])\*(?!\s)([^*\n]+?)\*(?![*\w])")
_NUMBERED = re.compile(r"^\s*(?:#?(\d{1,2})[.)]|(?:rank\s*)?#(\d{1,2})\b)\s*", re.I | re.M)
_PARENTHESES = re.compile(r"\([^()]*\)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def normalize_name(name: str) -> str:
    """A trade node name without case, accents, spaces, underscores or hyphens: ``Baltic Sea`` -> ``balticsea``."""
    plain = unicodedata.normalize("NFKD", str(name)).encode("ascii", "ignore").decode()
    return "".join(_WORD.findall(plain.lower()))


@dataclass(frozen=True)
class Grade:
    """The decision read from a final answer (None unless ``status`` is ``decided``), every candidate it names in
    order of appearance, whether the decision is the label (None when the question has no label; an ambiguous
    or undecided answer is not correct), the status (decided / ambiguous / none) and why."""

    decision: str | int | None
    mentions: tuple
    correct: bool | None
    status: str = "none"
    reason: str = ""


@dataclass(frozen=True)
class _Mention:
    candidate: str | int
    start: int
    end: int


def _name_mentions(answer: str, candidates: list[str]) -> list[_Mention]:
    """Candidates named in the answer with their spans, a longer name winning where names overlap."""
    plain = unicodedata.normalize("NFKD", answer).encode("ascii", "ignore").decode()
    if len(plain) != len(answer):  # accents dropped: spans would shift, so match on a same-length copy
        plain = "".join(c if c.isascii() else (unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode()
                                                or " ")[:1] for c in answer)
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(plain.lower())]
    keys = {normalize_name(c): c for c in candidates}
    longest = max((len(_WORD.findall(str(c).lower())) for c in candidates), default=0) + 1
    found, i = [], 0
    while i < len(words):
        for j in range(min(len(words), i + longest), i, -1):  # longest window first
            candidate = keys.get("".join(w for w, _, _ in words[i:j]))
            if candidate is not None:
                found.append(_Mention(candidate, words[i][1], words[j - 1][2]))
                i = j
                break
        else:
            i += 1
    return found


def _last_words(text: str, n: int) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)][-n:]


def _id_mentions(answer: str, candidates: list[int], words: DecisionWords) -> list[_Mention]:
    """Candidate ids in the answer with their spans: whole numbers (not decimals) that are candidates, unless they
    read as a quantity (``by 5 levels``, ``price 40``) and no id cue (``building``, ``id``, ``#``) stands before, nor
    another candidate after it in a list."""
    ids, found = set(candidates), []
    for m in _TOKEN.finditer(answer):
        text = m.group()
        if not text.isdigit() or int(text) not in ids:
            continue
        before, after = answer[max(0, m.start() - 60):m.start()], answer[m.end():m.end() + 30]
        if re.match(r"[.,]\d", after) or re.search(r"\d[.,]$", before):
            continue  # part of a decimal or a thousands-separated number
        near = _last_words(before, 3)
        cued = bool(near) and near[-1] in words.id_cues or before.rstrip().endswith("#")
        if not cued:
            following = [t.lower() for t in _TOKEN.findall(after)][:2]
            if following[:1] and following[0] in ("more", "extra", "additional", "new"):
                following = following[1:]  # "5 more levels"
            listed = re.match(r"\s*(?:,|\bor\b|\band\b)\s*(?:or\s+|and\s+)?(\d+)\b", after)
            if listed and int(listed.group(1)) in ids:
                pass  # the first of a list of candidates ("any of 2677, 2668 or 2655"), not a quantity
            elif (near and near[-1] in words.quantity_before) or (following and following[0] in words.quantity_after):
                continue
        found.append(_Mention(int(text), m.start(), m.end()))
    return found


def _mentions(answer: str, scenario: str, candidates: list) -> list[_Mention]:
    words = DECISION_WORDS[scenario]
    return _name_mentions(answer, candidates) if words.by == "name" else _id_mentions(answer, candidates, words)


def extract_decision(answer: str, scenario: str, candidates: list) -> tuple[str | int | None, tuple]:
    """The decision an answer concludes with (None when ambiguous or undecided), and all candidates it names
    (duplicates removed, in order)."""
    g = grade(answer, scenario, candidates, None)
    return g.decision, g.mentions


def _spans(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def _inside(pos: int, spans) -> tuple[int, int] | None:
    return next(((a, b) for a, b in spans if a <= pos < b), None)


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _final_lines(answer: str) -> list[tuple[int, int]]:
    """The spans of what follows each "Final answer:" (the next line when it stands alone on its line)."""
    finals = []
    for m in _FINAL_LINE.finditer(answer):
        start, end = m.start(1), m.end(1)
        if not m.group(1).strip():
            nxt = re.match(r"\s*\n\s*([^\n]*)", answer[m.end(1):])
            if nxt:
                start, end = m.end(1) + nxt.start(1), m.end(1) + nxt.end(1)
        finals.append((start, end))
    return finals


def _numbered_items(answer: str) -> dict[tuple[int, int], int]:
    """The lines of a numbered list: line span -> item number."""
    numbered = {}
    for m in _NUMBERED.finditer(answer):
        line_end = answer.find("\n", m.start())
        numbered[(m.start(), len(answer) if line_end < 0 else line_end)] = int(m.group(1) or m.group(2))
    return numbered


@dataclass
class _Reading:
    """What reading every mention of one answer shares: its sentences, final answer lines, emphasis, numbered and
    inline rankings, and the scenario's comparison words as patterns."""

    answer: str
    mentions: list[_Mention]
    finals: list[tuple[int, int]]
    emphasis: list[tuple[int, int]]
    sentences: list[tuple[int, int]]
    numbered: dict[tuple[int, int], int]
    first_item: int | None
    better: str  # the scenario's "better" comparatives, as an alternation
    worse: str
    called_best: re.Pattern  # "... the highest" after a mention
    ends_comparing: re.Pattern  # "but krakow adds more." (group 1: the better side)
    inline: list[int | None]  # each mention's "1." / "2)" just before it, when written on one line
    inline_ranking: bool

    @classmethod
    def of(cls, answer: str, scenario: str, mentions: list[_Mention]) -> _Reading:
        words = DECISION_WORDS[scenario]
        numbered = _numbered_items(answer)
        better = "|".join(map(re.escape, words.better))
        worse = "|".join(map(re.escape, words.worse))
        best = "|".join(map(re.escape, filter(None, map(_superlative, words.better))))
        inline = [_INLINE_ITEM.search(answer[max(0, m.start - 6):m.start]) for m in mentions]
        inline = [int(x.group(1)) if x else None for x in inline]
        return cls(answer, mentions, _final_lines(answer), _spans(_EMPHASIS, answer), _sentences(answer), numbered,
                   min(numbered.values(), default=None), better, worse,
                   re.compile(rf"^[\W_]*(?:\w+\W+){{0,4}}?(?:the\s+)?(?:{best})\b", re.I),
                   re.compile(rf"^[\W_]*(?:\w+\W+){{0,4}}?(?:(?:slightly|much|far|even|clearly)\s+)?"
                              rf"(?:({better})(?:\s+\w+)?|{worse})\W*$", re.I),
                   inline, {1, 2} <= set(inline))


@dataclass
class _Around:
    """One mention (the ``i``-th) in its sentence: the text before it (from the previous mention in the sentence),
    after it (to the next), its clause, and the list item it stands in."""

    i: int
    m: _Mention
    sentence: tuple[int, int]
    before: str
    after: str
    clause_before: str
    clause: str
    than: re.Match | None  # "... than" right before it
    item: tuple[int, int] | None  # the numbered list line it stands in
    ending: re.Match | None  # a comparison ending its part of the sentence

    @classmethod
    def of(cls, r: _Reading, i: int) -> _Around:
        answer, m, mentions = r.answer, r.mentions[i], r.mentions
        sentence = _inside(m.start, r.sentences) or (m.start, m.end)
        previous_end = max([p.end for p in mentions[:i] if p.end <= m.start and p.end > sentence[0]],
                           default=sentence[0])
        before = answer[previous_end:m.start]
        nxt_start = next((p.start for p in mentions[i + 1:] if p.start >= m.end), sentence[1])
        after = answer[m.end:min(nxt_start, sentence[1])]
        clause_before = answer[sentence[0]:m.start]
        clause = (re.split(_BREAK, clause_before)[-1] + answer[m.start:m.end]
                  + re.split(_BREAK, answer[m.end:sentence[1]])[0])
        return cls(i, m, sentence, before, after, clause_before, clause,
                   re.search(r"\bthan\b(?:\W+\w+){0,4}\W*$", before, re.I), _inside(m.start, r.numbered),
                   r.ends_comparing.match(after))

    def follows_in_sentence(self, r: _Reading) -> bool:
        """Whether the mention before it stands in the same sentence."""
        return self.i > 0 and r.mentions[self.i - 1].end > self.sentence[0]


def _better_of_a_comparison(r: _Reading, a: _Around) -> bool:
    """Whether the mention follows "than" after a worse comparative ("B adds less than A": A wins)."""
    if not (a.than and a.follows_in_sentence(r)):
        return False
    between = r.answer[r.mentions[a.i - 1].end:a.m.start]
    return bool(re.search(rf"\b(?:{r.worse})\b", between, re.I)) and not re.search(rf"\b(?:{r.better})\b",
                                                                                    between, re.I)


def _negated(r: _Reading, a: _Around, out: list, ranking_head) -> bool:
    """Whether the mention is negated, the worse side of a comparison or a later item of a ranking."""
    answer, m, before, after = r.answer, a.m, a.before, a.after
    if _NEGATION.search(before) or _AFTER_NEGATION.search(after) or _LIST_INTRO.search(before) or \
            _NEGATIVE_CLAIM.search(a.clause):
        return True
    if out and out[-1][0] < 0 and a.follows_in_sentence(r) and \
            re.fullmatch(r"[\s,]*(?:or|and|nor|,)?[\s,]*", before, re.I) and \
            m.candidate not in {p.candidate for p in r.mentions[:a.i]}:
        return True  # "not in krakow or novgorod": the negation carries over a coordination
    if re.match(rf"^\W*(?:\w+\W+){{0,4}}?(?:{r.worse})\b[^.;]*\bthan\b", after, re.I):
        return True  # "A adds less than B": A is the worse side
    if a.ending and not a.ending.group(1):
        return True  # "krakow would yield less."
    if a.item is not None and r.first_item is not None and r.numbered[a.item] != r.first_item:
        return True  # a later item of a ranking
    if r.inline_ranking and r.inline[a.i] is not None and r.inline[a.i] != 1:
        return True  # a later item of a ranking written on one line
    if ranking_head == a.sentence and _LATER_ITEM.match(before):
        return True  # a later item of "Top 3: X, Y, Z"
    # "1485 lowers it by 1.7 while 1539 only by 0.3": the lesser side
    sentence = answer[a.sentence[0]:a.sentence[1]]
    return bool(_ONLY_BY.match(after) and _CONTRASTED.search(sentence) and any(
        a.sentence[0] <= p.start < a.sentence[1] and p.candidate != m.candidate for p in r.mentions))


def _concluded(r: _Reading, a: _Around) -> tuple[int, tuple[int, int], str] | None:
    """A mention the answer concludes with (strength 4-5): on a final answer line, after a conclusion cue, called
    the best."""
    answer, m, sentence = r.answer, a.m, a.sentence
    final = _inside(m.start, r.finals)
    if final and not _inside(m.start, _spans(_PARENTHESES, answer[:final[1]])):
        return 5, final, "named on the final answer line"
    cues = [c for c in _CUE.finditer(a.clause_before) if not _NOT_A_CUE.search(
        a.clause_before[max(0, c.start() - 8):c.end() + 4])]
    cue = cues[-1] if cues else None
    if cue and not _BREAK.search(a.clause_before[cue.end():]):
        return 4, (sentence[0] + cue.start(), sentence[1]), f"after the conclusion cue {cue.group().lower()!r}"
    if _AFTER_CUE.search(a.after):
        return 4, sentence, "called the best"
    superlative = r.called_best.search(a.after)
    contrast = _CONTRAST.search(answer[m.end:sentence[1]])
    if contrast and any(m.end + contrast.end() <= p.start < sentence[1] for p in r.mentions[a.i + 1:]):
        superlative = None  # "lubeck has the highest power, but krakow yields more": the contrast decides
    if superlative and not re.search(r"\b(?:second|third|2nd|3rd|least)\b", superlative.group(), re.I):
        return 4, (m.start, sentence[1]), f"said to be the {superlative.group().split()[-1].lower()}"
    if _INSTEAD_AFTER.search(a.after):
        return 4, sentence, "after the conclusion cue 'instead'"
    return None


def _favoured(r: _Reading, a: _Around, heads_ranking: bool) -> tuple[int, tuple[int, int], str]:
    """A mention the answer does not conclude with: emphasised (3), first of a ranking or the better side of a
    comparison (2), compared against (-1), or only named (1)."""
    answer, m, sentence = r.answer, a.m, a.sentence
    if _inside(m.start, r.emphasis):
        return 3, sentence, "emphasised"
    if a.item is not None:
        return 2, a.item, "first of a numbered ranking"
    if heads_ranking:
        return 2, sentence, "first of a ranking"
    if r.inline_ranking and r.inline[a.i] == 1:
        return 2, sentence, "first of a numbered ranking"
    if a.ending:
        return 2, sentence, "the better side of a comparison"
    if a.i == 0 and re.match(r"^[\W_]*(?:(?:the|my|our)\s+)?(?:\w+\s+)?$", answer[:m.start], re.I) and \
            re.match(r"^[*_\s]*(?:[.:!;(—–-]|,\s*(?:with|because|since|as|which)|$)", answer[m.end:]):
        return 2, sentence, "the answer's opening words"
    if a.than and re.search(rf"\b(?:{r.better})\b", answer[sentence[0]:m.start], re.I):
        return -1, sentence, "compared against"
    return 1, sentence, "named"


def _strengths(answer: str, scenario: str, mentions: list[_Mention]) -> list[tuple[int, int, str]]:
    """Per mention: (strength 0-5, the span of the line or clause it concludes in, why); strength -1 = negated."""
    r = _Reading.of(answer, scenario, mentions)
    ranking_head = None  # the sentence of "Top 3: X, Y, Z": X leads, the others are later items
    out = []
    for i in range(len(mentions)):
        a = _Around.of(r, i)
        if _better_of_a_comparison(r, a):
            out.append((2, a.sentence, "the better side of a comparison"))
        elif _negated(r, a, out, ranking_head):
            out.append((-1, a.sentence, "negated or compared against"))
        else:
            heads_ranking = bool(_RANKING_HEAD.search(a.before))
            if heads_ranking:
                ranking_head = a.sentence
            out.append(_concluded(r, a) or _favoured(r, a, heads_ranking))
    return out


def _superlative(comparative: str) -> str | None:
    """``more`` -> ``most``, ``lower`` -> ``lowest``, ``bigger`` -> ``biggest``; None for a word not ending in -er."""
    special = {"more": "most", "better": "best"}
    return special.get(comparative) or (comparative[:-2] + "est" if comparative.endswith("er") else None)


def _join(names) -> str:
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def read_decision(answer: str | None, scenario: str, candidates: list) -> tuple[str | int | None, tuple, str, str]:
    """(decision, mentions, status, reason) of a final answer; see the module's docstring for the reading."""
    answer = answer or ""
    if _TABLE_ROW.match(answer):
        return None, (), "none", "it is a raw table row, not a stated decision"
    found = _mentions(answer, scenario, candidates)
    mentions = tuple(dict.fromkeys(m.candidate for m in found))
    if not found:
        why = ("it says it cannot decide" if _UNDECIDED.search(answer) else "it names no candidate"
               if answer.strip() else "there is no final answer")
        return None, mentions, "none", why
    strengths = _strengths(answer, scenario, found)
    top = max(s for s, _, _ in strengths)
    if top < 0:
        return None, mentions, "none", "every candidate it names is negated or compared against"
    if _UNDECIDED.search(answer) and top < 4:
        return None, mentions, "ambiguous" if len(mentions) > 0 else "none", \
            f"it says it cannot decide (it names {_join(mentions)})"
    # the last line or clause at the strongest level is the conclusion
    at_top = [(m, span, why) for m, (s, span, why) in zip(found, strengths) if s == top]
    last_span = at_top[-1][1]
    chosen = [(m, why) for m, span, why in at_top if span == last_span]
    named = list(dict.fromkeys(m.candidate for m, _ in chosen))
    if len(named) == 1:
        return named[0], mentions, "decided", f"{named[0]}: {chosen[0][1]}"
    negated = {m.candidate for m, (s, _, _) in zip(found, strengths) if s < 0}
    left = [c for c in named if c not in negated]
    if len(left) == 1:
        return left[0], mentions, "decided", f"{left[0]}: {chosen[0][1]}, the others negated"
    return None, mentions, "ambiguous", f"it commits to no single candidate: {_join(named)}"


def same_decision(decision, label) -> bool:
    """Whether a decision equals a label: names compared normalised, ids as integers."""
    if isinstance(label, int) or isinstance(decision, int):
        try:
            return int(decision) == int(label)
        except (TypeError, ValueError):
            return False
    return normalize_name(decision) == normalize_name(label)


def paper_rule(answer: str | None, label) -> bool | None:
    """The PlanRAG authors' rule: an answer is correct when the label appears in it (an answer "... is not 2399"
    counts for label 2399); None without a label. Shown beside the paper's figures, never as the grade."""
    if label is None:
        return None
    answer = str(answer or "")
    if isinstance(label, int) or str(label).isdigit():
        return re.search(rf"(?<!\d){int(label)}(?!\d)", answer) is not None
    return normalize_name(label) in normalize_name(answer)


def grade(answer: str | None, scenario: str, candidates: list, label) -> Grade:
    """Grade a final answer against the label (``correct`` None when there is no label)."""
    decision, mentions, status, reason = read_decision(answer, scenario, candidates)
    correct = None if label is None else (decision is not None and same_decision(decision, label))
    return Grade(decision, mentions, correct, status, reason)


@dataclass(frozen=True)
class Placement:
    """Where a decision falls in a simulator's ranking: 1-based rank among ``of`` candidates (the best position
    of its tie group), how many share it (``tied``, 1 for none), regret against the best (>= 0; 0 when tied
    with the best) and gain over doing nothing (> 0 is an improvement), in the ranking's score units."""

    rank: int
    of: int
    regret: float
    gain: float
    tied: int = 1

    @property
    def optimal(self) -> bool:
        """Whether the decision is a best decision (regret 0 by the simulator)."""
        return self.regret == 0

    def text(self) -> str:
        """``2 of 79`` or ``tied 3rd–79th of 79``."""
        return rank_text(self.rank, self.of, self.tied)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def rank_text(rank: int, of: int, tied: int | None = 1) -> str:
    """A rank as pages and reports show it: ``2 of 79``, or for a tie group ``tied 3rd–79th of 79``."""
    if tied and tied > 1:
        return f"tied {_ordinal(rank)}–{_ordinal(rank + tied - 1)} of {of}"
    return f"{rank} of {of}"


def placement_text(placement: dict | None) -> str | None:
    """``rank_text`` of a stored placement (a dict), None without one."""
    if not placement:
        return None
    return rank_text(placement["rank"], placement["of"], placement.get("tied", 1))


def place(decision, ranking) -> Placement | None:
    """The decision's place in a ``sims`` Ranking, e.g. ``core.scenarios.ranking(question, database)`` (None when
    there is no decision or it is not a candidate)."""
    rank = None if decision is None else ranking.rank_of(decision)
    if rank is None:
        return None
    return Placement(rank, len(ranking.entries), ranking.regret(decision), ranking.gain(decision),
                     ranking.tied(decision))


def make_override(decision, label, by: str, note: str = "", correct: bool | None = None,
                  placement: dict | None = None) -> Override:
    """An override for ``decision`` (``correct`` from the label unless given; ``placement``: its place in the
    simulator's ranking), stamped now."""
    if correct is None and label is not None:
        correct = decision is not None and same_decision(decision, label)
    return Override(decision, correct, by or "analyst", time.time(), note, placement)


@dataclass(frozen=True)
class Verdict:
    """The workbench's one verdict (``judge``) on a final answer or an analyst's decision, as ``core grade``, runs,
    benchmarks and overrides give it: the graded reading (decision, mentions, correct, status, reason), the label,
    whether the candidates named are exactly those tied for the best score (``best_group``), and the decision's
    place in the simulator's ranking of ``of`` candidates."""

    decision: str | int | None
    mentions: tuple
    correct: bool | None  # None without a label or without an answer (not answered: neither right nor wrong)
    label: str | int | None
    status: GradeStatus
    reason: str
    best_group: bool = False
    placement: Placement | None = None
    of: int | None = None  # candidates in the ranking (None: no ranking)
    all_tied: bool = False
    relative_regret: float | None = None  # the placed decision's regret in % of the best score

    @property
    def optimal(self) -> bool | None:
        """A best decision by the simulator (regret 0), or exactly the group tied for best; None when not placed."""
        if self.placement is not None:
            return self.placement.optimal
        return True if self.best_group else None


_READ = object()  # judge's ``decision`` when the decision is read from the answer


def _ranked(question, database):
    """The simulator's ranking of the question, None without a database or a simulator that can rank it."""
    if database is None:
        return None
    try:
        return scenarios.ranking(question, database)
    except ValueError:  # sims.ranking.InputError: a question the simulators cannot rank
        return None


def judge(question, database, answer: str | None = None, *, decision=_READ, candidates: list | None = None) -> Verdict:
    """The verdict on ``answer`` to ``question`` (among ``candidates``, default the question's), or, given
    ``decision``, on an analyst's decision (None: none), placed in the simulator's ranking of the question on
    ``database`` (None: not placed). Naming exactly the candidates tied for best is ambiguous, yet optimal."""
    ranked, label = _ranked(question, database), question.answer
    if decision is _READ:
        if candidates is None:
            candidates = scenarios.candidates(question, database)
        g = grade(answer, question.scenario, candidates, label)
        correct = g.correct if answer else None
    else:
        correct = None if label is None else decision is not None and same_decision(decision, label)
        g = Grade(decision, () if decision is None else (decision,), correct,
                  "none" if decision is None else "decided", "the analyst's decision")
    placement = place(g.decision, ranked) if ranked is not None else None
    best_group = (ranked is not None and g.decision is None and g.status == "ambiguous" and not ranked.all_tied
                  and set(g.mentions) == {e.candidate for e in ranked.entries if ranked.regret(e.candidate) == 0})
    reason = g.reason + ("; they are exactly the candidates tied for the best score, so the answer is optimal, "
                         "though not one decision" if best_group else "")
    return Verdict(g.decision, tuple(g.mentions), correct, label, g.status, reason, best_group, placement,
                   len(ranked.entries) if ranked is not None else None, bool(ranked is not None and ranked.all_tied),
                   ranked.relative_regret(g.decision) if placement else None)


def stored_verdict(outcome: RunOutcome, ranked) -> Verdict:
    """The verdict ``judge`` gave a run, from its stored outcome, with the ranking's facts from ``ranked`` (the
    question's ranking, None without one)."""
    p = outcome.placement
    placement = Placement(p["rank"], p["of"], p["regret"], p["gain"], p.get("tied", 1)) if p else None
    return Verdict(outcome.decision, tuple(outcome.mentions), outcome.correct, outcome.label,
                   outcome.grade_status or "none", outcome.grade_reason or "", outcome.best_group, placement,
                   len(ranked.entries) if ranked is not None else None, bool(ranked is not None and ranked.all_tied),
                   ranked.relative_regret(outcome.decision) if placement and ranked is not None else None)


def override_for(settings: RunSettings, decision, by: str, note: str = "", root=None) -> Override:
    """An override of a stored run's grade (its settings) to ``decision`` (None: no decision), judged against the
    question's label and placed in the simulator's ranking, so that rank, regret and the optimal rate follow it."""
    question = catalog.question(settings.source, settings.scenario, settings.question, root)
    v = judge(question, catalog.database(question, root), decision=decision)
    placement = {**asdict(v.placement), "relative_regret": v.relative_regret} if v.placement else None
    return make_override(v.decision, v.label, by, note, correct=v.correct, placement=placement)
