"""What to do with one step of a task when the walk reaches it: the resume rule, as one pure function.

    latest row of the step          side effect?  lookup?   →  decision
    none                            any           any          RUN        first attempt
    done                            any           any          REPLAY     the stored result
    failed, task moved past it      any           any          REPLAY     its failure is history
    failed: uncertain               any           any          UNCERTAIN  still waiting for a fresh /confirm
    running or failed: interrupted  any           yes          LOOK_UP    ask the tool whether it happened
    running or failed: interrupted  no            no           RERUN      safe to do again
    running or failed: interrupted  yes           no           UNCERTAIN  may or may not have happened
    failed (a known outcome)        any           any          RERUN      the frontier is tried again

A `running` row without an outcome is a crash. The interruption is recorded as `failed` with
`INTERRUPTED` (a crash during the look-up leaves that row as the latest, and it is looked up again).
A side-effecting step that cannot be looked up is never rerun silently: it is recorded `failed` with
an `UNCERTAIN` error, the user is told it may or may not have happened, and only a fresh `/confirm`
(a new pending action bound to the same arguments and to that row) runs it again. A look-up that
cannot tell (`agent.errors.OutcomeUnknown`) ends in the same place for a side-effecting step, and in
a rerun for a read (`when_unknown`).

`confirmation_key` says which pending action may release a step: the step key itself for the first
attempt (and for a rerun after a look-up proved the interrupted attempt did nothing), otherwise a
key bound to the latest settled row (`tool:2:0@17`), so a spent confirmation never releases a second
run: an `executed` action only ever releases the attempt it was consumed for.
"""

from __future__ import annotations

from enum import StrEnum

from xihe.agent.tasks import StepStatus, TaskStep

INTERRUPTED = "interrupted: the process stopped during this step"
UNCERTAIN = "uncertain:"


class Decision(StrEnum):
    """What the walk does with a step."""

    RUN = "run"
    REPLAY = "replay"
    RERUN = "rerun"
    LOOK_UP = "look_up"
    UNCERTAIN = "uncertain"


def interrupted(step: TaskStep) -> bool:
    """The attempt has no known outcome: no outcome row yet, or only the record of the crash."""
    return step.status == StepStatus.RUNNING or (
        step.status == StepStatus.FAILED and (step.error or "") == INTERRUPTED
    )


def uncertain(step: TaskStep) -> bool:
    """The step was recorded as may-or-may-not-have-happened and waits for a fresh /confirm."""
    return step.status == StepStatus.FAILED and (step.error or "").startswith(UNCERTAIN)


def frontier(
    latest: TaskStep | None, *, superseded: bool, side_effecting: bool, has_lookup: bool
) -> Decision:
    """The decision for a step, from its latest row (see the table above).

    `superseded`: later steps of the task exist (a failure the task moved past is history).
    `side_effecting`: this call changes something outside (its risk is `write`).
    `has_lookup`: the tool can tell whether an earlier attempt took effect.
    """
    if latest is None:
        return Decision.RUN
    if latest.status == StepStatus.DONE:
        return Decision.REPLAY
    if latest.status == StepStatus.FAILED and superseded:
        return Decision.REPLAY
    if uncertain(latest):
        return Decision.UNCERTAIN
    if interrupted(latest):
        return Decision.LOOK_UP if has_lookup else when_unknown(side_effecting=side_effecting)
    return Decision.RERUN


def when_unknown(*, side_effecting: bool) -> Decision:
    """The decision after a look-up could not tell whether the interrupted attempt took effect."""
    return Decision.UNCERTAIN if side_effecting else Decision.RERUN


def confirmation_key(step_key: str, latest: TaskStep | None) -> str:
    """The pending-action key that may release the next attempt of `step_key`."""
    if latest is None or interrupted(latest):
        return step_key
    return f"{step_key}@{latest.id}"
