"""WeCom template cards: a `button_interaction` card body, its validation, and the click it sends back.

The rules follow WeCom's template-card documentation (message/send with `msgtype: template_card`,
the `template_card_event` callback, `message/update_template_card`): `task_id` of 1-128 bytes from
`[0-9A-Za-z_-@]`, unique per app; at most 6 buttons, each callback button with a unique key of at
most 1,024 bytes; at most 6 horizontal rows. The fake enforces the same rules (`validate_card`), so
the client code is tested against them.

The AI bot takes the same card minus the app-only parts (a button has only `text`, `style` and
`key`: no `type`/`url`) and cannot grey a button out (`replace_text` exists on the app only): a
closed bot card shows one button saying what became of the action, with a key that stands for no
command (still clickable, as WeCom's AI-bot documentation leaves it; a click on it is answered with
the card as it stands).
"""

from __future__ import annotations

import re
from typing import Any

from xihe.agent.cards import Card

TASK_ID = re.compile(r"^[0-9A-Za-z_\-@]{1,128}$")
MAX_BUTTONS = 6
MAX_ROWS = 6
MAX_KEY_BYTES = 1024
CARD_TYPES = ("text_notice", "news_notice", "button_interaction", "vote_interaction", "multiple_interaction")
INTERACTIVE = ("button_interaction", "vote_interaction", "multiple_interaction")


def template_card(card: Card, task_id: str, *, update: bool = False) -> dict[str, Any]:
    """The `template_card` object of one button card (on update: `replace_text` greys the buttons)."""
    body: dict[str, Any] = {
        "card_type": "button_interaction",
        "source": {"desc": "xihe", "desc_color": 0},
        "main_title": {"title": card.title, "desc": card.desc},
        "horizontal_content_list": [{"keyname": k, "value": v} for k, v in card.rows[:MAX_ROWS]],
        "task_id": task_id,
        "button_list": [{"text": b.text, "style": b.style, "key": b.key} for b in card.buttons],
    }
    if update and card.closed:
        body["replace_text"] = card.closed
    return body


def bot_template_card(card: Card, task_id: str) -> dict[str, Any]:
    """The AI bot's `template_card` of one button card; a closed card's only button says its state."""
    body = template_card(card, task_id)
    if card.closed:
        body["button_list"] = [{"text": card.closed, "style": 4, "key": f"{SHOWN_KEY}{task_id}"}]
    return body


SHOWN_KEY = "xihe:shown:"  # the key of a closed bot card's button: no command


def update_reply(card: dict[str, Any]) -> dict[str, Any]:
    """The AI bot's passive answer to a card click: replace the card for everyone the message reached
    (no `userids`), keeping the event's `task_id` as WeCom requires."""
    return {"response_type": "update_template_card", "template_card": card}


def validate_card(card: Any, *, update: bool = False, bot: bool = False) -> str | None:
    """Why WeCom would refuse this `template_card` (naming the field), or None when it is valid;
    `bot`: the AI bot's flavour (no url buttons)."""
    if not isinstance(card, dict):
        return "template_card must be an object"
    buttons = card.get("button_list") or []
    if bot and any(isinstance(b, dict) and ("type" in b or "url" in b) for b in buttons):
        return "button_list.type and button_list.url are not supported by the AI bot"
    kind = card.get("card_type")
    if kind not in CARD_TYPES:
        return f"template_card.card_type {kind!r} is invalid"
    task_id = card.get("task_id")
    needs_task = not update and (kind in INTERACTIVE or card.get("action_menu"))
    if needs_task and (not isinstance(task_id, str) or not TASK_ID.match(task_id)):
        return "template_card.task_id is missing or invalid: 1-128 bytes of [0-9A-Za-z_-@]"
    if kind in ("text_notice", "news_notice") and not card.get("card_action"):
        return "Template_Card.card_action missing or invalid"
    if len(card.get("horizontal_content_list") or []) > MAX_ROWS:
        return f"horizontal_content_list exceed max length {MAX_ROWS}"
    if kind == "button_interaction":
        buttons = card.get("button_list")
        if not isinstance(buttons, list) or not buttons:
            return "template_card.button_list is missing"
        if len(buttons) > MAX_BUTTONS:
            return f"button_list exceed max length {MAX_BUTTONS}"
        keys = [b.get("key") for b in buttons if isinstance(b, dict) and b.get("type", 0) == 0]
        if len(keys) != sum(1 for b in buttons if isinstance(b, dict) and b.get("type", 0) == 0):
            return "button_list item is not an object"
        for key in keys:
            if not isinstance(key, str) or not key or len(key.encode("utf-8")) > MAX_KEY_BYTES:
                return "button_list.key is missing or longer than 1024 bytes"
        if len(set(keys)) != len(keys):
            return "button_list.key is not unique"
    return None


def card_task_id(role: str, action_id: int, serial: int) -> str:
    """A task_id unique per app: `xihe-<role>-<action>-<serial>` (a new one for every card sent)."""
    return f"xihe-{role}-{action_id}-{serial}"
