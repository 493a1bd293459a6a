"""What both WeCom callback kinds share: the inbound message, outcomes, checks and the MsgId store.

Every check returns a `Rejected(status, reason)` instead of raising, so the HTTP layer only maps
an outcome to a response and no work is done for a rejected request.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from xihe.integrations.wecom.crypto import CallbackCryptoError, MsgCrypto, ReceiveIdError, SignatureError

CHANNEL_APP = "wecom_app"
CHANNEL_AIBOT = "wecom_aibot"


@dataclass(frozen=True)
class InboundMessage:
    """One verified message or event; `user` is the authenticated sender's WeCom userid."""

    user: str
    conversation: str
    text: str
    msg_id: str
    create_time: int
    agent_id: str
    channel: str
    msg_type: str = "text"
    event: str = ""
    chat_type: str = "single"
    chat_id: str = ""
    stream_id: str = ""
    # a one-shot capability to answer; kept out of repr so it does not land in logs
    response_url: str = field(default="", repr=False)
    card_task: str = ""  # a card click: the task_id of the card clicked
    # a card click (app): the single-use code that may update that card once; kept out of logs
    response_code: str = field(default="", repr=False)

    @property
    def dedupe_key(self) -> str:
        """The key the MsgId store de-duplicates on."""
        return f"{self.channel}:{self.msg_id}"


@dataclass(frozen=True)
class Rejected:
    """The request was refused before any work; `status` is the HTTP answer."""

    status: int
    reason: str
    errcode: int | None = None  # WXBizMsgCrypt code when the crypto refused it


@dataclass(frozen=True)
class Echo:
    """URL verification passed; answer `text` as the bare body."""

    text: str


@dataclass(frozen=True)
class Accepted:
    """A new, verified message to dispatch."""

    message: InboundMessage


@dataclass(frozen=True)
class Duplicate:
    """A verified message seen before (a WeCom retry or a replay): acknowledge, do nothing."""

    key: str
    message: InboundMessage


@dataclass(frozen=True)
class Ignored:
    """A verified callback that needs no work (e.g. an unsupported event)."""

    reason: str


@dataclass(frozen=True)
class Signed:
    """The three signed query parameters of a callback."""

    msg_signature: str
    timestamp: str
    nonce: str


class MsgIdStore(Protocol):
    """Durable de-duplication of callback message ids."""

    def seen(self, key: str, now: datetime) -> bool:
        """Atomically insert `key` if absent; return True when it was already present."""
        ...

    def forget(self, key: str) -> None:
        """Remove `key` so a retry is processed again (used when dispatch itself failed)."""
        ...


class InMemoryMsgIdStore:
    """A MsgIdStore for one process and for tests; entries older than `ttl` are pruned."""

    def __init__(self, ttl: timedelta = timedelta(days=1)) -> None:
        self.ttl = ttl
        self._seen: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def seen(self, key: str, now: datetime) -> bool:
        """Atomically insert `key` if absent; return True when it was already present."""
        with self._lock:
            cutoff = now - self.ttl
            for old in [k for k, t in self._seen.items() if t < cutoff]:
                del self._seen[old]
            if key in self._seen:
                return True
            self._seen[key] = now
            return False

    def forget(self, key: str) -> None:
        """Remove `key`."""
        with self._lock:
            self._seen.pop(key, None)


def signed_params(query: Mapping[str, str], extra: str = "") -> Signed | Rejected:
    """Pull msg_signature/timestamp/nonce (and `extra`, if named) out of an already URL-decoded query."""
    names = ["msg_signature", "timestamp", "nonce"] + ([extra] if extra else [])
    missing = [n for n in names if not query.get(n)]
    if missing:
        return Rejected(400, f"missing query parameter(s): {', '.join(missing)}")
    return Signed(query["msg_signature"], query["timestamp"], query["nonce"])


def check_timestamp(timestamp: str, now: datetime, window_seconds: int) -> Rejected | None:
    """Refuse timestamps that are not integers or lie outside now ± window (replay protection)."""
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return Rejected(400, "timestamp is not a unix time in seconds")
    skew = abs(now.timestamp() - int(timestamp))
    if skew > window_seconds:
        return Rejected(403, f"timestamp is {int(skew)} s away from now (window {window_seconds} s)")
    return None


def check_body(body: bytes, content_type: str, max_bytes: int) -> str | Rejected:
    """Size cap, declared charset and strict UTF-8; return the decoded text."""
    if len(body) > max_bytes:
        return Rejected(413, f"body is larger than {max_bytes} bytes")
    ctype = content_type.lower()
    if "charset=" in ctype:
        charset = ctype.split("charset=", 1)[1].split(";", 1)[0].strip().strip('"')
        if charset not in ("utf-8", "utf8"):
            return Rejected(415, f"charset {charset!r} is not supported; send UTF-8")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(415, "body is not valid UTF-8")


def crypto_rejection(exc: CallbackCryptoError) -> Rejected:
    """Map a crypto failure to a status: forged → 401, not for us → 403, malformed → 400."""
    if isinstance(exc, SignatureError):
        status = 401
    elif isinstance(exc, ReceiveIdError):
        status = 403
    else:
        status = 400
    return Rejected(status, str(exc), exc.errcode)


def open_ciphertext(
    crypto: MsgCrypto, signed: Signed, ciphertext: str, now: datetime, window_seconds: int
) -> bytes | Rejected:
    """Timestamp window, then signature, then decryption; the plaintext bytes or a rejection."""
    stale = check_timestamp(signed.timestamp, now, window_seconds)
    if stale is not None:
        return stale
    try:
        return crypto.verify_and_decrypt(signed.msg_signature, signed.timestamp, signed.nonce, ciphertext)
    except CallbackCryptoError as exc:
        return crypto_rejection(exc)


def verify_url(
    query: Mapping[str, str], crypto: MsgCrypto, now: datetime, window_seconds: int
) -> Echo | Rejected:
    """GET URL verification: check and decrypt `echostr`, answer its plaintext."""
    signed = signed_params(query, extra="echostr")
    if isinstance(signed, Rejected):
        return signed
    # base64 has no spaces: a '+' that arrived unescaped was turned into ' ' by form decoding
    echostr = query["echostr"].replace(" ", "+")
    plain = open_ciphertext(crypto, signed, echostr, now, window_seconds)
    if isinstance(plain, Rejected):
        return plain
    try:
        return Echo(plain.decode("utf-8"))
    except UnicodeDecodeError:
        return Rejected(400, "echostr plaintext is not UTF-8")
