"""How many tasks a workflow version has, read from its DAG (the task relation list).

`GET …/{instance}/tasks` lists only the tasks that started so far, so "1/2 tasks done" of a
3-task workflow is wrong; the total comes from the definition. DolphinScheduler's DagData is
`{processDefinition, processTaskRelationList, taskDefinitionList}` in 3.1/3.2 and
`{workflowDefinition, workflowTaskRelationList, taskDefinitionList}` in 3.3; every task of the
DAG is the `postTaskCode` of at least one relation (a root task's `preTaskCode` is 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from xihe.agent.errors import DolphinError

if TYPE_CHECKING:
    from xihe.integrations.dolphinscheduler.models import Instance, TaskRun


@dataclass(frozen=True)
class Dag:
    """One version of a workflow definition: its version number and the codes of its tasks."""

    version: int
    task_codes: frozenset[int]


def dag_of(data: dict[str, Any], keys: tuple[str, str]) -> Dag:
    """Read a DagData object whose definition and relation list sit under `keys` (`Profile.dag_keys`)."""
    definition_key, relations_key = keys
    definition = data.get(definition_key) or {}
    codes = {int(r["postTaskCode"]) for r in data.get(relations_key) or [] if r.get("postTaskCode")}
    if not codes:  # a definition without relations: fall back to its task definitions
        codes = {int(t["code"]) for t in data.get("taskDefinitionList") or [] if t.get("code")}
    return Dag(int(definition.get("version") or 0), frozenset(codes))


def downstream_of(data: dict[str, Any], keys: tuple[str, str], task_code: int) -> list[str]:
    """Names of every task reachable from `task_code` over the DAG's relations, in DAG order."""
    _, relations_key = keys
    edges: dict[int, list[int]] = {}
    for r in data.get(relations_key) or []:
        pre, post = int(r.get("preTaskCode") or 0), int(r.get("postTaskCode") or 0)
        if pre and post:
            edges.setdefault(pre, []).append(post)
    names = {int(t["code"]): str(t.get("name") or t["code"]) for t in data.get("taskDefinitionList") or []}
    seen: list[int] = []
    todo = list(edges.get(task_code, []))
    while todo:
        code = todo.pop(0)
        if code not in seen:
            seen.append(code)
            todo.extend(edges.get(code, []))
    return [names.get(code, str(code)) for code in seen]


def _task_params(task: dict[str, Any]) -> dict[str, Any]:
    """A task definition's `taskParams`: a JSON object in the API's answer (JsonDataSerializer), or a
    string holding one."""
    raw = task.get("taskParams")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def output_readers(data: dict[str, Any], task_code: int) -> dict[str, tuple[str, ...]]:
    """The tasks that use an output parameter of `task_code`, with the `${prop}`s each uses.

    A task's output parameters are its `localParams` with `direct: OUT`; DolphinScheduler passes their
    values to the tasks after it (the varPool), where `${prop}` reads them. A task forced to success
    never set them."""
    tasks = {int(t["code"]): t for t in data.get("taskDefinitionList") or [] if t.get("code")}
    me = tasks.get(task_code)
    if me is None:
        return {}
    props = [str(p["prop"]) for p in _task_params(me).get("localParams") or []
             if isinstance(p, dict) and p.get("prop") and str(p.get("direct", "")).upper() == "OUT"]  # fmt: skip
    out: dict[str, tuple[str, ...]] = {}
    for code, task in tasks.items():
        if code == task_code:
            continue
        text = json.dumps(_task_params(task), ensure_ascii=False)
        used = tuple(f"${{{prop}}}" for prop in props if f"${{{prop}}}" in text)
        if used:
            out[str(task.get("name") or code)] = used
    return out


class TaskTotals(Protocol):
    """What `tasks_total` needs of a client (DolphinClient.task_total reads the DAG of `inst`)."""

    def task_total(self, project_code: int, inst: Instance) -> int: ...


def tasks_total(client: TaskTotals, project_code: int, inst: Instance, tasks: list[TaskRun]) -> int:
    """Tasks in `inst`'s workflow version; the tasks started so far when DS cannot say."""
    try:
        total = client.task_total(project_code, inst)
    except DolphinError:
        total = 0
    return max(total, len({t.task_code or t.name for t in tasks}))
