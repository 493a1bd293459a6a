"""One authorization rule per record (issue 26, finding 4), as a table: every route that shows a task,
its run, artifact, audit events, alert rows or pending confirmation × every role × which user owns
the record. A viewer sees a record when they own it or are an approver or admin, on every route."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tests.ui.conftest import MakeUiBot, UiBot
from tests.ui.test_pages import _insert
from xihe.agent.audit import AuditEvent

VIEWERS = ("alice", "bob", "carol", "dave")  # developer, operator, approver, admin
PRIVILEGED = {"carol", "dave"}


@dataclass(frozen=True)
class Owned:
    """What one user owns: a task that started a run, its artifact, audit event, alert row, action."""

    task: int
    run: int
    art: str
    action: int
    marker: str  # text only this user's records carry


def seed(bot: UiBot, user: str, run: int) -> Owned:
    deps, now = bot.app.deps, bot.clock()
    marker = f"record-of-{user}"
    t = deps.tasks.create(kind="chat", owner=user, conversation=f"wecom:{user}", goal=f"backfill {marker}",
                          now=now, status="done")  # fmt: skip
    deps.tasks.add_runs(t.id, [run], now)
    art = deps.artifacts.put(f"output {marker}", now, task_id=t.id, step_key="tool:1:0", owner=user).id
    # an event by the system on the user's task: theirs through the task, not as its actor
    deps.audit.record(AuditEvent(at=now, kind="tool_call", actor="xihe", outcome="done", task_id=t.id,
                                 reason=f"audit {marker}"))  # fmt: skip
    _insert(bot, "alert_event", {"at": now, "kind": "decision", "instance_id": run, "workflow": "order_sync",
                                 "reason": "new_instance", "detail": f"error text {marker}"})  # fmt: skip
    action = deps.pending.create(task_id=t.id, step_key="tool:2:0", user_id=user, conversation=f"wecom:{user}",
                                 tool="write_note", args_json=json.dumps({"note": marker}), args_digest="0" * 64,
                                 environment="prod", reason="a write on prod", needs_approval=True, now=now,
                                 expires_at=now + timedelta(minutes=15)).id  # fmt: skip
    return Owned(t.id, run, art, action, marker)


# (route, how it shows the record): "status" = 200 shown / 403 refused; else the text it lists
ROUTES: list[tuple[str, str]] = [
    ("/ui/tasks/{task}", "status"),
    ("/ui/tasks/{task}.json", "status"),
    ("/ui/artifacts/{art}", "status"),
    ("/ui/artifacts/{art}?raw=1", "status"),
    ("/ui/runs/{run}", "status"),
    ("/ui/alerts?instance={run}", "status"),
    ("/ui/tasks", 'href="/ui/tasks/{task}"'),
    ("/ui/tasks?q=record-of", 'href="/ui/tasks/{task}"'),
    ("/ui/audit", "audit {marker}"),
    ("/ui/audit?task={task}", "audit {marker}"),
    ("/ui/audit.json?kind=tool_call", "audit {marker}"),
    ("/ui/alerts", "error text {marker}"),
    ("/ui/pending", 'id="pending-{action}"'),
]


def observed(client: Any, route: str, how: str, rec: Owned) -> bool:
    fields = {"task": rec.task, "run": rec.run, "art": rec.art, "action": rec.action, "marker": rec.marker}
    r = client.get(route.format(**fields), follow_redirects=False)
    if how == "status":
        assert r.status_code in (200, 403), (route, r.status_code)
        return r.status_code == 200
    assert r.status_code == 200, (route, r.status_code)
    body = json.dumps(r.json()) if route.startswith("/ui/audit.json") else r.text
    return how.format(**fields) in body


def test_every_route_applies_the_same_rule_to_every_role_and_owner(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    records = {"alice": seed(bot, "alice", 101), "bob": seed(bot, "bob", 202)}
    clients = {v: bot.login(v) for v in VIEWERS}
    wrong = []
    for route, how in ROUTES:
        for owner, rec in records.items():
            for viewer in VIEWERS:
                want = viewer == owner or viewer in PRIVILEGED
                if observed(clients[viewer], route, how, rec) != want:
                    wrong.append(f"{route} owner={owner} viewer={viewer}: {'hidden' if want else 'shown'}")
    assert wrong == [], "\n".join(wrong)
