"""Recovery by error class, inside one tool call, paid for from the task's stored retry budget.

    read tool timed out     → retried with exponential backoff (tenacity) while the per-call limit
                              (attempts and seconds) and the task's retry budget allow
    write tool timed out    → first asked `lookup` whether the effect happened; found → that is the
                              result (no second write); not found → retried like a read; no lookup
                              → not retried: the outcome is unknown and the model is told so
    anything else           → not retried here (a model mistake goes back to the model, our bug raises)

"Timed out" is a builtin `TimeoutError` or an `IntegrationError` marked `retryable` (the adapters
translate their transport errors into those). Each retry spends one unit of `task.retry_budget`
(`TaskStore.spend_retry`, a conditional UPDATE), so the budget survives restarts and replicas;
when it is gone the call fails and `RunState.stopped` tells the loop to end the task with the reason.
Truncated or invalid tool arguments never reach this far: the registry refuses them before any run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from tenacity import RetryCallState, wait_exponential

from xihe.agent.errors import IntegrationError, OutcomeUnknown, ToolFailed
from xihe.agent.registry import ToolContext, ToolSpec


@dataclass(frozen=True)
class RetryPolicy:
    """Per-call limits; the per-task budget is the task row's `retry_budget`."""

    attempts: int = 3  # tries of one call, the first included
    call_limit_seconds: float = 60.0  # no retry starts after this much time in one call
    max_wait_seconds: float = 8.0  # longest single back-off


@dataclass
class RunState:
    """Shared with the loop for one drive of a task: set when the retry budget ran out."""

    stopped: str | None = None
    retries: int = 0
    waits: list[float] | None = None


def is_timeout(exc: BaseException) -> bool:
    """The error classes worth another try: timeouts and retryable upstream failures."""
    return isinstance(exc, TimeoutError) or (isinstance(exc, IntegrationError) and exc.retryable)


def with_recovery(
    spec: ToolSpec,
    policy: RetryPolicy,
    state: RunState,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> ToolSpec:
    """The same tool, its `run` wrapped with the recovery rules above."""
    backoff = wait_exponential(multiplier=1, min=0, max=policy.max_wait_seconds)

    def run(args: Any, ctx: ToolContext) -> Any:
        deps = ctx.deps
        started = monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return spec.run(args, ctx)
            except Exception as exc:
                if not is_timeout(exc):
                    raise
                last = exc
            what = f"{spec.name} timed out ({_describe(last)})"
            if spec.risk_for(args, deps) == "write":
                try:
                    if spec.lookup is None:
                        raise OutcomeUnknown("no lookup")
                    found = spec.lookup(args, ctx)
                except OutcomeUnknown:
                    raise ToolFailed(
                        f"{what}. It is a write that may or may not have taken effect, and it has no way to "
                        "look that up, so it was NOT retried. The outcome is unknown: do not report it as "
                        "done; ask the user to check."
                    ) from None
                if found is not None:  # it happened: that is the result, never a second write
                    return found
            wait = float(backoff(cast(RetryCallState, _Attempt(attempt))))
            if attempt >= policy.attempts or monotonic() - started + wait > policy.call_limit_seconds:
                raise ToolFailed(
                    f"{what}; gave up after {attempt} attempt(s) within this call's limit "
                    f"({policy.attempts} attempts, {policy.call_limit_seconds:g}s)."
                ) from None
            left = deps.tasks.spend_retry(ctx.task_id, deps.clock())
            if left is None:
                state.stopped = (
                    f"the retry budget of task {ctx.task_id} is used up "
                    f"(last: {spec.name} timed out after {attempt} attempt(s))"
                )
                raise ToolFailed(f"{what}; not retried: {state.stopped}.") from None
            state.retries += 1
            if state.waits is not None:
                state.waits.append(wait)
            sleep(wait)

    return replace(spec, run=run)


@dataclass(frozen=True)
class _Attempt:
    """The slice of tenacity's RetryCallState that wait strategies read."""

    attempt_number: int


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]
