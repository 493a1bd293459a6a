"""The template-card part of the loopback WeCom: sends validated, single-use `response_code`s, and
`message/update_template_card`, for `FakeWeCom`.

WeCom documents a `response_code` on the send answer of interactive cards and on each click
callback: valid 72 hours, usable for one update call. It does not document the errcode for a reused
or expired code, a duplicate `task_id`, too many buttons or an update without targets; this fake
answers 40058 with the field named for each (a choice, unverified against the real service). It
also issues one fresh `response_code` per click (unverified: WeCom does not say whether a second
click on an un-updated card brings a new one).
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from xihe.agent.clock import Clock
from xihe.integrations.wecom.cards import INTERACTIVE, validate_card

RESPONSE_CODE_TTL = timedelta(hours=72)


@dataclass
class FakeCard:
    """One card as each recipient sees it (`copies[user]` is that user's current template_card)."""

    agent_id: int
    task_id: str
    recipients: tuple[str, ...]
    copies: dict[str, dict[str, Any]] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)


class FakeCards:
    """Cards sent through the fake app, by task_id; response codes by value."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.cards: dict[str, FakeCard] = {}
        self.codes: dict[str, tuple[str, datetime, bool]] = {}  # code → (task_id, expires, used)
        self._lock = threading.Lock()

    def send(self, agent_id: int, users: list[str], card: Any) -> tuple[int, str, str]:
        """Check and record a card send; (errcode, errmsg, response_code)."""
        why = validate_card(card)
        if why is not None:
            return 40058, why, ""
        task_id = str(card.get("task_id", ""))
        with self._lock:
            if task_id and task_id in self.cards:
                return 40058, "task_id duplicated", ""
            code = ""
            if card["card_type"] in INTERACTIVE:
                code = self._issue(task_id)
            if task_id:
                self.cards[task_id] = FakeCard(agent_id, task_id, tuple(users), {u: card for u in users})
        return 0, "ok", code

    def _issue(self, task_id: str) -> str:
        code = f"rc-{secrets.token_hex(8)}"
        self.codes[code] = (task_id, self.clock() + RESPONSE_CODE_TTL, False)
        return code

    def click_code(self, task_id: str) -> str:
        """A fresh response_code for one click on the card (what the callback carries)."""
        with self._lock:
            if task_id not in self.cards:
                raise KeyError(f"no card with task_id {task_id!r} was sent")
            return self._issue(task_id)

    def update(self, agent_id: int, body: dict[str, Any]) -> tuple[int, str, list[str]]:
        """Check and apply one update call; (errcode, errmsg, invaliduser)."""
        code = body.get("response_code")
        if not isinstance(code, str) or not code:
            return 40058, "response_code is missing", []
        if body.get("agentid") != agent_id:
            return 301002, "not allow operate another agent with this accesstoken", []
        targets = body.get("userids") or []
        if not targets and body.get("atall") != 1 and not body.get("partyids") and not body.get("tagids"):
            return 40058, "userids, partyids, tagids or atall is required", []
        new = body.get("template_card")
        button = body.get("button")
        if (new is None) == (button is None):
            return 40058, "exactly one of template_card or button is required", []
        if new is not None:
            why = validate_card(new, update=True)
            if why is not None:
                return 40058, why, []
        with self._lock:
            found = self.codes.get(code)
            if found is None or found[2] or self.clock() >= found[1]:
                return 40058, "response_code is invalid or used", []
            task_id = found[0]
            self.codes[code] = (task_id, found[1], True)
            sent = self.cards[task_id]
            users = list(sent.recipients) if body.get("atall") == 1 else [str(u) for u in targets]
            invalid = [u for u in users if u not in sent.recipients]
            for user in users:
                if user in sent.copies:
                    if new is not None:
                        sent.copies[user] = {**new, "task_id": task_id}
                    elif isinstance(button, dict):
                        sent.copies[user] = {**sent.copies[user], "replace_text": button.get("replace_name")}
            sent.updates.append(body)
        return 0, "ok", invalid

    def copy(self, task_id: str, user: str) -> dict[str, Any]:
        """What `user` sees of the card now."""
        return self.cards[task_id].copies[user]

    def of_user(self, user: str) -> list[FakeCard]:
        """The cards `user` received, in send order."""
        return [c for c in self.cards.values() if user in c.recipients]
