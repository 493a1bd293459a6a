"""Action cards over the WeCom app: the requester's Confirm/Cancel card, the approvers' Approve/Reject
cards, their clicks, and keeping every copy truthful.

A card goes out when a task pauses on a pending action (the `pause_listeners` hook): the requester's
card when the action waits for their yes, the approvers' cards once the requester confirmed a
production write. A click arrives as the typed command its button stands for (see
`xihe.agent.cards`) and runs through the same command code; `after_click` audits it (accepted or
refused, with the reply as the reason) and `refresh` updates every copy whose state changed (also
when the expiry sweep expires an action: `on_expired`, so the expiry shows at once).
WeCom's app updates a card with `message/update_template_card`, each call spending one single-use
`response_code` (from the send answer or from a click): a card with no unused code left cannot be
updated, which is logged. After execution a card keeps telling the truth about the DolphinScheduler
run the action started ("run 102 started", then "run 102 ended SUCCESS" once the watcher saw it end,
as the task records it); a card's last code is kept for that end. Each card is drawn in the language
of its recipient's conversation. This module serves app conversations; the AI bot's cards are
`xihe.agent.wecom.bot_cards`; the group robot has no callbacks and keeps the text commands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.errors import WeComError
from xihe.agent.pending import PendingAction
from xihe.agent.pending_view import approvers_for
from xihe.agent.tasks import Task
from xihe.agent.wecom.card_facts import FINAL, CardFacts
from xihe.integrations.wecom.app_client import AppClient
from xihe.integrations.wecom.card_store import CardStore
from xihe.integrations.wecom.cards import card_task_id, template_card
from xihe.integrations.wecom.inbound import InboundMessage

log = logging.getLogger("xihe.wecom")

APP_PREFIX = "wecom:app:"


class ActionCards:
    """Sends, tracks and updates the action cards of one app."""

    def __init__(self, deps: Deps, client: AppClient, registry: Callable[[], Any]) -> None:
        self.deps = deps
        self.client = client
        self.facts = CardFacts(deps, registry)
        self.store = CardStore(deps.engine)
        self._refreshing = threading.Lock()

    # ---- sending -------------------------------------------------------------------------------

    def on_pause(self, task: Task, pending_id: int) -> None:
        """Hook: a task waits on a pending action; send the cards it does not have yet."""
        action = self.deps.pending.get(pending_id)
        if action is None or not action.conversation.startswith(APP_PREFIX):
            return
        try:
            if action.status == "pending" and not self.store.for_action(action.id, "confirm"):
                self._send(action, "confirm", action.user_id, action.conversation)
            waits = action.status == "confirmed" and action.needs_approval and action.approved_by is None
            if waits and not self.store.for_action(action.id, "approve"):
                agent = action.conversation[len(APP_PREFIX) :].split(":", 1)[0]
                for user in approvers_for(action, self.deps):
                    self._send(action, "approve", user, f"{APP_PREFIX}{agent}:{user}")
            self.refresh()
        except Exception:  # the text prompt goes anyway: typed commands still work
            log.exception("wecom card for action %s failed", action.id, extra={"task_id": task.id})

    def _send(self, action: PendingAction, role: str, user: str, conversation: str) -> None:
        task_id = card_task_id(role, action.id, self.store.next_serial())
        code = self.client.send_card(
            [user], template_card(self.facts.card(action, role, conversation), task_id)
        )
        self.store.add(
            task_id=task_id,
            channel="app",
            recipient=user,
            conversation=conversation,
            action_id=action.id,
            role=role,
            response_code=code,
            state=self.facts.state(action),
            now=self.deps.clock(),
        )

    def on_expired(self, action: PendingAction) -> None:
        """Hook: the sweep just expired `action`; its cards say so now, not at the next refresh job."""
        if action.conversation.startswith(APP_PREFIX):
            self.refresh()

    # ---- clicks --------------------------------------------------------------------------------

    def clicked(self, message: InboundMessage) -> PendingAction | None:
        """Before the click runs: keep its update code; the action as it was."""
        card = self.store.by_task(message.card_task)
        if card is None:
            return None
        self.store.fresh_code(card.task_id, message.response_code, self.deps.clock())
        return self.deps.pending.get(card.action_id)

    def after_click(self, message: InboundMessage, before: PendingAction | None, reply: str) -> None:
        """Audit the click (accepted when it moved the action on) and update every copy of its cards."""
        self.facts.audit_click(message, self.store.by_task(message.card_task), before, reply)
        self.refresh()

    # ---- keeping cards truthful ----------------------------------------------------------------

    def refresh(self) -> int:
        """Update every card whose action moved on since it was drawn; the number updated.

        Update codes are scarce (one per send, one per click), so a released action about to run is
        not shown (it is executed moments later), and one refresh runs at a time in this process.
        """
        with self._refreshing:
            return self._refresh()

    def _refresh(self) -> int:
        updated = 0
        now = self.deps.clock()
        for card in self.store.unsettled(FINAL, "app"):
            action = self.deps.pending.get(card.action_id)
            if action is None or action.released:
                continue
            state, settled = self.facts.state(action), self.facts.settled(action)
            if state == card.state:
                if settled:  # drawn already; nothing more will change
                    self.store.shown(card.task_id, action.status, now)
                continue
            if action.status == "executed" and not settled and len((card.response_code or "").split()) == 1:
                continue  # the last code waits for the run's end (the card says what it last said)
            code = self.store.take_code(card.task_id, now)
            if code is None:
                log.warning("card %s shows a stale state: no unused update code left", card.task_id)
                self.store.shown(card.task_id, action.status if settled else state, now)
                continue
            try:
                body = template_card(
                    self.facts.card(action, card.role, card.conversation), card.task_id, update=True
                )
                self.client.update_card(code, body, users=[card.recipient])
            except WeComError as exc:
                log.error("wecom card update failed: %s", exc, extra={"card": card.task_id})
                continue
            self.store.shown(card.task_id, action.status if settled else state, now)
            updated += 1
        return updated
