"""The resume rule as a table: what the walk does with a step, from its latest row."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from xihe.agent.frontier import INTERRUPTED, UNCERTAIN, Decision, confirmation_key, frontier, when_unknown
from xihe.agent.tasks import TaskStep

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def row(status: str, error: str | None = None, step_id: int = 7) -> TaskStep:
    return TaskStep(
        id=step_id,
        task_id=1,
        step_key="tool:1:0",
        attempt=1,
        status=status,
        tool_name="t",
        idempotency_key="1:tool:1:0",
        input_digest=None,
        input_preview=None,
        output_digest=None,
        output_ref=None,
        output_text=None,
        error=error,
        external_ids=None,
        started_at=T0,
        finished_at=None,
        duration_ms=None,
    )


RUNNING = row("running")
KILLED = row("failed", INTERRUPTED)
UNSURE = row("failed", f"{UNCERTAIN} the process stopped; it may or may not have taken effect")
FAILED = row("failed", "upstream said no")
DONE = row("done")

# (latest, superseded, side_effecting, has_lookup) -> decision
TABLE = [
    (None, False, True, False, Decision.RUN),
    (None, False, False, True, Decision.RUN),
    (DONE, False, True, False, Decision.REPLAY),
    (DONE, True, True, True, Decision.REPLAY),
    (FAILED, True, True, False, Decision.REPLAY),
    (UNSURE, True, True, False, Decision.REPLAY),
    (FAILED, False, True, False, Decision.RERUN),
    (FAILED, False, False, False, Decision.RERUN),
    (RUNNING, False, False, False, Decision.RERUN),
    (KILLED, False, False, False, Decision.RERUN),
    (RUNNING, False, True, True, Decision.LOOK_UP),
    (RUNNING, False, False, True, Decision.LOOK_UP),
    (KILLED, False, True, True, Decision.LOOK_UP),
    (RUNNING, False, True, False, Decision.UNCERTAIN),
    (KILLED, False, True, False, Decision.UNCERTAIN),
    (UNSURE, False, True, False, Decision.UNCERTAIN),
    (UNSURE, False, True, True, Decision.UNCERTAIN),  # a look-up already could not tell
    (UNSURE, False, False, False, Decision.UNCERTAIN),
]


@pytest.mark.parametrize(("latest", "superseded", "side", "lookup", "expected"), TABLE)
def test_frontier_table(
    latest: TaskStep | None, superseded: bool, side: bool, lookup: bool, expected: Decision
) -> None:
    assert frontier(latest, superseded=superseded, side_effecting=side, has_lookup=lookup) is expected


@pytest.mark.parametrize(("side", "expected"), [(True, Decision.UNCERTAIN), (False, Decision.RERUN)])
def test_a_look_up_that_cannot_tell_makes_a_write_uncertain_and_a_read_a_rerun(
    side: bool, expected: Decision
) -> None:
    assert when_unknown(side_effecting=side) is expected


@pytest.mark.parametrize(
    ("latest", "key"),
    [
        (None, "tool:1:0"),  # the first attempt: the step's own confirmation
        (RUNNING, "tool:1:0"),  # proven not to have happened: that confirmation is still unspent
        (KILLED, "tool:1:0"),
        (UNSURE, "tool:1:0@7"),  # a fresh confirmation bound to the uncertain row
        (FAILED, "tool:1:0@7"),  # a settled attempt spent its confirmation
    ],
)
def test_a_spent_confirmation_never_releases_another_attempt(latest: TaskStep | None, key: str) -> None:
    assert confirmation_key("tool:1:0", latest) == key
