"""API profiles: where DolphinScheduler 3.1, 3.2 and 3.3 differ in paths, parameters and fields.

3.1 and 3.2 use the `process-*` names; 3.3 renamed them to `workflow-*` (PR #16515). The start
response differs too: 3.1 returns null, 3.2 a trigger code, 3.3 a list of instance ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Version = Literal["3.1", "3.2", "3.3"]


@dataclass(frozen=True)
class Profile:
    """Names one DolphinScheduler API version uses."""

    version: Version
    definitions: str  # path segment under projects/{pc}/
    instances: str
    start_path: str  # under projects/{pc}/executors/
    start_code_param: str  # definition code on start
    priority_param: str
    list_definition_filter: str  # definition filter on the instance list
    instance_id_param: str  # executors/execute, task-instances filter
    instance_definition_field: str  # definition code in instance JSON
    task_instance_field: str  # instance id in task JSON
    tasks_state_key: str  # workflow state key of GET …/{id}/tasks
    sends_timeout: bool
    has_execution_order: bool
    start_returns: Literal["null", "trigger", "ids"]


PROFILES: dict[str, Profile] = {
    "3.1": Profile(
        "3.1",
        "process-definition",
        "process-instances",
        "start-process-instance",
        "processDefinitionCode",
        "processInstancePriority",
        "processDefineCode",
        "processInstanceId",
        "processDefinitionCode",
        "processInstanceId",
        "processInstanceState",
        True,
        False,
        "null",
    ),
    "3.2": Profile(
        "3.2",
        "process-definition",
        "process-instances",
        "start-process-instance",
        "processDefinitionCode",
        "processInstancePriority",
        "processDefineCode",
        "processInstanceId",
        "processDefinitionCode",
        "processInstanceId",
        "processInstanceState",
        True,
        True,
        "trigger",
    ),
    "3.3": Profile(
        "3.3",
        "workflow-definition",
        "workflow-instances",
        "start-workflow-instance",
        "workflowDefinitionCode",
        "workflowInstancePriority",
        "workflowDefinitionCode",
        "workflowInstanceId",
        "workflowDefinitionCode",
        "workflowInstanceId",
        "workflowInstanceState",
        False,
        True,
        "ids",
    ),
}
