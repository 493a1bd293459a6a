"""Canonical JSON and digests: the identity of a tool call's arguments."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: equal data gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_text(text: str | bytes) -> str:
    """Hex sha256 of text (UTF-8) or bytes."""
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def args_digest(tool: str, args: Any) -> str:
    """Digest binding a tool name to its canonical arguments."""
    return sha256_text(tool + "\n" + canonical_json(args))
