"""Evidence that a plan item is done, checked by kind before the item may be completed.

    dolphin_instance  the DolphinScheduler instance exists (asked of DS itself) and its state is SUCCESS
    artifact          the artifact exists, belongs to the task owner, and its content hashes to the sha256 given
    command           a finished step of this task whose own output reports exit code 0
    text              refused: free text (or `{"done": true}`) proves nothing on its own

A check returns the evidence as stored (with `checked: true`, what was verified and a summary) or
raises `ToolFailed` with the reason the model reads. Nothing here trusts the model's words.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from xihe.agent.errors import IntegrationError, ToolFailed
from xihe.agent.registry import ToolContext
from xihe.agent.tasks import StepStatus, TaskStep

KINDS = ("dolphin_instance", "artifact", "command", "text")
_SHELL_EXIT = re.compile(r"^\$ [^\n]*?: exit code (-?\d+)", re.MULTILINE)


def check(evidence: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The checked evidence, or ToolFailed saying what is wrong with it."""
    kind = evidence.get("kind")
    if kind == "dolphin_instance":
        return _dolphin(evidence, ctx)
    if kind == "artifact":
        return _artifact(evidence, ctx)
    if kind == "command":
        return _command(evidence, ctx)
    raise ToolFailed(
        "Free text is not evidence. Give something that can be checked: a DolphinScheduler run "
        '({"kind": "dolphin_instance", "project_code": ..., "instance_id": ...}), an artifact '
        '({"kind": "artifact", "artifact_id": ..., "sha256": ...}) or a command step of this task '
        '({"kind": "command", "tool_call_id": ...}). If you have none, the item is not done.'
    )


def _dolphin(ev: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    project, instance = ev.get("project_code"), ev.get("instance_id")
    if not project or not instance:
        raise ToolFailed("dolphin_instance evidence needs project_code and instance_id")
    service = ctx.deps.dolphin
    if service is None:
        raise ToolFailed(
            "DolphinScheduler is not configured on this bot, so a DS instance cannot be checked; "
            "the item stays open"
        )
    try:
        inst = service.client.get_instance(int(project), int(instance))
    except IntegrationError as exc:
        raise ToolFailed(f"DolphinScheduler instance {instance} could not be checked: {exc}") from None
    state = str(getattr(inst, "state", ""))
    if state != "SUCCESS":
        raise ToolFailed(
            f"DolphinScheduler instance {instance} is {state or 'in an unknown state'}, not SUCCESS; "
            "it does not prove the item done"
        )
    name = getattr(inst, "name", "")
    return {
        "kind": "dolphin_instance",
        "project_code": int(project),
        "instance_id": int(instance),
        "checked": {"state": state, "name": name},
        "summary": f"DS instance {instance} SUCCESS" + (f" ({name})" if name else ""),
        "note": str(ev.get("note") or "")[:300],
    }


def _artifact(ev: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    art_id, stated = str(ev.get("artifact_id") or ""), str(ev.get("sha256") or "").lower()
    if not art_id or not stated:
        raise ToolFailed("artifact evidence needs artifact_id and its sha256")
    found = ctx.deps.artifacts.get(art_id)
    if found is None:
        raise ToolFailed(f"artifact {art_id} does not exist")
    ref, content, owner = found
    if owner and owner != ctx.user:
        raise ToolFailed(f"artifact {art_id} belongs to someone else")
    actual = hashlib.sha256(content).hexdigest()
    if actual != stated or ref.sha256 != actual:
        raise ToolFailed(
            f"artifact {art_id} has sha256 {actual[:16]}…, not the stated {stated[:16]}…; it does not match"
        )
    return {
        "kind": "artifact",
        "artifact_id": art_id,
        "sha256": actual,
        "checked": {"size": ref.size},
        "summary": f"artifact {art_id} sha256 {actual[:12]}… ({ref.size} bytes)",
        "note": str(ev.get("note") or "")[:300],
    }


def _command(ev: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    step = find_step(ev, ctx)
    if step.status != StepStatus.DONE:
        raise ToolFailed(f"step {step.step_key} ({step.tool_name}) did not finish successfully")
    code = exit_code_of(step_output(step, ctx))
    if code is None:
        raise ToolFailed(
            f"step {step.step_key} ({step.tool_name}) reports no exit code; it is not a command result"
        )
    if code != 0:
        raise ToolFailed(f"step {step.step_key} ({step.tool_name}) exited with code {code}, not 0")
    return {
        "kind": "command",
        "task_id": ctx.task_id,
        "step": step.step_key,
        "tool": step.tool_name,
        "checked": {"exit_code": 0, "output_digest": step.output_digest},
        "summary": f"{step.tool_name} exit 0 (task {ctx.task_id} step {step.step_key})",
        "note": str(ev.get("note") or "")[:300],
    }


def find_step(ev: dict[str, Any], ctx: ToolContext) -> TaskStep:
    """The step named by `step` (tool:n:i) or by the model's own `tool_call_id`, in this task only."""
    latest = ctx.deps.tasks.latest(ctx.task_id)
    key = str(ev.get("step") or "")
    call_id = str(ev.get("tool_call_id") or "")
    if not key and call_id:
        for k, s in latest.items():
            if not k.startswith("llm:") or s.status != StepStatus.DONE or not s.output_text:
                continue
            message = json.loads(s.output_text).get("message", {})
            for i, tc in enumerate(message.get("tool_calls") or ()):
                if tc.get("id") == call_id:
                    key = f"tool:{k.split(':', 1)[1]}:{i}"
    if not key:
        raise ToolFailed("command evidence needs the tool_call_id (or step) of a command run in this task")
    step = latest.get(key)
    if step is None:
        raise ToolFailed(f"this task has no step {key}")
    return step


def step_output(step: TaskStep, ctx: ToolContext) -> str:
    if step.output_ref:
        found = ctx.deps.artifacts.get(step.output_ref)
        if found is not None:
            return found[1].decode("utf-8", "replace")
    return step.output_text or ""


def exit_code_of(output: str) -> int | None:
    """The exit code a command result reports: a top-level `exit_code` field, or the shell tool's header line."""
    try:
        data = json.loads(output)
    except ValueError:
        data = None
    if isinstance(data, dict):
        code = data.get("exit_code")
        return int(code) if isinstance(code, int) and not isinstance(code, bool) else None
    m = _SHELL_EXIT.search(output)
    return int(m.group(1)) if m else None
