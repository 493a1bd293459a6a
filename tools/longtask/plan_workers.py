"""Tasks as plan workers: which plan a task works on, the claim owner it works under, and
claims held by tasks that have already finished.
"""

from __future__ import annotations

from xihe.agent.errors import TaskStateError
from xihe.agent.task_store import TaskStore
from xihe.agent.tasks import FINISHED, Task
from xihe.tools.longtask.plan_store import PlanStore
from xihe.tools.longtask.plans import PlanItem


def active_plan(plans: PlanStore, tasks: TaskStore, task: Task) -> int:
    """The plan a task works on: its own, else the newest open plan of its owner in its conversation."""
    if plans.items(task.id):
        return task.id
    recent = tasks.recent(owner=task.owner, conversation=task.conversation, limit=20)
    open_plans = plans.plans_with_open_items([t.id for t in recent if t.id != task.id])
    return max(open_plans) if open_plans else task.id


def worker(task_id: int) -> str:
    """The claim owner a task works under."""
    return f"task:{task_id}"


def abandoned_owners(items: list[PlanItem], tasks: TaskStore) -> set[str]:
    """Holders of in-progress items that are tasks already finished (they will never complete them)."""
    out: set[str] = set()
    for item in items:
        owner = item.lease_owner
        if item.status == "in_progress" and owner and owner.startswith("task:"):
            try:
                holder = tasks.get(int(owner.split(":", 1)[1]))
            except (ValueError, TaskStateError):
                continue
            if holder.status in FINISHED:
                out.add(owner)
    return out
