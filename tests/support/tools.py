"""Test-only tools, loaded through the product's `plugins:` mechanism like an admin's own tools."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from xihe.agent.errors import ToolFailed
from xihe.agent.registry import ToolContext, ToolSpec


class EchoArgs(BaseModel):
    text: str = Field(description="text to echo back")


def _echo(args: EchoArgs, ctx: ToolContext) -> dict:
    return {"echo": args.text}


class BigArgs(BaseModel):
    size: int = Field(description="characters to produce")


def _big(args: BigArgs, ctx: ToolContext) -> str:
    return "".join(f"line {i:06d} of the long output\n" for i in range(args.size // 28 + 1))[: args.size]


class NoteArgs(BaseModel):
    note: str = Field(description="what to write")
    environment: str = Field("test", description="test or prod")


def _effects_file() -> Path:
    return Path(os.environ.get("XIHE_TEST_EFFECTS", "/tmp/xihe-effects.jsonl"))


def _record_effect(key: str, payload: dict) -> bool:
    """Append an effect once per idempotency key (the outside service dedupes by key)."""
    path = _effects_file()
    if path.exists() and any(
        json.loads(line)["key"] == key for line in path.read_text().splitlines() if line
    ):
        return False
    with path.open("a") as fh:
        fh.write(json.dumps({"key": key, **payload}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return True


def _write_note(args: NoteArgs, ctx: ToolContext) -> dict:
    _record_effect(ctx.idempotency_key, {"note": args.note, "user": ctx.user})
    return {"written": args.note, "note_id": ctx.idempotency_key}


class FailArgs(BaseModel):
    reason: str = Field(description="why to fail")


def _fail(args: FailArgs, ctx: ToolContext) -> dict:
    raise ToolFailed(f"upstream said no: {args.reason}")


class StepArgs(BaseModel):
    step: int = Field(description="step number 1..5")


def _effect_step(args: StepArgs, ctx: ToolContext) -> dict:
    """A side effect per step; blocks forever before its effect when XIHE_TEST_BLOCK_STEP names it."""
    marker_dir = Path(os.environ.get("XIHE_TEST_MARKERS", "/tmp"))
    (marker_dir / f"started-{args.step}").write_text(str(os.getpid()))
    if os.environ.get("XIHE_TEST_BLOCK_STEP") == str(args.step):
        if os.environ.get("XIHE_TEST_BLOCK_AFTER_EFFECT"):
            _record_effect(ctx.idempotency_key, {"step": args.step})
            (marker_dir / f"effected-{args.step}").write_text("1")
        while True:  # the test kills us here with SIGKILL
            (marker_dir / "never").exists()
    _record_effect(ctx.idempotency_key, {"step": args.step})
    return {"step": args.step, "effect_id": ctx.idempotency_key}


def _effect_lookup(args: StepArgs, ctx: ToolContext) -> dict | None:
    path = _effects_file()
    if path.exists():
        for line in path.read_text().splitlines():
            if line and json.loads(line)["key"] == ctx.idempotency_key:
                return {"step": args.step, "effect_id": ctx.idempotency_key, "found": True}
    return None


SPECS = (
    ToolSpec(name="echo", description="Echo text back.", args=EchoArgs, run=_echo),
    ToolSpec(name="big_output", description="Produce a long output.", args=BigArgs, run=_big),
    ToolSpec(
        name="write_note",
        description="Write a note (a side effect).",
        args=NoteArgs,
        run=_write_note,
        risk="write",
        environment_of=lambda a, d: a.environment,
    ),
    ToolSpec(name="always_fail", description="Fail with a reason.", args=FailArgs, run=_fail),
    ToolSpec(
        name="effect_step",
        description="Do step N's side effect.",
        args=StepArgs,
        run=_effect_step,
        lookup=_effect_lookup,
    ),
)
