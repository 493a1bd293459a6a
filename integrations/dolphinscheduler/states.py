"""Workflow and task state classes as DolphinScheduler names them, union over 3.1, 3.2 and 3.3."""

from __future__ import annotations

import re

# WorkflowExecutionStatus.isFinished(); BLOCK counts as finished there too.
WORKFLOW_TERMINAL = frozenset({"SUCCESS", "FAILURE", "STOP", "PAUSE", "BLOCK"})
WORKFLOW_WAITING = frozenset({"SERIAL_WAIT", "DELAY_EXECUTION", "WAIT_TO_RUN", "READY_BLOCK"})
WORKFLOW_RUNNING = frozenset(
    {"SUBMITTED_SUCCESS", "RUNNING_EXECUTION", "READY_PAUSE", "READY_STOP", "FAILOVER"} | WORKFLOW_WAITING
)

TASK_TERMINAL = frozenset(
    {"SUCCESS", "FORCED_SUCCESS", "FAILURE", "KILL", "STOP", "PAUSE", "NEED_FAULT_TOLERANCE"}
)
TASK_FAILED = frozenset({"FAILURE", "KILL", "NEED_FAULT_TOLERANCE"})
TASK_SUCCEEDED = frozenset({"SUCCESS", "FORCED_SUCCESS"})
TASK_RUNNING = frozenset({"SUBMITTED_SUCCESS", "RUNNING_EXECUTION", "DELAY_EXECUTION", "DISPATCH"})

# Stopped or paused by someone, or on the way there (workflow and task alike: KILL is a task's own).
STOPPING = frozenset({"STOP", "READY_STOP"})
PAUSING = frozenset({"PAUSE", "READY_PAUSE"})

# The workflow states each instance action (executeType) is allowed from (ExecutorServiceImpl
# `checkExecuteType`, reference §10); DS refuses any other with 50006 (3.1), 50015 (3.2) or 10000 (3.3).
ACTION_ALLOWED: dict[str, frozenset[str]] = {
    "START_FAILURE_TASK_PROCESS": frozenset({"FAILURE"}),
    "STOP": frozenset({"RUNNING_EXECUTION", "READY_PAUSE"}),
    "PAUSE": frozenset({"RUNNING_EXECUTION"}),
    "RECOVER_SUSPENDED_PROCESS": frozenset({"PAUSE", "STOP"}),
    "REPEAT_RUNNING": WORKFLOW_TERMINAL,
}
# Task states force-success accepts (`isFailure() || isKill()`); any other is 10166.
TASK_FORCEABLE = frozenset({"FAILURE", "NEED_FAULT_TOLERANCE", "KILL"})

# Every state name either enum knows; anything else in an event is an error.
KNOWN_STATES = WORKFLOW_TERMINAL | WORKFLOW_RUNNING | TASK_TERMINAL | TASK_RUNNING

# 3.1/3.2 `toString()` form: WorkflowExecutionStatus{code=7, desc='success'}
_TO_STRING = re.compile(r"code=(\d+)")
_WORKFLOW_BY_CODE = {
    0: "SUBMITTED_SUCCESS",
    1: "RUNNING_EXECUTION",
    2: "READY_PAUSE",
    3: "PAUSE",
    4: "READY_STOP",
    5: "STOP",
    6: "FAILURE",
    7: "SUCCESS",
    12: "DELAY_EXECUTION",
    14: "SERIAL_WAIT",
    15: "READY_BLOCK",
    16: "BLOCK",
    17: "WAIT_TO_RUN",
    18: "FAILOVER",
}


def is_terminal(state: str) -> bool:
    """Whether a workflow instance in `state` has ended (success, failure, stop, pause, block)."""
    return state in WORKFLOW_TERMINAL


def is_waiting(state: str) -> bool:
    """Whether the instance is queued or delayed rather than executing."""
    return state in WORKFLOW_WAITING


def workflow_state_name(value: str | None) -> str:
    """Normalise a workflow state from a name or the 3.1/3.2 toString form to its enum name."""
    if not value:
        return ""
    match = _TO_STRING.search(value)
    if match and value.startswith("WorkflowExecutionStatus"):
        return _WORKFLOW_BY_CODE.get(int(match.group(1)), value)
    return value
