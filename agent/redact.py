"""Keep secrets out of logs, audit records, alerts and exceptions.

A `Redactor` knows the secret values loaded from the environment and masks them wherever they
appear; it also masks values under secret-looking keys in structured data.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
_SECRET_KEY = re.compile(
    r"(pass(word)?|secret|token|api[_-]?key|aes[_-]?key|webhook[_-]?key|credential|^key$)", re.I
)
_URL_KEY = re.compile(r"([?&](?:key|token|access_token|corpsecret)=)[^&\s]+", re.I)


class Redactor:
    """Masks known secret values and secret-named fields."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        for s in secrets:
            self.add(s)

    def add(self, secret: str | None) -> None:
        """Register one more secret value (short values are ignored: they would mask noise)."""
        if secret and len(secret) >= 4 and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)

    def text(self, value: str) -> str:
        """Mask secrets and credential-bearing URL parameters in free text."""
        for s in self._secrets:
            if s in value:
                value = value.replace(s, MASK)
        return _URL_KEY.sub(lambda m: m.group(1) + MASK, value)

    def data(self, value: Any, secret_fields: Iterable[str] = ()) -> Any:
        """Deep-copy `value`, masking secret-named keys, the given fields and known secret values."""
        fields = set(secret_fields)
        if isinstance(value, dict):
            return {
                k: (
                    MASK
                    if (k in fields or _SECRET_KEY.search(str(k))) and v not in (None, "")
                    else self.data(v, fields)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v, fields) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


class RedactingFilter(logging.Filter):
    """A logging filter that runs every record's final message through a Redactor."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        msg = self.redactor.text(record.getMessage())
        record.msg, record.args = msg, None
        return True
