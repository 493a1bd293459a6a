"""Strict reading of query and path parameters: ASCII digits only, bounded ranges.

A value that does not fit raises BadParam naming the parameter; the page wrapper answers 400 with
that text (never a 500: `str.isdigit()` accepts '²', SQLite overflows past 2**63, a limit of 0
divides by zero).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_ID = 2**63 - 1  # the largest id a BIGINT column holds
MAX_PAGE = 100_000
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII only: re's [0-9] is not \d


class BadParam(ValueError):
    """A query or path parameter out of shape or range; str() names it."""

    def __init__(self, name: str, problem: str) -> None:
        self.name, self.problem = name, problem
        super().__init__(f"{name}: {problem}")


def whole(name: str, text: str, lo: int, hi: int) -> int:
    """`text` as an int in [lo, hi], or BadParam."""
    if not _DIGITS.fullmatch(text) or not lo <= int(text) <= hi:
        raise BadParam(name, f"must be a whole number from {lo} to {hi}, got {text[:40]!r}")
    return int(text)


def int_param(query: Mapping[str, str], name: str, default: int | None, lo: int, hi: int) -> int | None:
    """An optional integer query parameter (absent or empty: `default`)."""
    text = query.get(name, "")
    return default if text == "" else whole(name, text, lo, hi)


def page_param(query: Mapping[str, str]) -> int:
    """`page`: 1 when absent."""
    return int_param(query, "page", 1, 1, MAX_PAGE) or 1


def check_ids(path_params: Mapping[str, object]) -> None:
    """Integer path parameters (`{task_id:int}` takes any run of ASCII digits) within what a row id holds."""
    for name, value in path_params.items():
        if isinstance(value, int) and not 0 <= value <= MAX_ID:
            raise BadParam(name, f"must be a whole number from 0 to {MAX_ID}")
