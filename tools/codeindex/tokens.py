"""Code-aware tokens: identifiers kept whole and split (camelCase, snake_case), CJK segmented by jieba."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xihe.tools.codeindex.zhdict import ZhSource

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# HTTPServer -> HTTP Server; getX509Cert -> get X509 Cert; parse2json -> parse 2 json
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "self",
        "cls",
        "none",
        "true",
        "false",
        "return",
        "returns",
        "def",
        "function",
        "method",
        "class",
        "object",
        "value",
        "values",
        "given",
        "used",
        "use",
        "using",
        "should",
        "may",
        "must",
        "also",
        "all",
        "any",
        "each",
        "not",
        "no",
        "new",
        "get",
        "set",
    ]
)
# Chinese function words and question words that carry nothing to match in code
CJK_STOP_WORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "把",
        "被",
        "将",
        "对",
        "从",
        "到",
        "为",
        "中",
        "里",
        "上",
        "下",
        "个",
        "这",
        "那",
        "这个",
        "那个",
        "哪个",
        "哪里",
        "哪儿",
        "什么",
        "怎么",
        "怎样",
        "如何",
        "吗",
        "呢",
        "吧",
        "啊",
        "有",
        "没有",
        "会",
        "能",
        "可以",
        "要",
        "需要",
        "一个",
        "一下",
        "之后",
        "之前",
        "时候",
        "时",
        "后",
        "前",
        "是否",
        "其",
        "它",
        "他",
        "我",
        "我们",
        "你",
        "代码",
        "函数",
        "方法",
        "实现",
        "哪些",
        "逻辑",
        "处理",
        "进行",
        "如果",
        "使用",
        "用",
        "用于",
        "通过",
        "所",
        "等",
    ]
)


def split_identifier(word: str) -> list[str]:
    """Split one identifier into its lowercase parts: `parseHTTPHeader_v2` -> parse, http, header, v2."""
    parts: list[str] = []
    for chunk in word.split("_"):
        if chunk:
            parts.extend(p.lower() for p in _CAMEL.findall(chunk))
    return parts


def _stem(word: str) -> str:
    """A tiny plural stripper so 'headers' meets 'header' (full stemming hurt identifiers)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def has_cjk(text: str) -> bool:
    """Whether the text contains a CJK ideograph."""
    return _CJK.search(text) is not None


WORD_CACHE_SIZE = 500_000


class Tokenizer:
    """Turns code or questions into BM25 tokens; owns its jieba segmenter (loaded on first CJK text)."""

    def __init__(self, zh: ZhSource | None = None) -> None:
        self._jieba: Any = None
        self.zh = zh  # prebuilt jieba frequencies (zhdict.py): segmenting a question loads no dictionary
        # word -> its tokens: identifiers repeat thousands of times in a repository, and splitting and
        # stemming them was half of a full build's CPU time; bounded so a long-lived index stays small
        self._words: dict[str, tuple[str, ...]] = {}

    def _segmenter(self) -> Any:
        if self._jieba is None:
            from xihe.tools.codeindex.zhdict import jieba_module

            jieba = jieba_module()  # loading the dictionary costs ~0.5 s, only CJK text needs it

            # jieba logs "Building prefix dict..." at DEBUG/INFO on its own logger; keep our output quiet
            logging.getLogger("jieba").setLevel(logging.WARNING)
            jieba.setLogLevel(logging.WARNING)
            self._jieba = jieba.Tokenizer()
        return self._jieba

    def cjk_words(self, text: str) -> list[str]:
        """Segment the CJK runs of `text` into words, without stop words."""
        words: list[str] = []
        prebuilt = self.zh.get() if self.zh is not None else None
        for run in re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+", text):
            for w in prebuilt.segment(run) if prebuilt is not None else self._segmenter().lcut(run):
                if w not in CJK_STOP_WORDS and w.strip():
                    words.append(w)
        return words

    def tokens(self, text: str) -> list[str]:
        """All tokens of `text`, in order, with repeats (BM25 counts them)."""
        out: list[str] = []
        cache = self._words
        for word in _WORD.findall(text):
            toks = cache.get(word)
            if toks is None:
                if _CJK.match(word):
                    out.extend(self.cjk_words(word))
                    continue
                toks = word_tokens(word)
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                cache[word] = toks
            out.extend(toks)
        return out


def word_tokens(word: str) -> tuple[str, ...]:
    """The tokens of one non-CJK word: the whole identifier (when compound) and its stemmed parts."""
    if word.isdigit():
        return ()
    out: list[str] = []
    lower = word.lower()
    parts = split_identifier(word)
    if len(parts) > 1 and lower.strip("_") not in STOP_WORDS:
        out.append(lower.strip("_"))  # the whole identifier: exact symbol searches hit it
    for part in parts:
        if len(part) > 1 and part not in STOP_WORDS and not part.isdigit():
            out.append(_stem(part))
    return tuple(out)
