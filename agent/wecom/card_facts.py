"""What an action's cards say and where they stand: shared by the app's cards and the AI bot's.

A card is drawn from the pending action, its task and the DolphinScheduler run it started, in the
language of its recipient's conversation; `state` (in English) is what a card was last drawn with,
compared to see whether it moved on; `audit_click` writes the audit row of every click, accepted
(it moved the action on) or refused (the reply says why), linked to the action and its task.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from xihe.agent.audit import AuditEvent
from xihe.agent.cards import Card, RunSeen, render, run_seen, state_text
from xihe.agent.deps import Deps
from xihe.agent.errors import TaskStateError
from xihe.agent.pending import PendingAction
from xihe.agent.pending_view import approvers_for, view
from xihe.agent.tasks import FINISHED, Task
from xihe.agent.timefmt import show
from xihe.integrations.wecom.card_store import SentCard
from xihe.integrations.wecom.inbound import InboundMessage

FINAL = ("executed", "expired", "rejected", "cancelled")  # the last states a card shows
CLOSED = ("expired", "rejected", "cancelled")  # nothing ran: nothing more to follow


class CardFacts:
    """Draws an action's cards and judges whether they can still change."""

    def __init__(self, deps: Deps, registry: Callable[[], Any]) -> None:
        self.deps = deps
        self.registry = registry

    def at(self, value: datetime | None) -> str:
        return show(value, self.deps.settings.core.timezone, seconds=False) if value else "-"

    def card(self, action: PendingAction, role: str, conversation: str) -> Card:
        """The card of `role` for the recipient of `conversation`, as the action stands now."""
        summary = view(action, self.deps, self.registry()).summary
        lang = self.deps.lang("", conversation)
        return render(
            action, role, summary, approvers_for(action, self.deps), self.at, lang, self.run(action)
        )

    def state(self, action: PendingAction) -> str:
        """The state in English: what a card was last drawn with (compared to see whether it moved on)."""
        return state_text(action, approvers_for(action, self.deps), self.at, run=self.run(action))[:200]

    def task(self, action: PendingAction) -> Task | None:
        try:
            return self.deps.tasks.get(action.task_id)
        except TaskStateError:
            return None

    def run(self, action: PendingAction) -> RunSeen | None:
        """The latest run the executed action's task started, and how it ended (`run SUCCESS`)."""
        return run_seen(self.task(action)) if action.status == "executed" else None

    def settled(self, action: PendingAction) -> bool:
        """Nothing more will change on its cards: closed unrun, or run and its run (if any) ended."""
        if action.status in CLOSED:
            return True
        if action.status != "executed":
            return False
        task = self.task(action)
        if task is None or task.status == "failed":
            return True
        run = self.run(action)
        return task.status in FINISHED and (run is None or bool(run.ended))

    def audit_click(
        self, message: InboundMessage, card: SentCard | None, before: PendingAction | None, reply: str
    ) -> None:
        """One audit row for the click: accepted when it moved the action on, else refused with the reply
        (an alert card's button, bound to no action: ran, with the command's reply)."""
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
                # a button not bound to an action (an alert card's) ran its typed command; the reply
                # says how that went
                outcome="accepted" if moved else ("ran" if card is None and message.text else "refused"),
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
