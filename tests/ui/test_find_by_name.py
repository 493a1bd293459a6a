"""Finding things on the pages by what people know: a workflow by any of its names, the task that
started run 104, and the pages from the bare host name."""

from __future__ import annotations

import json
from typing import Any

from tests.ui.conftest import MakeUiBot
from xihe.agent.audit import AuditEvent


def test_the_audit_workflow_filter_takes_any_name_of_the_workflow(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(
        files=("xihe.yaml", "access.yaml", "workflows.yaml")
    )  # order_sync: alias 订单同步, code 1001
    for i, typed in enumerate(["订单同步", "order_sync", "daily_sales"]):
        bot.app.deps.audit.record(
            AuditEvent(
                at=bot.clock(),
                kind="tool_call",
                actor="bob",
                outcome="done",
                tool="trigger_dolphinscheduler",
                args_redacted={"workflow": typed, "n": i},
            )
        )
    c = bot.login("dave")

    def numbers(workflow: str) -> list[int]:
        rows: list[dict[str, Any]] = json.loads(c.get(f"/ui/audit.json?workflow={workflow}").text)
        return sorted(r["args_redacted"]["n"] for r in rows)

    assert numbers("order_sync") == numbers("订单同步") == numbers("1001") == [0, 1]
    assert numbers("日销售") == [2]  # daily_sales by its alias
    assert c.get("/ui/audit?workflow=order_sync").text.count("trigger_dolphinscheduler") >= 2


def test_the_task_list_finds_the_task_that_started_a_run(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    started = bot.seed_done(user="alice", text="backfill")
    other = bot.seed_done(user="alice", text="something else")
    bot.app.deps.tasks.add_runs(started, [104, 1104], bot.clock())
    bot.app.deps.tasks.add_runs(other, [10400], bot.clock())
    c = bot.login("dave")
    for query in ("104", "#104", "1104"):
        html = c.get(f"/ui/tasks?q={query.replace('#', '%23')}").text
        assert html.count('class="task-row"') == 1 and f"/ui/tasks/{started}" in html, query
    assert f"/ui/tasks/{other}" in c.get("/ui/tasks?q=10400").text
    by_id = c.get(f"/ui/tasks?q={other}").text  # a number is also the task's own id
    assert f"/ui/tasks/{other}" in by_id


def test_the_bare_host_name_leads_to_the_pages(ui_bot: MakeUiBot) -> None:
    r = ui_bot().client().get("/", follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"] == "/ui"
