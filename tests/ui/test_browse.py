"""Finding things on the pages: audit paging and search, workflow filter, task search, readable Chinese,
one time zone with its offset, self-refreshing pages while tasks run, and pending actions as people
read them (summary, waiting for whom, who may approve)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.ui.conftest import MakeUiBot, UiBot
from xihe.agent.audit import AuditEvent


def seed_audit(bot: UiBot, n: int) -> None:
    """`n` audited tool calls by alice, oldest first; every 7th names the 订单同步 workflow."""
    for i in range(n):
        args: dict[str, Any] = {"n": i}
        if i % 7 == 0:
            args = {"workflow": "订单同步", "dates": "昨天", "n": i}
        bot.app.deps.audit.record(
            AuditEvent(
                at=bot.clock(),
                kind="tool_call",
                actor="alice",
                outcome="done",
                tool="echo",
                args_redacted=args,
                reason=f"call number {i}",
            )
        )
        bot.clock.advance(seconds=1)


def numbers(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"call number (\d+)", html)]


def test_audit_pages_beyond_the_first_without_gaps_or_repeats(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()  # page_size 20
    seed_audit(bot, 47)
    c = bot.login("dave")
    seen: list[int] = []
    url: str | None = "/ui/audit?tool=echo"
    pages = 0
    while url:
        html = c.get(url).text
        seen += numbers(html)
        found = re.search(r'href="([^"]+)" id="audit-older"', html)
        url = found.group(1).replace("&amp;", "&") if found else None
        pages += 1
    assert pages == 3
    assert seen == list(range(46, -1, -1))  # newest first, every event once
    third = c.get("/ui/audit?tool=echo&page=3").text
    assert "events 41–47" in third and 'id="audit-newer"' in third and 'id="audit-older"' not in third


def test_audit_text_search_and_workflow_filter_read_chinese(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    seed_audit(bot, 15)
    c = bot.login("dave")

    def rows(query: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads(c.get(f"/ui/audit.json?{query}").text)
        return found

    assert sorted(r["args_redacted"]["n"] for r in rows("workflow=订单同步")) == [0, 7, 14]
    assert rows("workflow=order") == []  # the workflow, not a substring of something else
    assert [r["reason"] for r in rows("q=NUMBER 12")] == ["call number 12"]  # case-insensitive
    assert len(rows("q=昨天")) == 3  # Chinese inside the stored arguments
    html = c.get("/ui/audit?workflow=订单同步").text
    assert "订单同步" in html and "\\u8ba2" not in html  # characters, not escapes
    assert len(numbers(html)) == 3


def test_task_search_finds_goals_and_replies(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    chinese = bot.seed_done(user="alice", text="订单")
    bot.seed_done(user="alice", text="payments")
    c = bot.login("dave")
    html = c.get("/ui/tasks?q=PAYMENTS").text
    assert html.count('class="task-row"') == 1 and "echo payments" in html
    assert c.get("/ui/tasks?q=订单").text.count('class="task-row"') == 1
    page = c.get(f"/ui/tasks/{chinese}").text
    # the model's tool-call arguments are JSON inside JSON: shown unpacked, not as \" and \uXXXX escapes
    assert "\\&#34;" not in page and "\\u8ba2" not in page
    assert "&#34;arguments&#34;: {" in page and "&#34;text&#34;: &#34;订单&#34;" in page


def test_every_page_names_one_zone_with_its_offset(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    task_id = bot.seed_done(user="alice")
    c = bot.login("dave")
    for path in ("/ui/tasks", f"/ui/tasks/{task_id}", "/ui/audit", "/ui/pending", "/ui/alerts"):
        html = c.get(path).text
        assert "Times in Asia/Shanghai (+08:00)" in html, path
        assert " CST" not in html and " UTC<" not in html, path
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+08:00", c.get("/ui/tasks").text)


def test_pages_refresh_themselves_only_while_tasks_run(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    done = bot.seed_done(user="alice")
    c = bot.login("dave")
    assert 'http-equiv="refresh"' not in c.get("/ui/tasks").text
    assert 'http-equiv="refresh"' not in c.get(f"/ui/tasks/{done}").text
    running = bot.app.deps.tasks.create(kind="chat", owner="alice", conversation="wecom:alice",
                                        goal="long one", now=bot.clock(), status="running")  # fmt: skip
    assert '<meta http-equiv="refresh" content="10">' in c.get(f"/ui/tasks/{running.id}").text
    assert '<meta http-equiv="refresh" content="10">' in c.get("/ui/tasks").text


REFRESH = '<meta http-equiv="refresh" content="10">'


def test_pending_and_alerts_pages_refresh_themselves_keeping_their_filters(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    c = bot.login("dave")
    # the lists refresh even when empty: new actions and failures arrive on their own
    for path in ("/ui/pending", "/ui/alerts", "/ui/alerts?show=suppressed&instance=7"):
        html = c.get(path).text
        # exactly this: a meta refresh without url= reloads the same address, query (the filters) included
        assert REFRESH in html, path
        assert "this page refreshes every 10 s<" in html, path
    # one action refreshes while it is still moving, not once it has expired
    action = bot.seed_prod_write(user="bob", confirm=False)
    one = c.get(f"/ui/pending/{action}").text
    assert REFRESH in one and "while the action moves on" in one
    bot.clock.advance(hours=2)
    assert "http-equiv" not in c.get(f"/ui/pending/{action}").text


def test_pending_page_says_what_waits_for_whom_and_who_can_approve(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    action = bot.seed_prod_write(user="bob", note="轮换密钥", confirm=False)
    c = bot.login("dave")
    html = c.get("/ui/pending").text
    card = html.split(f'id="pending-{action}"')[1].split("</section>")[0]
    assert "write_note on prod" in card  # the summary (this test tool has no explain)
    assert "bob&#39;s /confirm, then an approver (carol, dave)" in card
    assert "note: 轮换密钥" in card and "environment: prod" in card  # readable arguments
    bot.ask("bob", f"/confirm {action}")
    card = c.get("/ui/pending").text.split(f'id="pending-{action}"')[1].split("</section>")[0]
    assert "an approver: carol, dave" in card
    assert '<dd class="approvers">carol, dave</dd>' in card


def test_run_page_links_task_and_run_both_ways(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    deps = bot.app.deps
    t = deps.tasks.create(kind="chat", owner="alice", conversation="wecom:alice", goal="backfill order_sync",
                          now=bot.clock(), status="done")  # fmt: skip
    deps.tasks.add_runs(t.id, [4242], bot.clock())
    deps.tasks.set_outcome(t.id, "run FAILURE", bot.clock())
    dave = bot.login("dave")
    listing = dave.get("/ui/tasks?status=failed").text
    assert 'href="/ui/runs/4242"' in listing and "done · run FAILURE" in listing
    assert 'href="/ui/runs/4242"' in dave.get(f"/ui/tasks/{t.id}").text
    run = dave.get("/ui/runs/4242").text
    # no watch row says this task started 4242: it is listed as a task that looked at the run
    looked = run.split('id="run-queries">')[1].split("</dd>")[0]
    assert f'href="/ui/tasks/{t.id}"' in looked and "/rerun 4242" in run
    assert bot.login("alice").get("/ui/runs/4242").status_code == 200  # her own run
    assert bot.login("bob").get("/ui/runs/4242").status_code == 403  # not his


def test_pending_pages_say_what_the_cards_say_to_the_end(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    rejected = bot.seed_prod_write(user="bob", note="a")
    c = bot.login("dave")
    state = c.get("/ui/pending").text.split(f'id="pending-{rejected}"')[1].split('class="state">')[1]
    assert state.startswith("confirmed by bob at ") and "waiting for approval by carol, dave" in state
    bot.ask("carol", f"/reject {rejected} wrong business date")
    page = c.get(f"/ui/pending/{rejected}").text
    assert '<dd class="state">rejected by carol: wrong business date; nothing was run</dd>' in page
    assert f'id="pending-{rejected}"' not in c.get("/ui/pending").text  # the list shows what waits
    approved = bot.seed_prod_write(user="bob", note="b")
    bot.ask("carol", f"/approve {approved}")
    state = c.get(f"/ui/pending/{approved}").text.split('class="state">')[1].split("</dd>")[0]
    assert "approved by carol at " in state and state.endswith("; executed")
    assert bot.login("alice").get(f"/ui/pending/{approved}").status_code == 404  # bob's, not alice's
    assert c.get("/ui/pending/999").status_code == 404
