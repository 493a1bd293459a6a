"""Keep secrets out of logs, audit records, alerts and exceptions.

A `Redactor` knows the secret values loaded from the environment and masks them wherever they
appear; it also masks values under secret-looking keys in structured data.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

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
        """Register one more secret value, and its URL-encoded form (short values would mask noise)."""
        if not secret or len(secret) < 4:
            return
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            if form not in self._secrets:
                self._secrets.append(form)
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
        if record.exc_info and not record.exc_text:  # a traceback ends with str(exc): mask it too
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


def excerpt(body: str, *secrets: str | None, limit: int = 200) -> str:
    """The start of an upstream response body, safe to put in an error: secrets the caller sent
    (and credential-looking URL parameters) masked, then cut to `limit` characters."""
    return Redactor(s for s in secrets if s).text(body)[:limit]
