"""The notifier seam: how an alert leaves the bot, one implementation per channel kind.

A channel in config/alerts.py names its `kind`; the notifier module declaring that `KIND` sends its
messages. Rendering happens before the outbox (the outbox stores the text), in the `markup` the
notifier declares, so a row is sent exactly as it was stored. E-mail is the fallback every channel
shares, not a channel kind.

A notifier never raises for a failed send: it returns an `Attempt` that says whether to retry
(`retryable`) and whether the message itself was refused (`refused`: retrying cannot help, the row
goes by e-mail). Its `body` and `error` are already stripped of the notifier's credentials. The
deliverer adds which row, channel and way it was and when, and the audit records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from xihe.config.alerts import Channel


@dataclass(frozen=True)
class Attempt:
    """One send as the notifier saw it, then as the audit records it (no credential in any field)."""

    ok: bool
    status: int | None = None  # HTTP status, when there was one
    body: str = ""  # the receiver's answer, redacted
    errcode: int | None = None
    error: str = ""  # why it failed, redacted
    retryable: bool = False  # a transient failure: the same text may succeed on a later try
    refused: bool = False  # the receiver refused this message's content: send it another way
    # filled in by the deliverer:
    key: str = ""  # the outbox row
    channel: str = ""
    via: str = ""  # robot (the channel's own notifier, whatever its kind) | email
    at: datetime | None = None
    probe: bool = False  # the one notifier try of a channel that is on e-mail

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as the audit stores it."""
        return {
            "key": self.key,
            "channel": self.channel,
            "via": self.via,
            "at": self.at.isoformat() if self.at is not None else None,
            "ok": self.ok,
            "http_status": self.status,
            "body": self.body,
            "errcode": self.errcode,
            "error": self.error,
            "probe": self.probe,
        }


class Notifier(Protocol):
    """Sends rendered text to a channel."""

    kind: str  # the channel kind (config/alerts.py Channel.kind) this notifier serves
    markup: str  # the text format rendered for it (render.MARKUPS); "" = sends any channel's text

    def ready(self, channel: Channel) -> str:
        """Why `channel` cannot be sent to now (a credential variable unset…), or "" when it can."""
        ...

    def send(self, channel: Channel, text: str, *, subject: str = "", ref: str = "") -> Attempt:
        """Send `text` (`subject` for receivers that have one, `ref` the outbox key) and say how it went."""
        ...
