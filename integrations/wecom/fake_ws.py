"""A loopback fake of WeCom's AI-bot long connection (`wss://openws.work.weixin.qq.com`), plain `ws://`.

It speaks the frames of reference/wecom-api.md §5: the first frame must be `aibot_subscribe` with a
known bot_id and its secret (else an error answer and a close: errcode 40001, the fake's choice);
`ping` is answered `{headers: {req_id}, errcode: 0, errmsg: "ok"}`; tests push user messages and
events (`push_text`, `push`), and every frame the bot sends is recorded (the subscribe secret masked)
and answered like WeCom does. A respond frame on a req_id the fake never pushed gets errcode 846605
(invalid req_id). A second subscription of the same bot kicks the first connection with an
`aibot_event_callback` carrying `disconnected_event`; `drop()` cuts the connection without a close
handshake, as a network failure would.

Cards (`FakeBotCards`, the rules of the AI bot's template cards): an `aibot_send_msg` carrying a
`template_card` is validated and recorded; `push_card_click` pushes a click as an
`aibot_event_callback`; its only answer is one `aibot_respond_update_msg` on that req_id within 5 s
(a late or second answer is refused, the codes fake-defined), and any other respond command on a
click's req_id gets 846605 (a card-click req_id accepts only the update, as implementers report).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from xihe.integrations.wecom.fake_bot_cards import FakeBotCards

RESPOND_CMDS = ("aibot_respond_msg", "aibot_respond_welcome_msg", "aibot_respond_update_msg")
ERR_AUTH = 40001
ERR_REQ_ID = 846605


@dataclass
class Session:
    """One subscribed connection."""

    n: int
    bot_id: str
    ws: ServerConnection
    frames: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False


class FakeWeComWS:
    """WeCom's long-connection endpoint on 127.0.0.1; use as a context manager."""

    def __init__(self, bots: dict[str, str] | None = None) -> None:
        self.bots = dict(bots or {})
        self.frames: list[dict[str, Any]] = []  # every frame from any bot, in order
        self.refused: list[dict[str, Any]] = []  # subscribe attempts that failed (secret masked)
        self.sessions: list[Session] = []  # subscribed connections, oldest first
        self.kicked: list[int] = []  # session numbers kicked by a newer connection
        self.pushed_req_ids: set[str] = set()
        self.answer_pings = True
        self.bot_cards = FakeBotCards()
        self.card_events: dict[str, str] = {}  # req_id of a pushed click → its msgid
        self.answers: list[dict[str, Any]] = []  # what the fake answered to the bot's frames
        self._cond = threading.Condition()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> FakeWeComWS:
        self._server = serve(self._handle, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for s in list(self.sessions):
            if not s.closed:
                s.ws.close()
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        """ws://127.0.0.1:<port>"""
        assert self._server is not None
        port = self._server.socket.getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    # ---- the server side ----------------------------------------------------------------------

    def _send(self, ws: ServerConnection, frame: dict[str, Any]) -> None:
        if "cmd" not in frame:  # an answer to one of the bot's frames
            with self._cond:
                self.answers.append(frame)
                self._cond.notify_all()
        ws.send(json.dumps(frame, ensure_ascii=False))

    def _handle(self, ws: ServerConnection) -> None:
        try:
            first = json.loads(ws.recv(timeout=10))
        except (TimeoutError, ConnectionClosed, ValueError):
            ws.close()
            return
        req_id = str((first.get("headers") or {}).get("req_id") or "")
        body = first.get("body") or {}
        bot_id, secret = str(body.get("bot_id") or ""), str(body.get("secret") or "")
        if first.get("cmd") != "aibot_subscribe" or not secret or self.bots.get(bot_id) != secret:
            with self._cond:
                self.refused.append({"cmd": first.get("cmd"), "bot_id": bot_id})
                self._cond.notify_all()
            self._send(
                ws, {"headers": {"req_id": req_id}, "errcode": ERR_AUTH, "errmsg": "invalid bot_id or secret"}
            )
            ws.close(code=1008, reason="subscribe refused")
            return
        self._send(ws, {"headers": {"req_id": req_id}, "errcode": 0, "errmsg": "ok"})
        with self._cond:
            older = [s for s in self.sessions if s.bot_id == bot_id and not s.closed]
            session = Session(len(self.sessions) + 1, bot_id, ws)
            session.frames.append({**first, "body": {**body, "secret": "***"}})
            self.sessions.append(session)
            self._cond.notify_all()
        for old in older:
            self._kick(old)
        try:
            for raw in ws:
                self._on_frame(session, json.loads(raw))
        except (ConnectionClosed, ValueError, OSError):
            pass
        finally:
            with self._cond:
                session.closed = True
                self._cond.notify_all()

    def _kick(self, old: Session) -> None:
        event = {
            "cmd": "aibot_event_callback",
            "headers": {"req_id": f"evt_{secrets.token_hex(6)}"},
            "body": {
                "msgid": secrets.token_hex(8),
                "aibotid": old.bot_id,
                "msgtype": "event",
                "from": {"userid": ""},
                "event": {"eventtype": "disconnected_event"},
            },
        }
        try:
            self._send(old.ws, event)
            old.ws.close(code=1000, reason="a newer connection took over")
        except ConnectionClosed:
            pass
        with self._cond:
            self.kicked.append(old.n)
            self._cond.notify_all()

    def _on_frame(self, session: Session, frame: dict[str, Any]) -> None:
        cmd = frame.get("cmd")
        req_id = str((frame.get("headers") or {}).get("req_id") or "")
        with self._cond:
            session.frames.append(frame)
            self.frames.append(frame)
            self._cond.notify_all()
        if cmd == "ping":
            if self.answer_pings:
                self._send(session.ws, {"headers": {"req_id": req_id}, "errcode": 0, "errmsg": "ok"})
            return
        errcode, errmsg = self._check(cmd, req_id, frame.get("body") or {})
        self._send(session.ws, {"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg})

    def _check(self, cmd: Any, req_id: str, body: dict[str, Any]) -> tuple[int, str]:
        """WeCom's answer to one frame of ours: (errcode, errmsg)."""
        if cmd in RESPOND_CMDS and req_id not in self.pushed_req_ids:
            return ERR_REQ_ID, "invalid req_id"
        click = self.card_events.get(req_id)
        if cmd == "aibot_respond_update_msg":
            return (ERR_REQ_ID, "invalid req_id") if click is None else self.bot_cards.answer(click, body)
        if cmd in RESPOND_CMDS and click is not None:
            return ERR_REQ_ID, "invalid req_id"  # a card click's req_id takes only the card update
        if cmd == "aibot_send_msg" and body.get("msgtype") == "template_card":
            return self.bot_cards.send(str(body.get("chatid") or ""), body.get("template_card"))
        return 0, "ok"

    # ---- what tests call ----------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
        """Block until `predicate()` is truthy (re-checked on every socket event); its value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._cond.wait(left)

    def live(self, bot_id: str | None = None) -> Session | None:
        """The newest open subscribed connection (of `bot_id`)."""
        with self._cond:
            for s in reversed(self.sessions):
                if not s.closed and (bot_id is None or s.bot_id == bot_id):
                    return s
        return None

    def wait_connected(self, count: int = 1, timeout: float = 10.0) -> Session:
        """Wait until `count` subscriptions happened in total and one is open; the open one."""
        self.wait_for(lambda: len(self.sessions) >= count and self.live(), timeout, f"subscription #{count}")
        session = self.live()
        assert session is not None
        return session

    def push(self, cmd: str, body: dict[str, Any], req_id: str | None = None) -> str:
        """Push a frame to the live connection; its req_id."""
        session = self.wait_connected()
        req_id = req_id or f"req_{secrets.token_hex(8)}"
        with self._cond:
            self.pushed_req_ids.add(req_id)
        self._send(session.ws, {"cmd": cmd, "headers": {"req_id": req_id}, "body": body})
        return req_id

    def push_text(
        self,
        user: str,
        text: str,
        msgid: str | None = None,
        *,
        bot_id: str = "",
        chatid: str = "",
    ) -> str:
        """Push `aibot_msg_callback` with a text message (a group message when `chatid` is set)."""
        body: dict[str, Any] = {
            "msgid": msgid or secrets.token_hex(8),
            "aibotid": bot_id or next(iter(self.bots), ""),
            "chattype": "group" if chatid else "single",
            "from": {"userid": user},
            "msgtype": "text",
            "text": {"content": text},
            "create_time": int(time.time()),
        }
        if chatid:
            body["chatid"] = chatid
        return self.push("aibot_msg_callback", body)

    def push_card_click(self, user: str, task_id: str, key: str, *, any_key: bool = False) -> str:
        """Push `user`'s click on button `key` of card `task_id`, as WeCom does; the req_id."""
        payload = self.bot_cards.click(user, task_id, key, aibotid=next(iter(self.bots), ""), any_key=any_key)
        return self._push_click(payload)

    def push_click_again(self, req_id: str) -> str:
        """The identical click event delivered again (same msgid), on a new req_id."""
        return self._push_click(self.bot_cards.replay(self.card_events[req_id]))

    def _push_click(self, payload: dict[str, Any]) -> str:
        req_id = f"evt_{secrets.token_hex(8)}"
        with self._cond:
            self.card_events[req_id] = payload["msgid"]
        return self.push("aibot_event_callback", payload, req_id)

    def update_answer(self, req_id: str) -> dict[str, Any] | None:
        """WeCom's answer to our `aibot_respond_update_msg` on `req_id` (None while there is none)."""
        with self._cond:
            return next((a for a in self.answers if a["headers"].get("req_id") == req_id), None)

    def replies(self, req_id: str) -> list[dict[str, Any]]:
        """The stream bodies the bot sent for `req_id`, in order."""
        with self._cond:
            return [
                f["body"]["stream"]
                for f in self.frames
                if f.get("cmd") == "aibot_respond_msg" and f["headers"].get("req_id") == req_id
            ]

    def wait_final(self, req_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The `finish: true` stream frame for `req_id`, once it arrives."""
        final: dict[str, Any] = self.wait_for(
            lambda: next((r for r in self.replies(req_id) if r.get("finish")), None),
            timeout,
            f"final {req_id}",
        )
        return final

    def sent(self) -> list[dict[str, Any]]:
        """Bodies of `aibot_send_msg` frames (proactive messages)."""
        with self._cond:
            return [f["body"] for f in self.frames if f.get("cmd") == "aibot_send_msg"]

    def pings(self) -> int:
        """How many `ping` frames arrived."""
        with self._cond:
            return sum(1 for f in self.frames if f.get("cmd") == "ping")

    def drop(self) -> None:
        """Cut the live connection without a close handshake (a network failure)."""
        session = self.live()
        if session is None:
            return
        with contextlib.suppress(OSError):
            session.ws.socket.shutdown(socket.SHUT_RDWR)
        session.ws.socket.close()
