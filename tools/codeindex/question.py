"""An evaluation question: its text, the units that answer it, its group and its dev/test split."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

GROUPS = ("docstring", "manual", "manual-zh")


@dataclass(frozen=True)
class Question:
    """One question, the units (path, qualname) that answer it, its group and split."""

    text: str
    targets: tuple[tuple[str, str], ...]
    group: str  # docstring | manual | manual-zh
    split: str  # dev | test


def split_of(text: str) -> str:
    """`dev` or `test`, fixed by the text (half of the questions each, in expectation)."""
    return "dev" if hashlib.sha1(text.encode("utf-8")).digest()[0] % 2 == 0 else "test"
