"""What features add to the loop: answer checks, context, reminders, stop notes, step, pause and
expiry listeners, command hints (for when no model is configured), a token budget and a recovery policy. Fixed when the Agent is constructed (`xihe.agent.app` merges
every feature's `Hooks`); the loop only reads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from xihe.agent.budget import TokenCounter
from xihe.agent.context import Block
from xihe.agent.pending import PendingAction
from xihe.agent.recovery import RetryPolicy
from xihe.agent.tasks import Task


class ReplyCheck(Protocol):
    """Checks a final answer; a complaint sends it back to the model once, then `mark` annotates it."""

    def complaint(self, task: Task, reply: str) -> str | None: ...

    def mark(self, task: Task, reply: str) -> str: ...


@dataclass(frozen=True)
class ContextBudget:
    """How requests are sized when a token budget is configured."""

    counter: TokenCounter
    total_tokens: int  # the window the request may use
    reply_tokens: int  # kept free for the answer
    summary_tokens: int = 400
    emergency_shrink: float = 0.5  # after a "too long" rejection, retry once within this share

    @property
    def limit(self) -> int:
        """Tokens the prompt (messages + tool schemas) may take."""
        return self.total_tokens - self.reply_tokens


Provider = Callable[[Task], "str | Block | None"]
Reminder = Callable[[Task, list[dict[str, Any]]], str | None]
StopNote = Callable[[Task], str | None]
StepListener = Callable[[Task, str, str], None]
PauseListener = Callable[[Task, int], None]  # a task now waits on this pending action
ExpiryListener = Callable[[PendingAction], None]  # this action just became `expired` (the sweep)
CommandHint = Callable[[str], "str | None"]  # free text → the explicit command that does it, if any


@dataclass(frozen=True)
class Hooks:
    """What features add to the loop, fixed when the Agent is constructed (`xihe.agent.app` merges them)."""

    reply_checks: tuple[ReplyCheck, ...] = ()
    context_providers: tuple[Provider, ...] = ()
    reminders: tuple[Reminder, ...] = ()
    stop_notes: tuple[StopNote, ...] = ()
    step_listeners: tuple[StepListener, ...] = ()
    pause_listeners: tuple[PauseListener, ...] = ()
    expiry_listeners: tuple[ExpiryListener, ...] = ()
    command_hints: tuple[CommandHint, ...] = ()
    context_budget: ContextBudget | None = None
    recovery: RetryPolicy | None = None
    retry_budget: int = 0

    def merge(self, other: Hooks) -> Hooks:
        """Lists concatenate in order; a setting (budget, recovery) may come from one feature only."""
        for name in ("context_budget", "recovery", "retry_budget"):
            if getattr(self, name) and getattr(other, name):
                raise ValueError(f"two features set the loop's {name}")
        return Hooks(
            self.reply_checks + other.reply_checks,
            self.context_providers + other.context_providers,
            self.reminders + other.reminders,
            self.stop_notes + other.stop_notes,
            self.step_listeners + other.step_listeners,
            self.pause_listeners + other.pause_listeners,
            self.expiry_listeners + other.expiry_listeners,
            self.command_hints + other.command_hints,
            self.context_budget or other.context_budget,
            self.recovery or other.recovery,
            self.retry_budget or other.retry_budget,
        )
