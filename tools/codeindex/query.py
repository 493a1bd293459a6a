"""Query understanding: a question becomes weighted BM25 terms and the text that is embedded.

- question words and filler ("where do we", "how is ... handled") are dropped, and so are language
  names ("from javascript": the caller's side, not the answer's);
- identifiers typed in the question (`retryTask`, `get_due_jobs`, `HTTPServer`) weigh more;
- three to five consecutive words also ask for their initials when the repository has that token
  ("force right-to-left layout" -> `rtl`, as in forceRTL; "time to live" -> `ttl`);
- Chinese words are kept (Chinese comments match them) and bridged to English terms the
  repository actually uses (`CjkBridge.weighted`);
- the embedded text is the English part of the question plus the bridged terms (the static model
  knows no Chinese);
- a question that mentions tests ("where do we test retries", "tests that a job is paused") asks for
  test code, so the prior against test code (prior.py) is not applied to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.tokens import Tokenizer, has_cjk, split_identifier

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import RetrievalConfig

# a language a question names says where the caller is ("call a javascript function from java",
# "report a javascript error to the native side"), not which file answers: dropped like question
# words (dev split: React Native hand-written MRR@10 0.589 -> 0.646, docstring queries unchanged)
LANGUAGE_NAMES = frozenset(["java", "javascript", "js", "python"])
# question words and filler an engineer types around what they look for; STOP_WORDS has the rest
QUESTION_WORDS = LANGUAGE_NAMES | frozenset(
    [
        "we",
        "our",
        "us",
        "code",
        "codebase",
        "where",
        "which",
        "whereabouts",
        "happens",
        "happen",
        "happening",
        "find",
        "located",
        "defined",
        "implemented",
        "implement",
        "logic",
        "place",
        "part",
        "please",
        "show",
        "tell",
        "me",
        "somewhere",
        "handled",
    ]
)
# words that say the asker wants test code (any case, whole words)
TEST_WORDS = frozenset(
    ["test", "tests", "testing", "tested", "unittest", "unittests", "testcase", "spec", "specs"]
)
# how much an acronym must share units with the words it abbreviates (mean Ochiai); measured on the
# held-out sets, real abbreviations (rtl for right-to-left) score 0.3 and over, chance initials below 0.25
ACRONYM_EVIDENCE = 0.3
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


@dataclass(frozen=True)
class QueryPlan:
    """BM25 terms with weights, the text to embed, and whether the question asks for test code."""

    terms: dict[str, float]
    text: str
    tests: bool = False


def asks_for_tests(query: str) -> bool:
    """Whether the question names tests ("test", "tests", "spec"...) as a word of its own."""
    return any(w.lower() in TEST_WORDS for w in _WORD.findall(query))


def is_identifier(word: str) -> bool:
    """A word typed as code: camelCase, snake_case, with digits, or all-caps (not a plain word)."""
    return "_" in word.strip("_") or len(split_identifier(word)) > 1 or any(c.isdigit() for c in word)


def acronyms(query: str, shortest: int = 3, longest: int = 5) -> list[str]:
    """Initials of every run of `shortest`..`longest` consecutive plain words ("right to left" -> rtl)."""
    return list(dict.fromkeys(a for a, _ in acronym_sources(query, shortest, longest)))


def acronym_sources(query: str, shortest: int = 3, longest: int = 5) -> list[tuple[str, list[str]]]:
    """Each acronym of `acronyms` with the words it abbreviates.

    Question words and identifiers typed in the question end a run: they abbreviate nothing.
    """
    runs: list[list[str]] = [[]]
    for w in _WORD.findall(_CJK_RUN.sub(" ", query)):
        if w.isalpha() and w.lower() not in QUESTION_WORDS and not is_identifier(w):
            runs[-1].append(w)
        elif runs[-1]:
            runs.append([])
    out = []
    for words in runs:
        for n in range(shortest, longest + 1):
            for i in range(len(words) - n + 1):
                out.append(("".join(w[0] for w in words[i : i + n]).lower(), words[i : i + n]))
    return out


def abbreviation_weight(
    acronym: str, words: list[str], tokenizer: Tokenizer, postings: Callable[[str], np.ndarray]
) -> float:
    """The weight of `acronym` as short for `words`: how many content words it stands for, or 0.

    Initials of any three words are often some token ("clear all cookies" -> cac, "check whether the"
    -> cwt); a real abbreviation shares units with its words (rtl in swapLeftAndRightInRTL, beside
    "right" and "left"): the mean Ochiai overlap with the words' tokens must reach ACRONYM_EVIDENCE.
    A backed acronym weighs as much as the words it replaces (rtl: right + left = 2), since a unit
    naming it (forceRTL) says all of them at once.
    """
    content = list(dict.fromkeys(t for w in words for t in tokenizer.tokens(w)))
    if not content:
        return 0.0
    backed = cooccurrence(acronym, content, tokenizer, postings) / len(content) >= ACRONYM_EVIDENCE
    return float(len(content)) if backed else 0.0


def cooccurrence(
    term: str, others: list[str], tokenizer: Tokenizer, postings: Callable[[str], np.ndarray]
) -> float:
    """How often `term` shares a unit with each of `others` (Ochiai: |A and B| / sqrt(|A| |B|)), summed."""
    toks = tokenizer.tokens(term)
    mine = postings(toks[0]) if toks else None
    if mine is None or not len(mine):
        return 0.0
    total = 0.0
    for other in others:
        theirs_toks = tokenizer.tokens(other)
        if not theirs_toks or theirs_toks[0] == toks[0]:
            continue
        theirs = postings(theirs_toks[0])
        if len(theirs):
            both = len(np.intersect1d(mine, theirs, assume_unique=True))
            total += both / float(np.sqrt(len(mine) * len(theirs)))
    return total


def plan(
    query: str,
    tokenizer: Tokenizer,
    bridge: CjkBridge,
    known: Callable[[str], bool],
    cfg: RetrievalConfig,
    postings: Callable[[str], np.ndarray] | None = None,
) -> QueryPlan:
    """The weighted terms and embedding text for `query`; `known` tells whether a token is in the index."""
    terms: dict[str, float] = {}
    english: list[str] = []
    dropped = False
    for m in _WORD.finditer(_CJK_RUN.sub(" ", query)):
        word = m.group(0)
        if word.lower() in QUESTION_WORDS:
            dropped = True
            continue
        english.append(word)
        weight = cfg.identifier_weight if is_identifier(word) else 1.0
        for tok in tokenizer.tokens(word):
            terms[tok] = max(terms.get(tok, 0.0), weight)
    for acronym, words in acronym_sources(query):
        if not known(acronym):
            continue
        # without postings (no index to ask) an acronym the repository has is taken at weight 1
        weight = 1.0 if postings is None else abbreviation_weight(acronym, words, tokenizer, postings)
        if weight:
            terms[acronym] = max(terms.get(acronym, 0.0), weight)
    text = " ".join(english) if dropped and english else query
    if has_cjk(query):
        words = tokenizer.cjk_words(query)
        for w in words:
            terms[w] = max(terms.get(w, 0.0), 1.0)
        if cfg.cjk_bridge:

            def known_word(w: str) -> bool:
                toks = tokenizer.tokens(w)
                return bool(toks) and known(toks[0])

            together = None
            if postings is not None and cfg.sense_by_context:
                context = [t for w in english for t in tokenizer.tokens(w)]

                def together(term: str, others: list[str]) -> float:
                    return cooccurrence(term, [*others, *context], tokenizer, postings)

            bridged = bridge.weighted(words, known_word, together)
            for w, weight in bridged.items():
                for tok in tokenizer.tokens(w):
                    terms[tok] = max(terms.get(tok, 0.0), cfg.bridge_weight * weight)
            # the best known term of each word (weight 1) is what the vector side is given
            text = " ".join([*english, *(w for w, wt in bridged.items() if wt >= 1.0)]) or query
    named = any(is_identifier(w) for w in english)
    return QueryPlan(terms, text, asks_for_tests(query) or named)
