"""read_artifact: page through a full tool output that was cut for the model."""

from __future__ import annotations

from pydantic import BaseModel, Field

from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import Catalog, text
from xihe.agent.registry import ToolContext, ToolSpec

FAILS: Catalog = {
    "missing": {"en": "there is no artifact {id}", "zh": "没有附件 {id}"},
    "not_yours": {"en": "artifact {id} belongs to another user", "zh": "附件 {id} 属于另一个用户"},
}


class Args(BaseModel):
    artifact_id: str = Field(
        description="artifact id named in a truncated tool result, e.g. '3f2a9c01d4e5b6a7'"
    )
    offset: int = Field(0, ge=0, description="character offset to start reading at")
    length: int = Field(6000, ge=1, le=8000, description="how many characters to read")


def run(args: Args, ctx: ToolContext) -> str:
    found = ctx.deps.artifacts.get(args.artifact_id)
    if found is None:
        raise ToolFailed(text(FAILS, "missing", id=repr(args.artifact_id)))
    ref, content, owner = found
    if owner and owner != ctx.user:
        raise ToolFailed(text(FAILS, "not_yours", id=args.artifact_id))
    whole = content.decode("utf-8", "replace")
    chunk = whole[args.offset : args.offset + args.length]
    end = args.offset + len(chunk)
    more = f" ({len(whole) - end} more characters after offset {end})" if end < len(whole) else " (end)"
    return f"artifact {ref.id} sha256 {ref.sha256[:16]} characters {args.offset}-{end} of {len(whole)}{more}:\n{chunk}"


SPEC = ToolSpec(
    name="read_artifact",
    risk="read",
    args=Args,
    run=run,
    description="Read part of a saved full tool output (artifact) that was truncated in an earlier result.",
)
