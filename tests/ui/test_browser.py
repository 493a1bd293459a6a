"""The pages in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright, against
`xihe serve`'s ASGI app on a loopback uvicorn. Screenshots go to test-artifacts/ui/ (gitignored).

Needs `pip install playwright` and `apt-get install chromium`; never `playwright install`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.ui.conftest import TOKENS, MakeUiBot, UiBot

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
CHROMIUM = os.environ.get("XIHE_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-proxy-server",
]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 900}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@contextmanager
def serving(bot: UiBot) -> Iterator[str]:
    """`xihe serve`'s app (without the scheduler) on a loopback port, in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(bot.server(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def shot(page: Any, name: str, request: pytest.FixtureRequest) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    backend = request.node.callspec.id if hasattr(request.node, "callspec") else "x"
    page.screenshot(path=str(SHOTS / f"{name}-{backend}.png"), full_page=True)


def seed_timeline(bot: UiBot) -> int:
    """A task whose steps took real (fake-clock) time, so the bars show their scale."""
    deps, clock = bot.app.deps, bot.clock
    t = deps.tasks.create(kind="command", owner="bob", conversation="wecom:bob", goal="/run order_sync 2026-12-01",
                          now=clock(), status="running")  # fmt: skip
    plan = [("llm:1", "scripted", 1.2, "done"), ("tool:1:0", "ds_trigger", 4.0, "failed"),
            ("tool:1:0", "ds_trigger", 9.5, "done"), ("tool:2:0", "query_ds_task_status", 0.4, "done"),
            ("llm:2", "scripted", 2.1, "done")]  # fmt: skip
    for key, tool, seconds, status in plan:
        begun = deps.tasks.begin_step(t.id, key, tool, clock(), input_preview='{"workflow":"order_sync"}',
                                      input_digest="9f2c" * 16)  # fmt: skip
        clock.advance(seconds=seconds)
        ext = {"instance_id": 4242} if key == "tool:1:0" and status == "done" else None
        deps.tasks.finish_step(begun, status, clock(), error="DolphinScheduler: 10010 start failed" if
                               status == "failed" else None, external_ids=ext, output_digest="ab12" * 16)  # fmt: skip
        clock.advance(seconds=0.3)
    deps.tasks.update(t.id, clock(), status="done", reply="order_sync started: instance 4242, SUCCESS")
    return t.id


def log_in(page: Any, base: str, user: str) -> None:
    page.goto(f"{base}/ui/tasks")
    assert "/ui/login" in page.url  # no session: the login page
    page.fill("input[name=user]", user)
    page.fill("input[name=token]", TOKENS[user])
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/ui/tasks")
    assert page.inner_text("#me") == user


