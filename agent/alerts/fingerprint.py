"""Error fingerprints: the same failure cause gives the same key whatever ids, times and paths it names."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

# Order matters: the specific shapes go before bare numbers eat their digits.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), "<uuid>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@~+-]+){2,}[/\\]?"), "<path>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\d{4}[-/]\d{2}[-/]\d{2}"), "<date>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}([.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b"), "<ip>"),
    (re.compile(r"\[?[0-9a-fA-F:]*::[0-9a-fA-F:]+\]?(:\d+)?"), "<ip>"),
    (re.compile(r"\b[\w.-]+:\d{2,5}\b"), "<host:port>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"\d+"), "<n>"),
    (re.compile(r"\s+"), " "),
)


@lru_cache(maxsize=4096)
def normalize_error(text: str) -> str:
    """Strip the variable parts (numbers, hex ids, uuids, timestamps, paths, ip:port) of an error text."""
    out = text.strip()
    for pattern, repl in _RULES:
        out = pattern.sub(repl, out)
    return out.strip().lower()[:500]


def fingerprint(error: str, workflow: str = "", task: str = "") -> str:
    """A short stable key for an error; an empty error falls back to the workflow and task names."""
    norm = normalize_error(error) if error.strip() else f"<no error> {workflow}/{task}"
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]
