"""The stream table of the long connection: every update of a `ws-` stream is pushed as a frame.

An answer streamed over the long connection is stored like any other stream (the shared
`wecom_stream` table, so any replica can continue it) and, on every update, turned into an
`aibot_respond_msg` frame on the req_id of the message it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from xihe.integrations.wecom.aibot import Stream
from xihe.integrations.wecom.store import SqlStreamRegistry
from xihe.integrations.wecom.ws_frames import WS_STREAM_PREFIX, respond_frame, stream_id_for


class PushingStreams(SqlStreamRegistry):
    """The shared stream table, plus: every update of a `ws-` stream becomes an `aibot_respond_msg`."""

    def __init__(
        self,
        engine: Engine,
        ttl: timedelta,
        deliver: Callable[[dict[str, Any]], None],
    ) -> None:
        super().__init__(engine, ttl)
        self.deliver = deliver
        self._hashed: dict[str, str] = {}  # stream id -> req_id for req_ids too long to embed

    def open_ws(self, msgid: str, req_id: str, now: datetime, content: str = "") -> Stream:
        """Open (or find) the stream answering the message pushed with `req_id`."""
        sid = stream_id_for(req_id)
        if not sid.startswith(WS_STREAM_PREFIX):
            self._hashed[sid] = req_id
        return SqlStreamRegistry(self.engine, self.ttl, new_id=lambda: sid).open(msgid, now, content)

    def req_id_of(self, stream_id: str) -> str | None:
        """The req_id a stream answers, when it is a long-connection stream."""
        if stream_id.startswith(WS_STREAM_PREFIX):
            return stream_id[len(WS_STREAM_PREFIX) :]
        return self._hashed.get(stream_id)

    def update(self, stream_id: str, content: str, now: datetime, *, finish: bool = False) -> bool:
        """Store the text so far and push it as a stream frame."""
        if not super().update(stream_id, content, now, finish=finish):
            return False
        req_id = self.req_id_of(stream_id)
        if req_id is not None:
            self.deliver(respond_frame(req_id, stream_id, content, finish))
        return True

    def append(self, stream_id: str, text: str, now: datetime, *, finish: bool = False) -> bool:
        """Add `text` to the stream's content and push it."""
        stream = self.get(stream_id, now)
        if stream is None:
            return False
        return self.update(stream_id, stream.content + text, now, finish=finish)
