"""A loopback WeCom group-robot webhook that records messages per key.

It checks what WeCom checks (known key → 93000, JSON body and msgtype → 40008, empty content →
44004, content over 4096/2048 UTF-8 bytes → 40058, more than 20 messages a minute per key on its
own clock → 45009) and can be scripted: answer given errcodes next, time out, or fail for a stretch.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from xihe.agent.clock import Clock, utc_now
from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response

ERRMSG = {
    0: "ok",
    93000: "invalid webhook url, hint: [fake], from ip: 127.0.0.1",
    45009: "api freq out of limit, hint: [fake], from ip: 127.0.0.1",
    40008: "invalid message type, hint: [fake]",
    44004: "empty content, hint: [fake]",
    40058: "markdown.content exceed max length 4096. invalid Request Parameter, hint: [fake]",
    -1: "system busy",
}
LIMITS = {"markdown": 4096, "markdown_v2": 4096, "text": 2048}


@dataclass(frozen=True)
class RobotMessage:
    """One accepted message."""

    at: datetime
    msgtype: str
    content: str


class RobotSink:
    """The fake robot. `sink.url` is the webhook endpoint to give RobotClient as base_url."""

    def __init__(self, keys: set[str] | None = None, clock: Clock = utc_now, per_minute: int = 20) -> None:
        self.keys = keys  # None = every key is valid
        self.clock = clock
        self.per_minute = per_minute
        self.messages: dict[str, list[RobotMessage]] = {}
        self.answers: list[tuple[datetime, str, int, int]] = []  # (at, key, http status, errcode)
        self._lock = threading.Lock()
        self._script: deque[int | str] = deque()
        self._fail_until: datetime | None = None
        self._fail_mode: int | str = 500
        self._hits: dict[str, deque[datetime]] = {}
        self.timeout_delay = 1.0
        self.server = LoopbackServer(self._handle)

    # ---- control -----------------------------------------------------------------------------
    def script(self, *answers: int | str) -> None:
        """Answer the next requests with these, in order: an errcode, 'http500', 'timeout' or 'garbage'."""
        with self._lock:
            self._script.extend(answers)

    def fail_for(self, seconds: float, mode: int | str = "http500") -> None:
        """Fail every request for `seconds` of the sink's clock with `mode` (errcode, 'http500', 'timeout')."""
        with self._lock:
            self._fail_until = self.clock() + timedelta(seconds=seconds)
            self._fail_mode = mode

    def recover(self) -> None:
        """End a failure stretch now."""
        with self._lock:
            self._fail_until = None

    def all_messages(self) -> list[RobotMessage]:
        """Every accepted message, all keys."""
        return [m for msgs in self.messages.values() for m in msgs]

    # ---- server ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The webhook endpoint (…/cgi-bin/webhook/send)."""
        return self.server.url + "/cgi-bin/webhook/send"

    def __enter__(self) -> RobotSink:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def _answer(self, key: str, errcode: int, status: int = 200, delay: float = 0.0) -> Response:
        self.answers.append((self.clock(), key, status, errcode))
        if status != 200:
            return Response(
                status, b"<html>upstream error</html>", {"Content-Type": "text/html"}, delay=delay
            )
        return Response.of_json({"errcode": errcode, "errmsg": ERRMSG.get(errcode, "error")}, delay=delay)

    def _forced(self, key: str, mode: int | str) -> Response:
        if mode == "http500":
            return self._answer(key, -1, 500)
        if mode == "timeout":
            return self._answer(key, -1, 200, delay=self.timeout_delay)
        if mode == "garbage":
            self.answers.append((self.clock(), key, 200, -1))
            return Response(200, b"not json", {"Content-Type": "text/plain"})
        return self._answer(key, int(mode))

    def _handle(self, req: Request) -> Response:
        with self._lock:
            now = self.clock()
            key = (req.query.get("key") or [""])[-1]
            if req.method != "POST" or req.path != "/cgi-bin/webhook/send":
                return self._answer(key, 404, 404)
            # WeCom counts every request against the per-robot limit, failed ones included.
            hits = self._hits.setdefault(key, deque())
            while hits and hits[0] <= now - timedelta(minutes=1):
                hits.popleft()
            hits.append(now)
            if self._script:
                return self._forced(key, self._script.popleft())
            if self._fail_until is not None and now < self._fail_until:
                return self._forced(key, self._fail_mode)
            if self.keys is not None and key not in self.keys:
                return self._answer(key, 93000)
            if len(hits) > self.per_minute:
                return self._answer(key, 45009)
            try:
                body: Any = json.loads(req.body.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                return self._answer(key, 44004)  # what WeCom says about malformed JSON
            msgtype = body.get("msgtype") if isinstance(body, dict) else None
            if msgtype not in LIMITS or not isinstance(body.get(msgtype), dict):
                return self._answer(key, 40008)
            content = body[msgtype].get("content")
            if not isinstance(content, str) or not content:
                return self._answer(key, 44004)
            if len(content.encode("utf-8")) > LIMITS[msgtype]:
                return self._answer(key, 40058)
            self.messages.setdefault(key, []).append(RobotMessage(now, msgtype, content))
            return self._answer(key, 0)
