"""The AI bot's template cards in the loopback WeCom: sends validated, clicks sent like WeCom sends
them, and the only update there is, the passive answer to the click, checked like WeCom checks it.

Per WeCom's AI-bot documentation: a card event carries `msgid` (the de-duplication key: "可能因为网络
等原因重复回调", so `replay` re-sends the identical event), `from.userid`, `chatid`/`chattype` and
the nested `event.template_card_event` {card_type, event_key, task_id}; it is delivered once and
dropped when not answered within 5 s; the answer `{"response_type": "update_template_card", ...}`
replaces the card for everyone the message reached (or `userids`), and its `task_id` must be the
event's. This fake accepts one answer per event (a second is refused; WeCom documents one reply per
callback), refuses answers later than 5 s, and only lets a user click a button the card shows
(`any_key` plays a card drawn with arguments that have changed since). Error codes for a late or
second answer are not documented: the fake answers 846608 / 846605 (fake-defined).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xihe.integrations.wecom.cards import validate_card

UPDATE_WINDOW_SECONDS = 5.0
ERR_LATE = 846608  # fake-defined: the 5 s after the event are over, the card cannot be updated
ERR_ANSWERED = 846605  # fake-defined: this event was answered already (or is no card event)


@dataclass
class BotCard:
    """One card as the chat sees it: `card` for everyone, `per_user` where an update named users."""

    chatid: str
    task_id: str
    card: dict[str, Any]
    per_user: dict[str, dict[str, Any]] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)

    def seen_by(self, user: str) -> dict[str, Any]:
        """What `user` sees of the card now."""
        return self.per_user.get(user, self.card)

    def keys(self, user: str) -> list[str]:
        return [str(b.get("key")) for b in self.seen_by(user).get("button_list") or []]

    def key(self, user: str, text: str) -> str:
        """The key of the one button `user` sees saying `text`."""
        buttons = self.seen_by(user).get("button_list") or []
        (key,) = [b.get("key") for b in buttons if b.get("text") == text]
        return str(key)

    def row(self, user: str, keyname: str) -> str:
        """The value of the row `keyname` as `user` sees it."""
        rows = self.seen_by(user).get("horizontal_content_list") or []
        return str(next(r.get("value") for r in rows if r.get("keyname") == keyname))


@dataclass
class CardEvent:
    """One click as WeCom delivered it."""

    payload: dict[str, Any]
    task_id: str
    at: float
    answered: bool = False


class FakeBotCards:
    """Cards the AI bot sent, by task_id; click events by msgid; `now` is a monotonic clock in seconds."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.cards: dict[str, BotCard] = {}
        self.events: dict[str, CardEvent] = {}
        self.refused: list[tuple[str, str]] = []  # (msgid, why) of answers WeCom would not apply
        self._lock = threading.Lock()

    def send(self, chatid: str, card: Any) -> tuple[int, str]:
        """Check and record a card the bot sent into `chatid` (group chatid, or userid for 1:1)."""
        why = validate_card(card, bot=True)
        if why is not None:
            return 40058, why
        with self._lock:
            if card["task_id"] in self.cards:
                return 40058, "task_id duplicated"
            self.cards[card["task_id"]] = BotCard(chatid, card["task_id"], card)
        return 0, "ok"

    def of_chat(self, chatid: str) -> list[BotCard]:
        """The cards sent into `chatid`, in send order."""
        with self._lock:
            return [c for c in self.cards.values() if c.chatid == chatid]

    def click(
        self,
        user: str,
        task_id: str,
        key: str,
        *,
        aibotid: str = "bot1",
        any_key: bool = False,
        response_url: str = "",
    ) -> dict[str, Any]:
        """The JSON WeCom delivers for `user` clicking the button `key` on card `task_id` (recorded)."""
        with self._lock:
            card = self.cards.get(task_id)
            if card is None:
                raise KeyError(f"no card with task_id {task_id!r} was sent")
            if not any_key and key not in card.keys(user):
                raise ValueError(f"card {task_id} shows {user} no button with key {key!r}")
            group = card.chatid != user
            payload: dict[str, Any] = {
                "msgid": secrets.token_hex(12),
                "create_time": int(time.time()),
                "aibotid": aibotid,
                "from": {"userid": user},
                "chattype": "group" if group else "single",
                "response_url": response_url,
                "msgtype": "event",
                "event": {
                    "eventtype": "template_card_event",
                    "template_card_event": {
                        "card_type": card.seen_by(user).get("card_type", "button_interaction"),
                        "event_key": key,
                        "task_id": task_id,
                    },
                },
            }
            if group:
                payload["chatid"] = card.chatid
            self.events[payload["msgid"]] = CardEvent(payload, task_id, self.now())
        return payload

    def replay(self, msgid: str) -> dict[str, Any]:
        """The identical event again (a network-caused repeat delivery), with a fresh 5 s window."""
        with self._lock:
            event = self.events[msgid]
            event.at, event.answered = self.now(), False
            return dict(event.payload)

    def answer(self, msgid: str, reply: dict[str, Any] | None) -> tuple[int, str]:
        """Apply the passive answer to event `msgid` like WeCom: (0, "ok") or why it was not applied."""
        errcode, why = self._apply(msgid, reply)
        if errcode:
            with self._lock:
                self.refused.append((msgid, why))
        return errcode, why

    def _apply(self, msgid: str, reply: dict[str, Any] | None) -> tuple[int, str]:
        with self._lock:
            event = self.events.get(msgid)
            if event is None:
                return ERR_ANSWERED, "not a card event"
            if event.answered:
                return ERR_ANSWERED, "card event already answered"
            event.answered = True
            if self.now() - event.at > UPDATE_WINDOW_SECONDS:
                return ERR_LATE, "card update after 5 s: the event was dropped"
            if reply is None:
                return 0, "no change"
            if reply.get("response_type") != "update_template_card":
                return 40008, "invalid message type"
            new = reply.get("template_card")
            why = validate_card(new, update=True, bot=True)
            if why is not None:
                return 40058, why
            assert isinstance(new, dict)
            if new.get("task_id") != event.task_id:
                return 40058, "template_card.task_id must be the task_id of the event"
            card = self.cards[event.task_id]
            users = reply.get("userids")
            if users:
                for user in users:
                    card.per_user[str(user)] = new
            else:
                card.card, card.per_user = new, {}
            card.updates.append(reply)
        return 0, "ok"
