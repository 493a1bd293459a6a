"""API profiles: where DolphinScheduler 3.1, 3.2 and 3.3 differ in paths, parameters, fields and
behaviour. Code outside this folder asks a profile what it can do (`start_is_asynchronous`), never
which version it is, so a new version is one more profile here (plus the probe in transport.py).

3.1 and 3.2 use the `process-*` names; 3.3 renamed them to `workflow-*` (PR #16515). The start
response differs too: 3.1 returns null, 3.2 a trigger code, 3.3 a list of instance ids.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    dag_keys: tuple[str, str]  # DagData's definition and task-relation keys

    @property
    def start_is_asynchronous(self) -> bool:
        """The start answer carries no instance id: the master creates the run later (3.1, 3.2)."""
        return self.start_returns != "ids"


_V31 = Profile(
    version="3.1",
    definitions="process-definition",
    instances="process-instances",
    start_path="start-process-instance",
    start_code_param="processDefinitionCode",
    priority_param="processInstancePriority",
    list_definition_filter="processDefineCode",
    instance_id_param="processInstanceId",
    instance_definition_field="processDefinitionCode",
    task_instance_field="processInstanceId",
    tasks_state_key="processInstanceState",
    sends_timeout=True,
    has_execution_order=False,
    start_returns="null",
    dag_keys=("processDefinition", "processTaskRelationList"),
)

PROFILES: dict[str, Profile] = {
    "3.1": _V31,
    "3.2": replace(  # 3.2 sends an execution order and answers a start with a trigger code
        _V31, version="3.2", has_execution_order=True, start_returns="trigger"
    ),
    "3.3": Profile(
        version="3.3",
        definitions="workflow-definition",
        instances="workflow-instances",
        start_path="start-workflow-instance",
        start_code_param="workflowDefinitionCode",
        priority_param="workflowInstancePriority",
        list_definition_filter="workflowDefinitionCode",
        instance_id_param="workflowInstanceId",
        instance_definition_field="workflowDefinitionCode",
        task_instance_field="workflowInstanceId",
        tasks_state_key="workflowInstanceState",
        sends_timeout=False,
        has_execution_order=True,
        start_returns="ids",
        dag_keys=("workflowDefinition", "workflowTaskRelationList"),
    ),
}
