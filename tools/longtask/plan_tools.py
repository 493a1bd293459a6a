"""plan_*: the model keeps a plan of the task's remaining work; completion needs checked evidence.

The tools act on the task's active plan (its own, or the newest plan of the same user in the same
conversation that still has open items, so "continue" picks the work up again). The worker is the
task (`task:<id>`): an item is claimed for it, and only it may complete or fail the item. These are
plan bookkeeping in xihe's own store, not outside effects, so they are `read` risk for the gate.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from xihe.agent.errors import ToolFailed
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.timefmt import show
from xihe.tools.longtask.evidence import check
from xihe.tools.longtask.plan_store import PlanStore
from xihe.tools.longtask.plan_workers import abandoned_owners, active_plan, worker
from xihe.tools.longtask.plans import PlanError, PlanItem, open_count


class ViewArgs(BaseModel):
    """No arguments."""


class AddArgs(BaseModel):
    description: str = Field(description="what this item achieves, e.g. 'check the order facts of A3003'")
    depends_on: list[int] = Field(
        default_factory=list, description="numbers of EXISTING items that must be completed before this one"
    )


class ItemArgs(BaseModel):
    item: int = Field(description="the item number, e.g. 2 for #2")


class Evidence(BaseModel):
    kind: Literal["dolphin_instance", "artifact", "command", "text"] = Field(
        description="dolphin_instance: a DS run that must be SUCCESS; artifact: a stored output with its sha256; "
        "command: a command call of this task that exited 0; text alone is never accepted"
    )
    project_code: int | None = Field(None, description="dolphin_instance: the DS project code")
    instance_id: int | None = Field(None, description="dolphin_instance: the workflow instance id")
    artifact_id: str | None = Field(None, description="artifact: its id")
    sha256: str | None = Field(None, description="artifact: the sha256 of its content")
    tool_call_id: str | None = Field(
        None, description="command: the id of your tool call that ran the command"
    )
    step: str | None = Field(None, description="command: or the step key, e.g. tool:3:0")
    note: str = Field("", description="a short human note (never enough on its own)")


class CompleteArgs(BaseModel):
    item: int = Field(description="the item number you claimed")
    evidence: Evidence = Field(description="what proves the item is done; it is checked")


class FailArgs(BaseModel):
    item: int = Field(description="the item number you claimed")
    reason: str = Field(description="why it cannot be done")


class ReviseArgs(BaseModel):
    item: int = Field(description="the item number")
    action: Literal["replace", "drop"] = Field(
        description="replace: new description, starts over as pending; drop: cancel it (dependents stay blocked)"
    )
    reason: str = Field(description="why the plan changes (recorded)")
    description: str | None = Field(None, description="replace: the new description")


def _item(item: PlanItem, ctx: ToolContext) -> dict[str, Any]:
    return {"item": item.seq, "status": item.status, "line": item.line(ctx.now)}


def _view(plans: PlanStore, ctx: ToolContext, plan: int | None = None) -> dict[str, Any]:
    plan = plan if plan is not None else _plan(plans, ctx)
    items = plans.items(plan)
    return {
        "plan_of_task": plan,
        "open": open_count(items),
        "items": [i.line(ctx.now) for i in items] or ["(empty: add items with plan_add)"],
    }


def _plan(plans: PlanStore, ctx: ToolContext) -> int:
    return active_plan(plans, ctx.deps.tasks, ctx.deps.tasks.get(ctx.task_id))


def specs(plans: PlanStore, lease_seconds: int) -> list[ToolSpec]:
    """The plan tools over one store."""
    lease = timedelta(seconds=lease_seconds)

    def view(args: ViewArgs, ctx: ToolContext) -> dict[str, Any]:
        return _view(plans, ctx)

    def add(args: AddArgs, ctx: ToolContext) -> dict[str, Any]:
        plan = _plan(plans, ctx)
        try:
            item = plans.add(
                plan,
                args.description,
                ctx.now,
                actor=worker(ctx.task_id),
                depends_on=args.depends_on,
                created_key=ctx.idempotency_key,
            )
        except PlanError as exc:
            raise ToolFailed(str(exc)) from None
        return {"added": _item(item, ctx), **_view(plans, ctx, plan)}

    def add_lookup(args: AddArgs, ctx: ToolContext) -> dict[str, Any] | None:
        item = plans.by_key(ctx.idempotency_key)
        return None if item is None else {"added": _item(item, ctx), **_view(plans, ctx, item.task_id)}

    def claim(args: ItemArgs, ctx: ToolContext) -> dict[str, Any]:
        plan = _plan(plans, ctx)
        try:
            item = plans.claim(
                plan,
                args.item,
                worker(ctx.task_id),
                ctx.now,
                lease,
                abandoned=abandoned_owners(plans.items(plan), ctx.deps.tasks),
            )
        except PlanError as exc:
            raise ToolFailed(f"not claimed: {exc}") from None
        until = show(item.lease_until, ctx.deps.settings.core.timezone)
        return {"claimed": _item(item, ctx), "lease_until": until}

    def complete(args: CompleteArgs, ctx: ToolContext) -> dict[str, Any]:
        plan = _plan(plans, ctx)
        try:
            item = plans.get(plan, args.item)
            me = worker(ctx.task_id)
            if item.status == "in_progress" and item.lease_owner != me:
                raise PlanError(f"item #{item.seq} is claimed by {item.lease_owner}, not by you ({me})")
            if item.status == "pending":
                raise PlanError(f"item #{item.seq} is not claimed; claim it first")
            checked = check(args.evidence.model_dump(exclude_none=True), ctx)
            item = plans.complete(plan, args.item, me, checked, ctx.now)
        except PlanError as exc:
            raise ToolFailed(f"not completed: {exc}") from None
        except ToolFailed as exc:
            raise ToolFailed(f"not completed: {exc}") from None
        return {"completed": _item(item, ctx), "evidence": checked.get("summary"), **_view(plans, ctx, plan)}

    def fail(args: FailArgs, ctx: ToolContext) -> dict[str, Any]:
        plan = _plan(plans, ctx)
        try:
            item = plans.fail(plan, args.item, worker(ctx.task_id), args.reason, ctx.now)
        except PlanError as exc:
            raise ToolFailed(str(exc)) from None
        return {"failed": _item(item, ctx), **_view(plans, ctx, plan)}

    def revise(args: ReviseArgs, ctx: ToolContext) -> dict[str, Any]:
        plan = _plan(plans, ctx)
        me = worker(ctx.task_id)
        try:
            if args.action == "replace":
                item = plans.replace(plan, args.item, args.description or "", args.reason, ctx.now, actor=me)
            else:
                item = plans.drop(plan, args.item, args.reason, ctx.now, actor=me)
        except PlanError as exc:
            raise ToolFailed(str(exc)) from None
        return {"revised": _item(item, ctx), **_view(plans, ctx, plan)}

    return [
        ToolSpec(
            name="plan_view",
            description="Show the task's plan: every item with its status, owner, dependencies and evidence.",
            args=ViewArgs,
            run=view,
        ),
        ToolSpec(
            name="plan_add",
            description="Add one item to the plan. It may depend only on items that already exist.",
            args=AddArgs,
            run=add,
            lookup=add_lookup,
        ),
        ToolSpec(
            name="plan_claim",
            description="Claim an item before working on it; fails while its dependencies are not completed "
            "or someone else holds it.",
            args=ItemArgs,
            run=claim,
        ),
        ToolSpec(
            name="plan_complete",
            description="Mark your claimed item completed. Evidence is checked: a DS instance must be SUCCESS, "
            "an artifact must match its sha256, a command must have exited 0. Text alone is refused.",
            args=CompleteArgs,
            run=complete,
        ),
        ToolSpec(
            name="plan_fail",
            description="Give up on your claimed item, with the reason. Items depending on it stay blocked.",
            args=FailArgs,
            run=fail,
        ),
        ToolSpec(
            name="plan_revise",
            description="Replace an item's description (it starts over) or drop it; the reason is recorded.",
            args=ReviseArgs,
            run=revise,
        ),
    ]