def test_log_in_filter_open_failed_task_and_approve(
    ui_bot: MakeUiBot, browser: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    bot = ui_bot()
    failed = bot.seed_failed(user="alice", reason="disk full on /data")
    bot.seed_done(user="bob", text="ping")
    action = bot.seed_prod_write(user="bob", note="rotate keys")
    with serving(bot) as base:
        context = browser.new_context(**DESKTOP)
        page = context.new_page()
        page.goto(f"{base}/ui/login")
        shot(page, "login-desktop", request)
        log_in(page, base, "dave")
        assert page.locator("tr.task-row").count() == 3

        page.select_option("select[name=status]", "failed")
        page.click("#task-filters button[type=submit]")
        page.wait_for_url("**/ui/tasks?*status=failed*")
        rows = page.locator("tr.task-row")
        assert rows.count() == 1 and rows.first.get_attribute("data-status") == "failed"
        shot(page, "tasks-filtered-desktop", request)

        rows.first.locator("td.goal a").click()
        page.wait_for_url(f"{base}/ui/tasks/{failed}")
        assert page.locator("li.step[data-status=failed]").count() == 2  # the tool, then the model call
        step = page.locator('li.step[data-status=failed][data-step^="tool:"]')
        assert step.count() == 1
        assert step.locator("pre.input").is_visible()  # open by default: the failure is the point
        assert "disk full on /data" in step.locator("pre.input").inner_text()
        assert "upstream said no: disk full on /data" in step.locator("pre.step-error").inner_text()
        assert page.inner_text("#task-status") == "failed"
        shot(page, "task-failed-desktop", request)

        page.click("nav >> text=Pending")
        page.wait_for_url(f"{base}/ui/pending")
        card = page.locator(f"#pending-{action}")
        assert "rotate keys" in card.inner_text()
        shot(page, "pending-desktop", request)
        card.locator("button.approve").click()
        page.wait_for_url(f"{base}/ui/pending")
        assert f"Approved action {action}; it ran: Wrote the note rotate keys." in page.inner_text("#flash")
        assert page.locator(f"#pending-{action}").count() == 0
        shot(page, "pending-approved-desktop", request)
        scaled = seed_timeline(bot)
        page.goto(f"{base}/ui/tasks/{scaled}")
        widths = [
            float(w)
            for w in page.locator("rect.fill").evaluate_all("rs => rs.map(r => r.getAttribute('width'))")
        ]
        assert widths[2] > widths[1] > widths[0] > widths[3]  # 9.5 s > 4.0 s > 1.2 s > 0.4 s
        shot(page, "task-timeline-desktop", request)
        context.close()

    effects = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert [e["note"] for e in effects] == ["rotate keys"]
    assert bot.notes[-1] == ("wecom:bob", "Wrote the note rotate keys.")


def test_pages_fit_a_phone(ui_bot: MakeUiBot, browser: Any, request: pytest.FixtureRequest) -> None:
    bot = ui_bot(files=("xihe.yaml", "access.yaml", "alerts.yaml"))
    failed = bot.seed_failed(user="alice", reason="timeout talking to 10.0.0.13:5678 after 30 s")
    bot.seed_done(user="alice", text="a fairly long message to see how the goal column wraps on a phone")
    bot.seed_prod_write(user="bob", note="restart the ETL workers", confirm=False)
    scaled = seed_timeline(bot)
    with serving(bot) as base:
        context = browser.new_context(**PHONE)
        page = context.new_page()
        log_in(page, base, "carol")
        for name, path in (
            ("tasks", "/ui/tasks"),
            ("task-failed", f"/ui/tasks/{failed}"),
            ("task-timeline", f"/ui/tasks/{scaled}"),
            ("pending", "/ui/pending"),
            ("audit", "/ui/audit?kind=gate"),
            ("alerts", "/ui/alerts"),
        ):
            page.goto(base + path)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{path} scrolls sideways on a phone by {overflow}px"
            shot(page, f"{name}-phone", request)
        page.goto(f"{base}/ui/pending")
        assert page.locator("button.approve").is_visible()  # carol approves from her phone
        context.close()


def test_audit_search_paging_and_readable_chinese_in_a_browser(
    ui_bot: MakeUiBot, browser: Any, request: pytest.FixtureRequest
) -> None:
    from tests.ui.test_browse import numbers, seed_audit

    bot = ui_bot()
    seed_audit(bot, 47)
    with serving(bot) as base:
        context = browser.new_context(**DESKTOP)
        page = context.new_page()
        log_in(page, base, "dave")
        page.goto(f"{base}/ui/audit")
        assert "Times in Asia/Shanghai (+08:00)" in page.inner_text("#zone")
        page.fill("input[name=workflow]", "订单同步")
        page.click("#audit-filters button[type=submit]")
        page.wait_for_url("**/ui/audit?*workflow=*")
        table = page.inner_text("#audit")
        assert "订单同步" in table and "\\u" not in table
        assert sorted(numbers(table)) == [0, 7, 14, 21, 28, 35, 42]
        shot(page, "audit-workflow-desktop", request)

        page.goto(f"{base}/ui/audit?tool=echo")
        seen = numbers(page.inner_text("#audit"))
        while page.locator("#audit-older").count():
            page.click("#audit-older")
            page.wait_for_load_state()
            seen += numbers(page.inner_text("#audit"))
        assert seen == list(range(46, -1, -1))
        page.fill("input[name=q]", "number 3")
        page.click("#audit-filters button[type=submit]")
        page.wait_for_url("**/ui/audit?*q=number*")
        assert sorted(numbers(page.inner_text("#audit"))) == [3, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]
        context.close()
