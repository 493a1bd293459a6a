"""What the pages show: filters, the step timeline to scale, alerts (present or absent), and the
same data as `xihe task show --json` and `xihe audit search --json`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import MetaData, Table, inspect, text

from tests.ui.conftest import MakeUiBot, UiBot
from xihe.agent.tasks import TaskStep
from xihe.agent.timefmt import show
from xihe.agent.web.ui import data

SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_parse_when_reads_dates_and_local_times() -> None:
    assert data.parse_when("", SHANGHAI) is None
    assert data.parse_when("2026-12-01", SHANGHAI) == datetime(2026, 12, 1, tzinfo=SHANGHAI)
    end = data.parse_when("2026-12-01", SHANGHAI, end_of_day=True)
    assert end is not None and (end.hour, end.minute) == (23, 59)
    assert data.parse_when("2026-12-01T08:30", SHANGHAI) == datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    assert data.parse_when("2026-12-01T08:30+00:00", SHANGHAI) == datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
    with pytest.raises(ValueError):
        data.parse_when("yesterday", SHANGHAI)


def _row(i: int, key: str, attempt: int, status: str, start: datetime, ms: int | None) -> TaskStep:
    return TaskStep(
        id=i, task_id=1, step_key=key, attempt=attempt, status=status, tool_name="t",
        idempotency_key=f"1:{key}", input_digest="d", input_preview="{}", output_digest=None, output_ref=None,
        output_text=None, error="boom" if status == "failed" else None, external_ids=None, started_at=start,
        finished_at=start + timedelta(milliseconds=ms) if ms is not None else None, duration_ms=ms,
    )  # fmt: skip


def test_timeline_pairs_rows_into_attempts_and_scales_bars() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    steps = [
        _row(1, "llm:1", 1, "done", t0, 0),  # recorded outcome only (no running row)
        _row(2, "tool:1:0", 1, "running", t0 + timedelta(seconds=1), None),
        _row(3, "tool:1:0", 1, "failed", t0 + timedelta(seconds=1), 3000),
        _row(4, "tool:1:0", 2, "running", t0 + timedelta(seconds=4), None),
        _row(5, "tool:1:0", 2, "done", t0 + timedelta(seconds=4), 6000),
    ]
    attempts, span = data.timeline(steps, t0 + timedelta(minutes=5), task_finished=True)
    assert span == 10_000
    assert [(a.step_key, a.attempt, a.status, a.row_ids) for a in attempts] == [
        ("llm:1", 1, "done", [1]),
        ("tool:1:0", 1, "failed", [2, 3]),
        ("tool:1:0", 2, "done", [4, 5]),
    ]
    assert [(a.left, a.width) for a in attempts] == [(0.0, 0.6), (10.0, 30.0), (40.0, 60.0)]
    assert attempts[1].error == "boom"


def test_a_step_without_outcome_is_running_or_interrupted() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    rows = [_row(1, "tool:1:0", 1, "running", t0, None)]
    live, _ = data.timeline(rows, t0 + timedelta(seconds=2), task_finished=False)
    assert live[0].status == "running" and live[0].duration_ms == 2000
    dead, _ = data.timeline(rows, t0 + timedelta(seconds=2), task_finished=True)
    assert dead[0].status == "interrupted"


def seed_mix(bot: UiBot) -> dict[str, int]:
    ids = {"failed": bot.seed_failed(user="alice"), "done": bot.seed_done(user="bob", text="ping")}
    bot.clock.advance(days=2)
    ids["late"] = bot.seed_done(user="alice", text="later")
    return ids


def listed(html: str) -> set[int]:
    import re

    return {int(m) for m in re.findall(r'<td data-label="#"><a href="/ui/tasks/(\d+)">', html)}


def test_task_filters_status_user_kind_and_time(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    ids = seed_mix(bot)
    c = bot.login("dave")
    assert listed(c.get("/ui/tasks").text) == set(ids.values())
    assert listed(c.get("/ui/tasks?status=failed").text) == {ids["failed"]}
    assert listed(c.get("/ui/tasks?user=bob").text) == {ids["done"]}
    assert listed(c.get("/ui/tasks?kind=chat&user=alice").text) == {ids["failed"], ids["late"]}
    assert listed(c.get("/ui/tasks?kind=nope").text) == set()
    day = bot.clock().astimezone(SHANGHAI).date().isoformat()
    assert listed(c.get(f"/ui/tasks?since={day}").text) == {ids["late"]}
    assert listed(c.get(f"/ui/tasks?until={day}").text) == set(ids.values())
    bad = c.get("/ui/tasks?since=yesterday")
    assert bad.status_code == 200 and "Times are ISO dates" in bad.text


def test_failed_task_page_shows_the_failed_step_its_input_and_gate_decisions(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    task_id = bot.seed_failed(user="alice", reason="disk full on /data")
    page = bot.login("carol").get(f"/ui/tasks/{task_id}").text
    failed = page.split('data-status="failed"')[1].split("</li>")[0]
    assert "always_fail" in failed
    assert "&#34;reason&#34;: &#34;disk full on /data&#34;" in failed  # the input preview, escaped JSON
    assert "upstream said no: disk full on /data" in failed  # the error
    assert "<details open>" in failed  # failed steps open by default
    assert 'class="fill f-failed"' in failed
    assert 'id="task-status">failed<' in page and 'id="task-error"' in page  # the task's own error


def test_gate_decisions_show_with_their_reasons(ui_bot: MakeUiBot) -> None:
    from xihe.integrations.fakes.llm_server import call, say

    bot = ui_bot([call("write_note", note="x", environment="prod"), say("You may not write to prod.")])
    bot.ask("alice", "write x on prod")  # developer: test only → deny
    page = bot.login("dave").get("/ui/tasks/1").text
    gates = page.split('id="task-gates"')[1].split("</table>")[0]
    assert "deny" in gates and "alice (developer) may use write_note but not on environment prod" in gates


def test_pages_serve_the_same_data_as_the_cli(
    ui_bot: MakeUiBot, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from xihe.agent.cli.main import main
    from xihe.integrations.fakes.llm_server import call, say

    bot = ui_bot()
    task_id = bot.seed_failed(user="alice")
    bot.llm.add(call("write_note", note="x", environment="prod"), say("No."))
    bot.ask("alice", "write x on prod")  # a deny
    action = bot.seed_prod_write(user="bob")  # a confirm (leaves its final reply in the script)
    c = bot.login("dave")
    monkeypatch.setenv("XIHE_DATABASE_URL", bot.db_url)

    assert main(["--config", str(bot.config_dir), "task", "show", str(task_id), "--json"]) == 0
    cli_task = json.loads(capsys.readouterr().out)
    assert json.loads(c.get(f"/ui/tasks/{task_id}.json").text) == cli_task
    assert any(s["status"] == "failed" for s in cli_task["steps"])

    day = bot.clock().astimezone(SHANGHAI).date().isoformat()
    argv = ["--config", str(bot.config_dir), "audit", "search", "--kind", "gate", "--since", day, "--json"]
    assert main(argv) == 0
    cli_audit = json.loads(capsys.readouterr().out)
    web_audit = json.loads(c.get(f"/ui/audit.json?kind=gate&since={day}").text)
    assert web_audit == cli_audit
    assert {r["outcome"] for r in cli_audit} == {"deny", "confirm"}
    confirm = next(r for r in cli_audit if r["outcome"] == "confirm")
    assert confirm["detail"]["pending_id"] == action and "approver" in confirm["reason"]

    # the text forms show times in the team's zone (Asia/Shanghai) with the offset, never CST
    local = show(bot.clock(), SHANGHAI)
    assert main(["--config", str(bot.config_dir), "audit", "search", "--kind", "gate", "--since", day]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(cli_audit) and all(line.startswith(local[:11]) for line in lines), lines
    assert all(line[:26].endswith(" +08:00") for line in lines), lines
    assert main(["--config", str(bot.config_dir), "task", "show", str(task_id)]) == 0
    assert f"created {local}, updated {local}" in capsys.readouterr().out

    html = c.get(f"/ui/audit?kind=gate&since={day}").text  # the page lists the same rows with reasons
    assert html.count('class="audit-row k-gate"') == len(cli_audit)
    assert confirm["reason"].replace("'", "&#39;") in html


def test_audit_search_filters(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    bot.seed_failed(user="alice")
    bot.seed_done(user="bob")
    c = bot.login("dave")

    def rows(query: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = json.loads(c.get(f"/ui/audit.json?{query}").text)
        return result

    assert {r["actor"] for r in rows("user=bob")} == {"bob"}
    assert {r["tool"] for r in rows("tool=always_fail")} == {"always_fail"}
    assert {(r["kind"], r["outcome"]) for r in rows("tool=always_fail&outcome=failed")} == {
        ("tool_call", "failed")
    }
    future = (bot.clock() + timedelta(days=1)).astimezone(SHANGHAI).date().isoformat()
    assert rows(f"since={future}") == []
    assert c.get("/ui/audit.json?since=nonsense").status_code == 400


# ---- alerts: the tables belong to the alerts feature; the page shows what exists


ALERT_TABLES = (
    "alert_event",
    "alert_outbox",
    "alert_channel",
    "alert_maintenance",
    "alert_life",
    "alert_page",
)


def _insert(bot: UiBot, name: str, values: dict[str, Any]) -> None:
    """Insert into the table as it exists (ours, or the alerts feature's): fill what it requires."""
    from xihe.agent.tables import metadata

    # The schema's own table (with its Python-side defaults) when it has one, else the reflected one.
    known = metadata.tables.get(name)
    table = known if known is not None else Table(name, MetaData(), autoload_with=bot.app.deps.engine)
    row: dict[str, Any] = {}
    for col in table.columns:
        if col.name in values:
            row[col.name] = values[col.name]
        elif not col.nullable and col.default is None and col.server_default is None and not col.primary_key:
            py = col.type.python_type if hasattr(col.type, "python_type") else str
            row[col.name] = {int: 0, str: "x", bool: False, datetime: bot.clock(), dict: {}}.get(py, "x")
    with bot.app.deps.engine.begin() as conn:
        conn.execute(table.insert().values(**row))


def test_alerts_page_degrades_when_the_alert_tables_are_absent(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    with bot.app.deps.engine.begin() as conn:  # a bot without the alerts feature's tables
        for name in ALERT_TABLES:
            if inspect(conn).has_table(name):
                conn.execute(text(f'DROP TABLE "{name}"'))
    task_id = bot.seed_prod_write(user="bob")  # a task with an external id but no alert table
    c = bot.login("dave")
    page = c.get("/ui/alerts")
    assert page.status_code == 200
    assert "No <code>alert_event</code> table on this bot yet" in page.text
    assert "No <code>alert_outbox</code> table" in page.text
    assert "No <code>alert_life</code> table on this bot yet" in page.text
    assert "alerts.yaml is not configured" in page.text
    assert c.get(f"/ui/tasks/{task_id}").status_code == 200


def test_alerts_page_shows_events_suppressions_channels_and_maintenance(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(files=("xihe.yaml", "access.yaml", "alerts.yaml"))
    now = bot.clock()
    _insert(bot, "alert_event", {"at": now, "kind": "decision", "instance_id": 4242, "workflow": "order_sync",
                                 "reason": "new_instance", "detail": "final failure of order_sync"})  # fmt: skip
    _insert(bot, "alert_event", {"at": now, "kind": "decision", "instance_id": 4243, "workflow": "order_sync",
                                 "reason": "maintenance", "detail": "window dc-migration"})  # fmt: skip
    _insert(bot, "alert_outbox", {"key": "inst:4242", "kind": "instance", "tier": "P0", "channel": "prod",
                                  "subject": "order_sync failed", "text": "...", "status": "sent",
                                  "created_at": now, "due_at": now})  # fmt: skip
    _insert(bot, "alert_channel", {"channel": "prod", "mode": "email", "failures": 3, "updated_at": now})
    _insert(bot, "alert_maintenance", {"window_id": "chat:1", "start_at": now - timedelta(minutes=5),
                                       "end_at": now + timedelta(minutes=25), "scope_kind": "project",
                                       "scope_value": "etl", "source": "chat", "created_by": "dave",
                                       "note": "etl upgrade"})  # fmt: skip
    c = bot.login("carol")
    page = c.get("/ui/alerts").text
    assert "final failure of order_sync" in page
    suppressed_row = page.split("window dc-migration")[0].rsplit("<tr", 1)[1]
    assert 'class="suppressed"' in suppressed_row and ">suppressed<" in suppressed_row
    pushed_row = page.split("final failure of order_sync")[0].rsplit("<tr", 1)[1]
    assert 'class="suppressed"' not in pushed_row and ">pushed<" in pushed_row
    assert "order_sync failed" in page  # the outbox row
    channels = page.split('id="channels"')[1].split("</table>")[0]
    assert "fallback: e-mail" in channels and ">3<" in channels  # prod is on e-mail after 3 failures
    assert "default" in channels and "(no delivery yet)" in channels
    maint = page.split('id="maintenance"')[1].split("</table>")[0]
    assert "nightly-worker-restart" in maint and "cron &#39;0 2 * * *&#39; for 30 min" in maint
    assert "host:10.0.0.13" in maint and "dc-migration" in maint
    chat_window = maint.split("etl upgrade")[1].split("</tr>")[0]
    assert "project:etl" in chat_window and "chat by dave" in chat_window and "active" in chat_window
    window = f"{show(now - timedelta(minutes=5), SHANGHAI, seconds=False)} → {show(now + timedelta(minutes=25), SHANGHAI, seconds=False)}"
    assert window in chat_window and "+08:00" in window and "UTC" not in maint
    only = c.get("/ui/alerts?show=suppressed").text
    assert "window dc-migration" in only and "final failure of order_sync" not in only
    one = c.get("/ui/alerts?instance=4242").text  # where an alert's trace link points
    assert "final failure of order_sync" in one and "window dc-migration" not in one


def test_alerts_page_shows_alert_states_and_how_fast_they_were_handled(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(files=("xihe.yaml", "access.yaml", "alerts.yaml"))
    now = bot.clock()
    base = {"project": "etl", "workflow": "order_sync", "tier": "P0", "channel": "prod"}
    _insert(bot, "alert_life", {**base, "instance_id": 4242, "state": "resolved", "fired_at": now - timedelta(hours=2),
                                "acked_at": now - timedelta(hours=2) + timedelta(minutes=3), "acked_by": "bob",
                                "resolved_at": now - timedelta(hours=1), "resolved_how": "resolved_same_instance",
                                "resolved_by": "bob", "resolved_instance": 4242})  # fmt: skip
    _insert(bot, "alert_life", {**base, "instance_id": 4243, "state": "firing", "pages": 2,
                                "fired_at": now - timedelta(minutes=40)})  # fmt: skip
    page = bot.login("carol").get("/ui/alerts").text
    assert "Unacknowledged P0 now: <strong>1</strong> · A2 order_sync #4243 (2 page(s))" in page
    states = page.split('id="alert-states"')[1].split("</table>")[0]
    assert "resolved_same_instance" in states and "firing" in states and "A1" in states
    measures = page.split('id="alert-measures"')[1].split("</table>")[0]
    row = measures.split(">order_sync<")[1].split("</tr>")[0]
    assert [c.split(">")[-1] for c in row.split("</td>")[:-1]] == [
        "2",
        "1",
        "3m",
        "3m",
        "1",
        "1h00m",
        "1h00m",
    ]


def test_task_page_links_instance_ids_to_their_alerts(ui_bot: MakeUiBot) -> None:
    from xihe.integrations.fakes.llm_server import call, say

    bot = ui_bot()
    _insert(bot, "alert_event", {"at": bot.clock(), "kind": "decision", "instance_id": 77,
                                 "workflow": "daily_sales", "reason": "new_instance",
                                 "detail": "final failure of daily_sales"})  # fmt: skip
    bot.llm.add(call("echo", text="x"), say("ok"))
    bot.ask("alice", "echo")
    task_id = max(t.id for t in bot.app.deps.tasks.recent(limit=1))
    # a DS-like tool result naming an instance id, as the executor records it
    step = bot.app.deps.tasks.begin_step(task_id, "tool:9:0", "ds_trigger", bot.clock(), input_preview="{}")
    bot.app.deps.tasks.finish_step(step, "done", bot.clock(), external_ids={"instance_id": 77})
    page = bot.login("dave").get(f"/ui/tasks/{task_id}").text
    assert "<code>instance_id</code>: <code>77</code>" in page
    assert "final failure of daily_sales" in page.split("Alerts about these instances")[1]
