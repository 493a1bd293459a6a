"""Action cards over the WeCom app: the requester's Confirm/Cancel card, the approvers' Approve/Reject
cards, their clicks, and keeping every copy truthful.

A card goes out when a task pauses on a pending action (the `pause_listeners` hook): the requester's
card when the action waits for their yes, the approvers' cards once the requester confirmed a
production write. A click arrives as the typed command its button stands for (see
`xihe.agent.cards`) and runs through the same command code; `after_click` audits it (accepted or
refused, with the reply as the reason) and `refresh` updates every copy whose state changed.
WeCom's app updates a card with `message/update_template_card`, each call spending one single-use
`response_code` (from the send answer or from a click): a card with no unused code left cannot be
updated, which is logged. After execution a card keeps telling the truth about the DolphinScheduler
run the action started ("run 102 started", then "run 102 ended SUCCESS" once the watcher saw it end,
as the task records it); a card's last code is kept for that end. Each card is drawn in the language
of its recipient's conversation. Only app conversations get cards; the AI bot and the group robot keep the
text commands (the AI bot's cards are not built yet).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from xihe.agent.audit import AuditEvent
from xihe.agent.cards import Card, RunSeen, render, state_text
from xihe.agent.deps import Deps
from xihe.agent.errors import TaskStateError, WeComError
from xihe.agent.pending import PendingAction
from xihe.agent.pending_view import approvers_for, view
from xihe.agent.tasks import FINISHED, Task
from xihe.agent.timefmt import show
from xihe.integrations.wecom.app_client import AppClient
from xihe.integrations.wecom.card_store import CardStore
from xihe.integrations.wecom.cards import card_task_id, template_card
from xihe.integrations.wecom.inbound import InboundMessage

log = logging.getLogger("xihe.wecom")

APP_PREFIX = "wecom:app:"
FINAL = ("executed", "expired", "rejected", "cancelled")  # the last states a card shows
CLOSED = ("expired", "rejected", "cancelled")  # nothing ran: nothing more to follow


class ActionCards:
    """Sends, tracks and updates the action cards of one app."""

    def __init__(self, deps: Deps, client: AppClient, registry: Callable[[], Any]) -> None:
        self.deps = deps
        self.client = client
        self.registry = registry
        self.store = CardStore(deps.engine)
        self._refreshing = threading.Lock()

    def _at(self, value: datetime | None) -> str:
        return show(value, self.deps.settings.core.timezone, seconds=False) if value else "-"

    def _card(self, action: PendingAction, role: str, conversation: str) -> Card:
        summary = view(action, self.deps, self.registry()).summary
        lang = self.deps.lang("", conversation)
        return render(
            action, role, summary, approvers_for(action, self.deps), self._at, lang, self._run(action)
        )

    def _state(self, action: PendingAction) -> str:
        """The state in English: what a card was last drawn with (compared to see whether it moved on)."""
        return state_text(action, approvers_for(action, self.deps), self._at, run=self._run(action))[:200]

    def _task(self, action: PendingAction) -> Task | None:
        try:
            return self.deps.tasks.get(action.task_id)
        except TaskStateError:
            return None

    def _run(self, action: PendingAction) -> RunSeen | None:
        """The latest run the executed action's task started, and how it ended (`run SUCCESS`)."""
        task = self._task(action) if action.status == "executed" else None
        if task is None or not task.runs:
            return None
        outcome = task.outcome or ""
        return RunSeen(task.runs[-1], outcome[len("run ") :] if outcome.startswith("run ") else "")

    def _settled(self, action: PendingAction) -> bool:
        """Nothing more will change on its cards: closed unrun, or run and its run (if any) ended."""
        if action.status in CLOSED:
            return True
        if action.status != "executed":
            return False
        task = self._task(action)
        if task is None or task.status == "failed":
            return True
        run = self._run(action)
        return task.status in FINISHED and (run is None or bool(run.ended))

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
        code = self.client.send_card([user], template_card(self._card(action, role, conversation), task_id))
        self.store.add(
            task_id=task_id,
            channel="app",
            recipient=user,
            conversation=conversation,
            action_id=action.id,
            role=role,
            response_code=code,
            state=self._state(action),
            now=self.deps.clock(),
        )

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
        card = self.store.by_task(message.card_task)
        after = self.deps.pending.get(before.id) if before is not None else None
        moved = (
            after is not None
            and before is not None
            and (after.status != before.status or after.approved_by != before.approved_by)
        )
        self.deps.audit.record(
            AuditEvent(
                at=self.deps.clock(),
                kind="card_click",
                actor=message.user,
                outcome="accepted" if moved else "refused",
                task_id=after.task_id if after else None,
                tool=after.tool if after else None,
                reason=self.deps.redactor.text(reply)[:500],
                state_before=before.status if before else None,
                state_after=after.status if after else None,
                detail={
                    "pending_id": after.id if after else None,
                    "card": message.card_task,
                    "command": message.text,
                    "channel": message.channel,
                    "role": card.role if card else None,
                },
            )
        )
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
        for card in self.store.unsettled(FINAL):
            action = self.deps.pending.get(card.action_id)
            if action is None or action.released:
                continue
            state, settled = self._state(action), self._settled(action)
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
                    self._card(action, card.role, card.conversation), card.task_id, update=True
                )
                self.client.update_card(code, body, users=[card.recipient])
            except WeComError as exc:
                log.error("wecom card update failed: %s", exc, extra={"card": card.task_id})
                continue
            self.store.shown(card.task_id, action.status if settled else state, now)
            updated += 1
        return updated
