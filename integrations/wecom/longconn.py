"""The AI bot's long connection (长连接): one WebSocket to WeCom, held by one replica at a time.

The connection subscribes (`aibot_subscribe` with bot_id + secret), pings every heartbeat, hands
pushed callbacks to `on_frame` (ws_intake.py), sends our frames (ws_frames.py) and reconnects with
back-off. WeCom keeps one connection per bot: a newer connection kicks the older one with a
`disconnected_event`.

So that two replicas never kick each other, the connection is taken under a database lease
(`wecom_ws_lease`), renewed on every heartbeat; a replica without it waits in standby and takes over
once the lease lapses (the holder died) or is released (the holder stopped). Frames produced on a
replica that does not hold the connection (a DS run finishing there, another user's /approve) go to
`wecom_ws_outbox`, which the holder drains.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from xihe.agent.errors import WeComError
from xihe.agent.redact import excerpt
from xihe.config.wecom import LongConnectionSettings
from xihe.integrations.wecom.ws_frames import (
    EVENT_CALLBACK,
    KICKED_EVENT,
    MSG_CALLBACK,
    PING,
    SUBSCRIBE,
    make_frame,
    new_req_id,
    parse_frame,
)
from xihe.integrations.wecom.ws_store import WsLease, WsOutbox

log = logging.getLogger("xihe.wecom.longconn")

MAX_MISSED_PINGS = 2  # then the connection counts as dead (as WeCom's SDK does)


class SubscribeRefused(WeComError):
    """WeCom refused `aibot_subscribe` (wrong bot id or secret); the message never holds the secret."""


Connect = Callable[..., ClientConnection]


class LongConnection:
    """Holds the bot's WebSocket while this replica holds the lease: subscribe, ping, receive, reconnect.

    Runs in its own thread. `deliver(frame)` may be called from any thread: it sends at once when
    this replica is connected and leaves the frame in the outbox otherwise. `sleep` waits between
    attempts (back-off, standby polls); tests inject one that does not wait out real time.
    """

    def __init__(
        self,
        settings: LongConnectionSettings,
        engine: Engine,
        *,
        holder: str,
        clock: Callable[[], datetime],
        on_frame: Callable[[dict[str, Any]], None] | None = None,
        sleep: Callable[[float], object] | None = None,
        connect: Connect = ws_connect,
    ) -> None:
        self.settings = settings
        self.name = f"aibot:{settings.bot_id}"
        self.holder = holder
        self.clock = clock
        self.on_frame = on_frame or (lambda frame: None)
        self.lease = WsLease(engine, self.name)
        self.outbox = WsOutbox(engine, self.name)
        self.sleep: Callable[[float], object] = sleep or self._wait
        self.connect = connect
        self.state = "stopped"  # stopped | standby | connecting | connected | backoff
        self.last_error = ""  # why the last attempt or connection ended (never holds the secret)
        self.delays: list[float] = []  # the back-off delays waited, newest last (bounded)
        self.subscribed = 0  # successful subscriptions by this replica
        self._ws: ClientConnection | None = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._missed_pings = 0

    # ---- lifecycle --------------------------------------------------------------------------

    @property
    def ttl(self) -> timedelta:
        """How long a lease lasts without a renewal."""
        return timedelta(seconds=self.settings.lease_seconds)

    def start(self) -> None:
        """Start the connection thread once."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=f"wecom-longconn-{self.holder}", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 10.0) -> None:
        """Close the connection, end the thread and (unless `release` is False) give the lease up."""
        self._stop.set()
        self._wake.set()
        self._close()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        if release:
            self.lease.release(self.holder)
        self.state = "stopped"

    def kill(self) -> None:
        """Die like a crashed process: the socket goes away and the lease is left to lapse."""
        self.stop(release=False)

    def wake(self) -> None:
        """End the current wait early (a standby replica re-checks the lease)."""
        self._wake.set()

    @property
    def connected(self) -> bool:
        """True while this replica holds a subscribed connection."""
        return self._ws is not None

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def backoff(self, attempt: int) -> float:
        """Delay before reconnect attempt `attempt` (0-based): doubling from the initial, capped."""
        s = self.settings
        return float(min(s.backoff_max_seconds, s.backoff_initial_seconds * (2 ** min(attempt, 30))))

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """The thread: `_run`, restarted after an unexpected error (e.g. the database was away)."""
        while not self._stop.is_set():
            try:
                self._run()
            except Exception as exc:
                self.last_error = f"unexpected {type(exc).__name__}"
                log.exception("wecom long connection loop failed; retrying", extra={"bot": self.name})
                self.state = "backoff"
                self.sleep(self.settings.backoff_max_seconds)
        self.state = "stopped"

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            if not self.lease.acquire(self.holder, self.clock(), self.ttl):
                self.state = "standby"
                self.sleep(self.settings.standby_poll_seconds)
                continue
            reason = ""
            try:
                self.state = "connecting"
                ws = self._open()
            except SubscribeRefused as exc:
                reason = str(exc)
                log.error("wecom long connection: %s", reason, extra={"bot": self.name})
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed, ValueError) as exc:
                reason = f"cannot connect to {self.settings.url}: {type(exc).__name__}: {exc}"
                log.warning("wecom long connection: %s", reason, extra={"bot": self.name})
            else:
                previous, attempt = attempt, 0
                reason = self._serve(ws)
                level = logging.INFO if self._stop.is_set() else logging.WARNING
                log.log(level, "wecom long connection ended: %s", reason, extra={"bot": self.name})
                if reason.startswith("kicked"):
                    attempt = previous + 1  # someone else keeps connecting: do not fight at full speed
                if reason.startswith("lease lost") or self._stop.is_set():
                    self.last_error = reason
                    continue
            self.last_error = reason
            if self._stop.is_set():
                break
            delay = self.backoff(attempt)
            attempt += 1
            self.delays = [*self.delays[-49:], delay]
            self.state = "backoff"
            self.sleep(delay)

    def _open(self) -> ClientConnection:
        """Connect and subscribe; raises SubscribeRefused when WeCom says no."""
        s = self.settings
        ws = self.connect(s.url, open_timeout=s.open_timeout_seconds, close_timeout=2)
        try:
            req_id = new_req_id(SUBSCRIBE)
            ws.send(json.dumps(make_frame(SUBSCRIBE, req_id, {"bot_id": s.bot_id, "secret": s.secret})))
            deadline = time.monotonic() + s.open_timeout_seconds
            while True:
                try:
                    raw = ws.recv(timeout=max(0.0, deadline - time.monotonic()))
                except ConnectionClosed as exc:
                    raise SubscribeRefused(
                        f"WeCom closed the connection during aibot_subscribe for bot {s.bot_id} "
                        f"(code {exc.rcvd.code if exc.rcvd else 'none'})"
                    ) from None
                frame = parse_frame(raw)
                if frame is None or (frame.get("headers") or {}).get("req_id") != req_id:
                    continue
                errcode = int(frame.get("errcode") or 0)
                if errcode != 0:
                    raise SubscribeRefused(
                        f"WeCom refused aibot_subscribe for bot {s.bot_id}: errcode {errcode} "
                        f"{excerpt(str(frame.get('errmsg') or ''), s.secret)} (check the bot id and the secret in "
                        "the environment variables named by aibot.long_connection)",
                        errcode=errcode,
                    )
                return ws
        except BaseException:
            ws.close()
            raise

    def _serve(self, ws: ClientConnection) -> str:
        """Receive, ping, renew the lease and drain the outbox until the connection ends; why it ended."""
        s = self.settings
        with self._send_lock:
            self._ws = ws
        self.state = "connected"
        self.subscribed += 1
        self._missed_pings = 0
        log.info("wecom long connection subscribed", extra={"bot": self.name, "holder": self.holder})
        drain_every = min(s.heartbeat_seconds, 2.0)
        next_ping = time.monotonic() + s.heartbeat_seconds
        next_drain = 0.0
        try:
            while not self._stop.is_set():
                now_m = time.monotonic()
                if now_m >= next_drain:
                    self._drain()
                    next_drain = now_m + drain_every
                if now_m >= next_ping:
                    if self._missed_pings >= MAX_MISSED_PINGS:
                        return f"no answer to {self._missed_pings} heartbeats"
                    if not self.lease.renew(self.holder, self.clock(), self.ttl):
                        return "lease lost: another replica holds the connection now"
                    self._missed_pings += 1
                    try:
                        self._send(ws, make_frame(PING, new_req_id(PING)))
                    except (ConnectionClosed, OSError) as exc:
                        return f"connection closed while sending a heartbeat ({type(exc).__name__})"
                    next_ping = now_m + s.heartbeat_seconds
                timeout = max(0.0, min(next_ping, next_drain) - time.monotonic())
                try:
                    raw = ws.recv(timeout=timeout)
                except TimeoutError:
                    continue
                except ConnectionClosed as exc:
                    return f"connection closed (code {exc.rcvd.code if exc.rcvd else 'none'})"
                ended = self._on_raw(raw)
                if ended:
                    return ended
            return "stopping"
        finally:
            with self._send_lock:
                self._ws = None
            ws.close()

    def _on_raw(self, raw: str | bytes) -> str:
        frame = parse_frame(raw)
        if frame is None:
            log.warning("wecom long connection: a frame that is not a JSON object was ignored")
            return ""
        cmd = frame.get("cmd") or ""
        if cmd == MSG_CALLBACK:
            self._dispatch(frame)
        elif cmd == EVENT_CALLBACK:
            event = ((frame.get("body") or {}).get("event") or {}).get("eventtype", "")
            if event == KICKED_EVENT:
                return "kicked: WeCom reports a newer connection for this bot"
            self._dispatch(frame)
        elif not cmd:
            req_id = str((frame.get("headers") or {}).get("req_id") or "")
            errcode = int(frame.get("errcode") or 0)
            if req_id.startswith(PING):
                self._missed_pings = 0
            if errcode != 0:
                log.warning(
                    "wecom long connection: frame %s refused: errcode %s %s",
                    req_id,
                    errcode,
                    str(frame.get("errmsg") or "")[:200],
                )
        else:
            log.info("wecom long connection: unknown cmd %s ignored", cmd)
        return ""

    def _dispatch(self, frame: dict[str, Any]) -> None:
        try:
            self.on_frame(frame)
        except Exception:
            log.exception("wecom long connection: handling a pushed frame failed")

    def _close(self) -> None:
        with self._send_lock:
            ws = self._ws
        if ws is not None:
            ws.close()

    # ---- sending ----------------------------------------------------------------------------

    def _send(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        with self._send_lock:
            ws.send(json.dumps(frame, ensure_ascii=False))

    def send_now(self, frame: dict[str, Any]) -> bool:
        """Send on the live connection; False when this replica has none (or it just broke)."""
        with self._send_lock:
            ws = self._ws
            if ws is None:
                return False
            try:
                ws.send(json.dumps(frame, ensure_ascii=False))
            except (ConnectionClosed, OSError):
                return False
        return True

    def deliver(self, frame: dict[str, Any]) -> None:
        """Send now when connected, else leave it in the outbox for whichever replica holds the connection."""
        if not self.send_now(frame):
            self.outbox.put(frame, self.clock())

    def _drain(self) -> None:
        now = self.clock()
        for row_id, frame in self.outbox.pending():
            if not self.send_now(frame):
                return
            self.outbox.mark_sent(row_id, now)
        self.outbox.prune(now - timedelta(days=1))
