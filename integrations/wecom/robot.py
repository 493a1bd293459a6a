"""WeCom group-robot webhook client: one POST per call, typed errors.

Errors come back as HTTP 200 with `errcode != 0`, so the body is always checked. The webhook key
is the credential: it never appears in exceptions, replies or logs (URLs are redacted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xihe.agent.errors import WeComError

if TYPE_CHECKING:  # imported by the first client: a replay or a parse of replies needs no HTTP stack
    import requests

RETRYABLE_ERRCODES = frozenset({-1, 45009, 45033})  # busy, rate limited, concurrency
FATAL_ERRCODES = frozenset({93000, 40008, 44004, 40058, 93004, 93008})  # bad key/robot, bad message
CONTENT_ERRCODES = frozenset({40008, 44004, 40058})  # the message itself was refused
_KEY_IN_URL = re.compile(r"(key=)[^&\s'\"]+", re.I)


def redact(text: str, key: str = "") -> str:
    """Mask the webhook key wherever it appears."""
    if key and len(key) >= 4:
        text = text.replace(key, "***")
    return _KEY_IN_URL.sub(r"\1***", text)


@dataclass(frozen=True)
class RobotReply:
    """What the robot answered: HTTP status, (redacted) body and errcode."""

    status: int
    body: str
    errcode: int


class RobotError(WeComError):
    """A failed push; carries the HTTP status and redacted body for the audit."""

    def __init__(
        self,
        message: str,
        *,
        errcode: int | None = None,
        retryable: bool = False,
        status: int | None = None,
        body: str = "",
    ) -> None:
        super().__init__(message, errcode=errcode, retryable=retryable)
        self.status = status
        self.body = body


class RobotClient:
    """Posts messages to `base_url?key=KEY`."""

    def __init__(
        self,
        base_url: str = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send",
        timeout: float = 5.0,
        session: requests.Session | None = None,
    ) -> None:
        import requests

        self.base_url = base_url
        self.timeout = timeout
        self.session = session or requests.Session()

    def send_markdown(self, key: str, content: str) -> RobotReply:
        """Send `content` as msgtype markdown; raise RobotError (retryable or not) on any failure."""
        return self._send(key, {"msgtype": "markdown", "markdown": {"content": content}})

    def send_text(self, key: str, content: str) -> RobotReply:
        """Send plain text (≤ 2048 bytes)."""
        return self._send(key, {"msgtype": "text", "text": {"content": content}})

    def _send(self, key: str, payload: dict[str, Any]) -> RobotReply:
        import requests

        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")  # a JSON library, never by hand
        try:
            resp = self.session.post(
                self.base_url,
                params={"key": key},
                data=body,
                timeout=self.timeout,
                headers={"Content-Type": "application/json; charset=utf-8"},
            )
        except requests.Timeout as exc:
            raise RobotError(f"robot timeout: {redact(str(exc), key)}", retryable=True) from None
        except requests.RequestException as exc:
            raise RobotError(f"robot unreachable: {redact(str(exc), key)}", retryable=True) from None
        text = redact(resp.text[:2000], key)
        if resp.status_code >= 500 or resp.status_code == 429:
            raise RobotError(
                f"robot HTTP {resp.status_code}", retryable=True, status=resp.status_code, body=text
            )
        if resp.status_code != 200:
            raise RobotError(f"robot HTTP {resp.status_code}", status=resp.status_code, body=text)
        try:
            errcode = int(resp.json().get("errcode", -1))
        except (ValueError, AttributeError, TypeError):
            raise RobotError("robot answered non-JSON", retryable=True, status=200, body=text) from None
        if errcode != 0:
            raise RobotError(
                f"robot errcode {errcode}",
                errcode=errcode,
                retryable=errcode in RETRYABLE_ERRCODES,
                status=200,
                body=text,
            )
        return RobotReply(resp.status_code, text, 0)
