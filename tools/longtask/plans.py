"""Plans of long tasks: the items, their states and history, and how a plan reads.

A plan belongs to the task that started it (`plan_item.task_id`); items are numbered 1, 2, ... in
the order they are added, and an item may only depend on items that already exist, so the graph
can never have a cycle. Status moves

    pending ──claim──► in_progress ──complete(owner, checked evidence)──► completed
       ▲                    │  └──fail(owner, reason)──► failed
       └──replace(reason)───┴── (an expired lease lets another worker claim it again)
    any open item ──drop(reason)──► cancelled

The rows are kept by `xihe.tools.longtask.plan_store.PlanStore`; which plan a task works on, and
under which claim owner, is `xihe.tools.longtask.plan_workers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from xihe.agent.errors import TaskStateError
from xihe.agent.i18n import Lang, say, say_md
from xihe.agent.lease import is_held
from xihe.agent.wecom_markdown import Md
from xihe.tools.longtask.messages import PLAN, STATUS

OPEN = ("pending", "in_progress")


class PlanError(TaskStateError):
    """A plan operation that cannot be done (unknown item, wrong owner, unmet dependency ...)."""


@dataclass(frozen=True)
class PlanItem:
    """One item of a plan."""

    id: int
    task_id: int
    seq: int
    description: str
    depends_on: tuple[int, ...]
    status: str
    lease_owner: str | None  # the worker holding it while in progress (`xihe.agent.lease`)
    lease_until: datetime | None
    evidence: dict[str, Any] | None
    reason: str | None
    created_at: datetime
    updated_at: datetime

    def line(self, now: datetime | None = None, lang: Lang = "en", *, markdown: bool = False) -> str:
        """One line for the model (English) and for /plan (in `lang`; `markdown`: for chat, the
        description, owner, evidence and reason encoded as outside text)."""
        fill = say_md if markdown else say
        after = ""
        if self.depends_on:
            after = fill(PLAN, "after", lang, deps=Md(", ".join(f"#{d}" for d in self.depends_on)))
        who = ""
        if self.status == "in_progress" and self.lease_owner:
            lapsed = now is not None and not is_held(self.lease_until, now)
            who = fill(PLAN, "owner_lapsed" if lapsed else "owner", lang, owner=self.lease_owner)
        tail = ""
        if self.status == "completed" and self.evidence:
            evidence = self.evidence.get("summary") or self.evidence.get("kind")
            tail = fill(PLAN, "evidence", lang, evidence=evidence)
        elif self.status in ("failed", "cancelled") and self.reason:
            tail = fill(PLAN, "reason", lang, reason=self.reason)
        status = fill(STATUS, self.status, lang) if self.status in STATUS else self.status
        return fill(
            PLAN,
            "item",
            lang,
            seq=self.seq,
            status=status,
            description=self.description,
            after=after,
            who=who,
            tail=tail,
        )


@dataclass(frozen=True)
class PlanChange:
    """One entry of a plan's history."""

    seq: int
    change: str
    actor: str
    reason: str | None
    detail: dict[str, Any] | None
    at: datetime


def open_count(items: list[PlanItem]) -> int:
    """How many items are still pending or in progress."""
    return sum(1 for i in items if i.status in OPEN)


def render(items: list[PlanItem], now: datetime | None = None, lang: Lang = "en") -> str:
    """The plan as lines, one per item."""
    return "\n".join(i.line(now, lang) for i in items)
