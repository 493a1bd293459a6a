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

from xihe.agent.errors import IntegrationError, OutcomeUnknown, ToolFailed
from xihe.agent.i18n import Catalog, Text, text
from xihe.agent.registry import ToolContext, ToolSpec

TIMEOUTS: Catalog = {  # English for the model and the audit; zh for people reading a command's reply
    "timed_out": {"en": "{tool} timed out ({error})", "zh": "{tool} 超时（{error}）"},
    "unknown_write": {
        "en": "{what}. It is a write that may or may not have taken effect, and it has no way to look that "
        "up, so it was NOT retried. The outcome is unknown: do not report it as done; ask the user to check.",
        "zh": "{what}。这是一个写操作，可能已经生效也可能没有，而且无法查证，所以没有重试。结果未知：请检查一下。",
    },
    "gave_up": {
        "en": "{what}; gave up after {n} attempt(s) within this call's limit ({attempts} attempts, {seconds}s).",
        "zh": "{what}；在这次调用的限制（{attempts} 次、{seconds} 秒）内尝试了 {n} 次后放弃。",
    },
    "budget_used": {
        "en": "the retry budget of task {task} is used up (last: {tool} timed out after {n} attempt(s))",
        "zh": "任务 {task} 的重试额度已用完（最后一次：{tool} 尝试 {n} 次后超时）",
    },
    "budget": {"en": "{what}; not retried: {stopped}.", "zh": "{what}；没有重试：{stopped}。"},
}


@dataclass(frozen=True)
class RetryPolicy:
    """Per-call limits; the per-task budget is the task row's `retry_budget`."""

    attempts: int = 3  # tries of one call, the first included
    call_limit_seconds: float = 60.0  # no retry starts after this much time in one call
    max_wait_seconds: float = 8.0  # longest single back-off


@dataclass
class RunState:
    """Shared with the loop for one drive of a task: set when the retry budget ran out."""

    stopped: Text | None = None
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
            what = text(TIMEOUTS, "timed_out", tool=spec.name, error=_describe(last))
            if spec.risk_for(args, deps) == "write":
                try:
                    if spec.lookup is None:
                        raise OutcomeUnknown("no lookup")
                    found = spec.lookup(args, ctx)
                except OutcomeUnknown:
                    raise ToolFailed(text(TIMEOUTS, "unknown_write", what=what)) from None
                if found is not None:  # it happened: that is the result, never a second write
                    return found
            wait = _backoff(policy, attempt)
            if attempt >= policy.attempts or monotonic() - started + wait > policy.call_limit_seconds:
                limit = f"{policy.call_limit_seconds:g}"
                why = text(TIMEOUTS, "gave_up", what=what, n=attempt, attempts=policy.attempts, seconds=limit)
                raise ToolFailed(why) from None
            left = deps.tasks.spend_retry(ctx.task_id, deps.clock())
            if left is None:
                state.stopped = text(TIMEOUTS, "budget_used", task=ctx.task_id, tool=spec.name, n=attempt)
                raise ToolFailed(text(TIMEOUTS, "budget", what=what, stopped=state.stopped)) from None
            state.retries += 1
            if state.waits is not None:
                state.waits.append(wait)
            sleep(wait)

    return replace(spec, run=run)


@dataclass(frozen=True)
class _Attempt:
    """The slice of tenacity's RetryCallState that wait strategies read."""

    attempt_number: int


def _backoff(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait before the next attempt: tenacity's exponential wait (tenacity imported by the
    first timeout, not by every process that builds the tools)."""
    from tenacity import RetryCallState, wait_exponential

    wait = wait_exponential(multiplier=1, min=0, max=policy.max_wait_seconds)
    return float(wait(cast(RetryCallState, _Attempt(attempt))))


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]
