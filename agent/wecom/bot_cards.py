"""Action cards over the WeCom AI bot (智能机器人): the requester's Confirm/Cancel card in the
conversation, the approvers' Approve/Reject cards in their 1:1 chats with the bot, and the answer to
a click.

A card goes out when a task pauses on a pending action (the `pause_listeners` hook), like the app's
cards, through `send` (over the long connection a proactive `aibot_send_msg`; in callback mode the
1:1 conversation's `response_url`, the only way WeCom takes a card there, so a group chat or an
approver without one keeps the text commands). A click arrives as the typed command its button
stands for and runs through the same command code; it is audited like the app's.

WeCom lets the AI bot update a card only by answering its click event, within 5 s: `reply_for`
draws the clicked card as its action stands and that answer replaces it for everyone the message
reached. There is no other update (no `response_code`, no update API for bot cards), so a copy
nobody clicks keeps what it last showed; it shows the expiry time from the start, and the outcome
reaches the conversation as text like every late result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.pending import PendingAction
from xihe.agent.pending_view import approvers_for
from xihe.agent.tasks import Task
from xihe.agent.wecom.card_facts import CardFacts
from xihe.integrations.wecom.card_store import CardStore
from xihe.integrations.wecom.cards import bot_template_card, card_task_id, update_reply
from xihe.integrations.wecom.inbound import InboundMessage

log = logging.getLogger("xihe.wecom")

AIBOT_PREFIX = "wecom:aibot:"
CHANNEL = "aibot"  # wecom_card.channel of the AI bot's cards

# (conversation, chatid, whether it is a 1:1 chat, template_card) → whether the card went out
SendCard = Callable[[str, str, bool, dict[str, Any]], bool]


class BotCards:
    """Sends, tracks and answers the clicks of the AI bot's action cards."""

    def __init__(self, deps: Deps, registry: Callable[[], Any], send: SendCard) -> None:
        self.deps = deps
        self.facts = CardFacts(deps, registry)
        self.store = CardStore(deps.engine)
        self.send = send

    def on_pause(self, task: Task, pending_id: int) -> None:
        """Hook: a task waits on a pending action; send the cards it does not have yet."""
        action = self.deps.pending.get(pending_id)
        if action is None or not action.conversation.startswith(AIBOT_PREFIX):
            return
        bot, chat = action.conversation[len(AIBOT_PREFIX) :].split(":", 1)
        try:
            if action.status == "pending" and not self.store.for_action(action.id, "confirm"):
                self._send(action, "confirm", action.user_id, action.conversation, chat)
            waits = action.status == "confirmed" and action.needs_approval and action.approved_by is None
            if waits and not self.store.for_action(action.id, "approve"):
                for user in approvers_for(action, self.deps):
                    self._send(action, "approve", user, f"{AIBOT_PREFIX}{bot}:{user}", user)
        except Exception:  # the text prompt goes anyway: typed commands still work
            log.exception("wecom bot card for action %s failed", action.id, extra={"task_id": task.id})

    def _send(self, action: PendingAction, role: str, user: str, conversation: str, chat: str) -> None:
        task_id = card_task_id(role, action.id, self.store.next_serial())
        body = bot_template_card(self.facts.card(action, role, conversation), task_id)
        # recorded first: a click may come back as soon as the card is out
        self.store.add(
            task_id=task_id,
            channel=CHANNEL,
            recipient=user,
            conversation=conversation,
            action_id=action.id,
            role=role,
            response_code="",
            state=self.facts.state(action),
            now=self.deps.clock(),
        )
        if not self.send(conversation, chat, chat == user, body):
            self.store.remove(task_id)
            log.info("no card for action %s to %s: text commands only", action.id, user)

    def clicked(self, message: InboundMessage) -> PendingAction | None:
        """Before the click runs: the action as it was."""
        card = self.store.by_task(message.card_task)
        return self.deps.pending.get(card.action_id) if card is not None else None

    def after_click(self, message: InboundMessage, before: PendingAction | None, reply: str) -> None:
        """Audit the click: accepted when it moved the action on, else refused with the reply as reason."""
        self.facts.audit_click(message, self.store.by_task(message.card_task), before, reply)

    def reply_for(self, task_id: str) -> dict[str, Any] | None:
        """The passive answer to a click on card `task_id`: the card as its action stands now (None for
        a card that is not one of ours)."""
        card = self.store.by_task(task_id)
        action = self.deps.pending.get(card.action_id) if card is not None else None
        if card is None or card.channel != CHANNEL or action is None:
            return None
        body = bot_template_card(self.facts.card(action, card.role, card.conversation), task_id)
        self.store.shown(task_id, self.facts.state(action), self.deps.clock())
        return update_reply(body)
