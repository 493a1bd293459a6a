"""The executor: one tool call as a durable, audited step.

Before the side effect a `running` row is appended; the tool runs with the idempotency key
`task_id:step_key`; then the outcome row (`done`/`failed`, digests, error) and its audit event
are appended in one transaction. What happens to an interrupted step (look it up, rerun it, or
record it as uncertain) is decided by `xihe.agent.frontier.frontier`; the executor carries it out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from xihe.agent.audit import AuditEvent
from xihe.agent.canonical import canonical_json, sha256_text
from xihe.agent.context import cut, labelled, render_output
from xihe.agent.cpushare import waiting
from xihe.agent.crashpoint import crash_point
from xihe.agent.deps import Deps
from xihe.agent.errors import BotError, IntegrationError, ToolError
from xihe.agent.frontier import INTERRUPTED, UNCERTAIN, interrupted
from xihe.agent.i18n import Text, text
from xihe.agent.registry import ParsedCall, ToolContext
from xihe.agent.tasks import StepStatus, Task, TaskStep
from xihe.agent.user_text import FAILURES, integration_failure, outcome

PREVIEW_INPUT = 2000


@dataclass(frozen=True)
class StepResult:
    """What one tool step produced and what the model is shown."""

    shown: str  # what the model reads: `[Tool Result: name]`, then the body
    ok: bool
    body: str  # the result itself (a command's reply is made from it)
    reused: bool = False
    error: str | None = None
    said: Text | None = None  # a failure for people, in any language (None: only the English body)


def external_ids(value: Any) -> dict[str, Any] | None:
    """Ids of outside things a result names (keys ending in _id/_ids), for audit and the UI."""
    if not isinstance(value, dict):
        return None
    found = {k: v for k, v in value.items() if (k.endswith("_id") or k.endswith("_ids")) and v is not None}
    return found or None


class Executor:
    """Runs parsed, gate-approved calls as steps of a task."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def replay(self, step: TaskStep) -> StepResult:
        """The stored result of a finished step, exactly as the model saw it."""
        text = step.output_text or step.error or ""
        if step.output_ref:
            found = self.deps.artifacts.get(step.output_ref)
            if found is not None:
                cap = self.deps.settings.core.loop.result_cap_chars
                body = cut(found[1].decode("utf-8", "replace"), cap, found[0])
                return StepResult(labelled(step.tool_name, body), ok=True, body=body, reused=True)
        if step.status == StepStatus.FAILED:  # stored as the model read it
            return StepResult(text, ok=False, body=step.error or text, reused=True, error=step.error)
        return StepResult(labelled(step.tool_name, text), ok=True, body=text, reused=True)

    def _context(self, task: Task, step_key: str, call: ParsedCall) -> tuple[ToolContext, Any, str, str]:
        deps = self.deps
        ctx = ToolContext(deps, task.id, step_key, task.owner, task.conversation, deps.clock())
        redacted = deps.redactor.data(call.data, call.spec.secret_args)
        return ctx, redacted, canonical_json(redacted)[:PREVIEW_INPUT], sha256_text(canonical_json(call.data))

    def interrupted(self, latest: TaskStep) -> TaskStep:
        """Record that the process died during this attempt (once); the row that is now the latest."""
        if latest.status != StepStatus.RUNNING:
            return latest
        return self.deps.tasks.finish_step(latest, StepStatus.FAILED, self.deps.clock(), error=INTERRUPTED)

    def look_up(
        self, task: Task, step_key: str, call: ParsedCall, *, intent: str, reason: str
    ) -> StepResult | None:
        """Ask the tool whether an interrupted attempt took effect: its result, or None when it did not.

        Raises `OutcomeUnknown` when the tool cannot tell.
        """
        assert call.spec.lookup is not None
        ctx, redacted, preview, digest = self._context(task, step_key, call)
        found = call.spec.lookup(call.subject, ctx)
        if found is None:
            return None
        begun = self.deps.tasks.begin_step(
            task.id, step_key, call.spec.name, ctx.now, input_digest=digest, input_preview=preview
        )
        return self._done(task, begun, call, found, intent, reason, redacted, 0, recovered=True)

    def uncertain(self, task: Task, step_key: str, call: ParsedCall, latest: TaskStep, why: str) -> TaskStep:
        """Record that an interrupted attempt may or may not have taken effect (nothing is run)."""
        deps = self.deps
        now = deps.clock()
        _, redacted, preview, digest = self._context(task, step_key, call)
        error = f"{UNCERTAIN} {why}; it may or may not have taken effect and was not run again"
        audit = AuditEvent(
            at=now,
            kind="tool_call",
            actor=task.owner,
            outcome="uncertain",
            task_id=task.id,
            step_key=step_key,
            intent=task.goal,
            tool=call.spec.name,
            args_redacted=redacted,
            reason=error,
        )
        deps.metrics.tool_calls.labels(call.spec.name, "uncertain").inc()
        if latest.status == StepStatus.RUNNING:
            return deps.tasks.finish_step(latest, StepStatus.FAILED, now, error=error, audit=audit)
        return deps.tasks.record(
            task.id,
            step_key,
            call.spec.name,
            StepStatus.FAILED,
            now,
            input_digest=digest,
            input_preview=preview,
            error=error,
            audit=audit,
        )

    def run(
        self,
        task: Task,
        step_key: str,
        call: ParsedCall,
        *,
        intent: str,
        reason: str,
        latest: TaskStep | None = None,
    ) -> StepResult:
        """Run `call` as a new attempt of step `step_key` (the frontier decided that it may run)."""
        deps, spec = self.deps, call.spec
        if latest is not None and interrupted(latest):
            latest = self.interrupted(latest)
        ctx, redacted, preview, digest = self._context(task, step_key, call)
        attempt = latest.attempt + 1 if latest is not None else 1
        begun = deps.tasks.begin_step(
            task.id, step_key, spec.name, ctx.now, input_digest=digest, input_preview=preview, attempt=attempt
        )
        crash_point("before_tool_effect")
        started = time.perf_counter()
        try:
            with waiting():  # a tool mostly waits (a command, DolphinScheduler, an API)
                value = spec.run(call.subject, ctx)
        except (ToolError, IntegrationError) as exc:
            return self._failed(task, begun, call, exc, intent, redacted, started)
        except Exception as exc:
            self._failed(task, begun, call, exc, intent, redacted, started, internal=True)
            raise
        crash_point("after_tool_effect")
        return self._done(task, begun, call, value, intent, reason, redacted, time.perf_counter() - started)

    def _done(
        self,
        task: Task,
        begun: TaskStep,
        call: ParsedCall,
        value: Any,
        intent: str,
        reason: str,
        redacted: Any,
        seconds: float,
        *,
        recovered: bool = False,
    ) -> StepResult:
        deps, spec = self.deps, call.spec
        now = deps.clock()
        cap = deps.settings.core.loop.result_cap_chars
        text = deps.redactor.text(render_output(value))
        ref = None
        if len(text) > cap:
            ref = deps.artifacts.put(
                text,
                now,
                task_id=task.id,
                step_key=begun.step_key,
                owner=task.owner,
                name=f"{spec.name} output",
            )
        digest = sha256_text(text)
        ext = external_ids(value)
        deps.metrics.tool_calls.labels(spec.name, "done").inc()
        audit = AuditEvent(
            at=now,
            kind="tool_call",
            actor=task.owner,
            outcome="done",
            task_id=task.id,
            step_key=begun.step_key,
            intent=intent,
            tool=spec.name,
            args_redacted=redacted,
            reason=reason,
            result_digest=digest,
            duration_ms=int(seconds * 1000),
            state_before=task.status,
            state_after="running",
            external_ids=ext,
            detail={"recovered_by_lookup": True} if recovered else {},
        )
        deps.tasks.finish_step(
            begun,
            StepStatus.DONE,
            now,
            output_digest=digest,
            output_ref=ref.id if ref else None,
            output_text=text if ref is None else text[:cap],
            external_ids=ext,
            audit=audit,
        )
        body = cut(text, cap, ref)
        return StepResult(labelled(spec.name, body), ok=True, body=body)

    def _failed(
        self,
        task: Task,
        begun: TaskStep,
        call: ParsedCall,
        exc: Exception,
        intent: str,
        redacted: Any,
        started: float,
        *,
        internal: bool = False,
    ) -> StepResult:
        deps, spec = self.deps, call.spec
        now = deps.clock()
        people: str | Text
        if internal:
            message = f"internal error in {spec.name}: {type(exc).__name__}"
            people = text(FAILURES, "internal", tool=spec.name, error=type(exc).__name__)
        elif isinstance(exc, IntegrationError):
            message = f"{exc.service} error: {deps.redactor.text(str(exc))}" + (
                " (temporary; may be retried)" if exc.retryable else ""
            )
            why = exc.text if exc.text is not None else deps.redactor.text(str(exc))
            people = integration_failure(exc.service, why, retryable=exc.retryable)
        else:
            message = deps.redactor.text(str(exc))
            people = exc.text if isinstance(exc, BotError) and exc.text is not None else message
        shown = labelled(spec.name, f"ERROR: {message}")
        deps.metrics.tool_calls.labels(spec.name, "internal_error" if internal else "failed").inc()
        audit = AuditEvent(
            at=now,
            kind="tool_call",
            actor=task.owner,
            outcome="failed",
            task_id=task.id,
            step_key=begun.step_key,
            intent=intent,
            tool=spec.name,
            args_redacted=redacted,
            reason=message,
            duration_ms=int((time.perf_counter() - started) * 1000),
            state_before=task.status,
            state_after="running",
        )
        deps.tasks.finish_step(begun, StepStatus.FAILED, now, output_text=shown, error=message, audit=audit)
        return StepResult(
            shown, ok=False, body=f"ERROR: {message}", error=message, said=outcome("ERROR", people)
        )
