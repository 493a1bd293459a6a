"""Who may see which record: one rule, applied by every page and JSON endpoint that shows the record.

Every record has owners: a task its owner; an artifact the owner of its task; a run the owners of
the tasks that started it; an alert row the owners of its run (nobody when it names no run xihe
started); an audit event its actor and the owner of its task; a pending confirmation its requester.
Approvers and admins see every record; anyone else sees a record only when they are one of its
owners. A page that lists records applies the rule as a filter; a page of one record answers 403.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, select

from xihe.agent.core_tables import task
from xihe.agent.web.ui.auth import Viewer

RECENT_TASKS = 2000  # how far back a user's runs are looked up (as TaskStore.with_run)


def may_see(viewer: Viewer, owners: Iterable[str]) -> bool:
    """The rule."""
    return viewer.sees_all or viewer.user in set(owners)


def owner_filter(viewer: Viewer) -> str | None:
    """The user a list must be limited to, or None for everyone's."""
    return None if viewer.sees_all else viewer.user


def runs_of(engine: Engine, user: str) -> list[int]:
    """The runs the user's (newest RECENT_TASKS) tasks started."""
    q = (
        select(task.c.runs)
        .where(task.c.owner == user, task.c.runs.is_not(None))
        .order_by(task.c.id.desc())
        .limit(RECENT_TASKS)
    )
    with engine.connect() as conn:
        return sorted({int(r) for runs in conn.execute(q).scalars() for r in runs or []})


def visible_runs(engine: Engine, viewer: Viewer, wanted: list[int] | None) -> list[int] | None:
    """The run ids an alert list may show: `wanted` (None: any) cut to the viewer's own runs."""
    if viewer.sees_all:
        return wanted
    mine = runs_of(engine, viewer.user)
    return mine if wanted is None else [r for r in wanted if r in mine]
