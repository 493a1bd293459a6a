"""Test tools for the long-task walkthrough, loaded through `plugins:` like an admin's own tools.

`order_query` times out as often as the file `order-timeouts` in XIHE_TEST_MARKERS says (then
answers); `submit_draft` is a write that can time out *after* its effect (so a lookup finds it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from xihe.agent.registry import ToolContext, ToolSpec

ORDER = {"order_id": "A3003", "member": True, "days_since_delivery": 10, "custom": False}


def _markers() -> Path:
    return Path(os.environ.get("XIHE_TEST_MARKERS", "/tmp"))


def _take(name: str) -> bool:
    """Consume one unit of a countdown file; True when one was left."""
    path = _markers() / name
    left = int(path.read_text()) if path.exists() else 0
    if left <= 0:
        return False
    path.write_text(str(left - 1))
    return True


def set_countdown(name: str, n: int) -> None:
    """Make the next n calls of a tool time out."""
    (_markers() / name).write_text(str(n))


class OrderArgs(BaseModel):
    order_id: str = Field(description="order id, e.g. A3003")


def _order_query(args: OrderArgs, ctx: ToolContext) -> dict:
    calls = _markers() / "order-calls"
    calls.write_text(str(int(calls.read_text()) + 1 if calls.exists() else 1))
    if _take("order-timeouts"):
        raise TimeoutError("order service did not answer within 5s")
    return {**ORDER, "order_id": args.order_id}


class CheckArgs(BaseModel):
    order_id: str = Field(description="order to verify")
    fail: bool = Field(False, description="make the check fail")


def _run_check(args: CheckArgs, ctx: ToolContext) -> dict:
    code = 1 if args.fail else 0
    return {"command": f"verify-order {args.order_id}", "exit_code": code, "stdout": "member=yes days=10"}


class SaveArgs(BaseModel):
    text: str = Field(description="the record to save")


def _save(args: SaveArgs, ctx: ToolContext) -> dict:
    ref = ctx.deps.artifacts.put(
        args.text, ctx.now, task_id=ctx.task_id, step_key=ctx.step_key, owner=ctx.user, name="summary"
    )
    return {"artifact_id": ref.id, "sha256": ref.sha256, "size": ref.size}


class DraftArgs(BaseModel):
    order_id: str = Field(description="order id")


def _effects() -> Path:
    return _markers() / "drafts.jsonl"


def _submit_draft(args: DraftArgs, ctx: ToolContext) -> dict:
    with _effects().open("a") as fh:
        fh.write(json.dumps({"key": ctx.idempotency_key, "order": args.order_id}) + "\n")
    if _take("draft-timeouts"):
        raise TimeoutError("draft service timed out (the draft may exist)")
    return {"draft_id": f"D-{args.order_id}", "created": True}


def _draft_lookup(args: DraftArgs, ctx: ToolContext) -> dict | None:
    if _effects().exists() and any(
        json.loads(line)["key"] == ctx.idempotency_key for line in _effects().read_text().splitlines()
    ):
        return {"draft_id": f"D-{args.order_id}", "created": True, "found_by_lookup": True}
    return None


def drafts() -> list[dict]:
    """Every draft the fake service created."""
    return [json.loads(line) for line in _effects().read_text().splitlines()] if _effects().exists() else []


SPECS = (
    ToolSpec(name="order_query", description="Look an order up.", args=OrderArgs, run=_order_query),
    ToolSpec(name="run_check", description="Run the order check command.", args=CheckArgs, run=_run_check),
    ToolSpec(name="save_record", description="Save a record as an artifact.", args=SaveArgs, run=_save),
    ToolSpec(
        name="submit_draft",
        description="Create a return draft (a write).",
        args=DraftArgs,
        run=_submit_draft,
        risk="write",
        environments=("test",),
        lookup=_draft_lookup,
    ),
)
