"""`/ui/runs/ID`, the page every alert links to, says what failed (issue 27, item 1).

A real bot over the simulator: a run the bot started fails; the page shows its state in red, the
workflow and business date, the failed task with host and retries, the error, the log tail read
from DolphinScheduler, start/end in the team's zone, the task that started it apart from a task
that only ran `/status ID`, and the alert about it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.dolphin.support import Bot
from tests.ui.conftest import ENV_USERS, TOKENS, csrf_of, ui_yaml
from xihe.agent.timefmt import show
from xihe.agent.web.server import create_server
from xihe.integrations.dolphinscheduler.sim.model import SimInstance
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


@dataclass
class FailedRun:
    bot: Bot
    inst: SimInstance

    def server(self) -> Any:
        return create_server(self.bot.app, with_scheduler=False)

    def login(self, user: str) -> TestClient:
        c = TestClient(self.server(), base_url="http://testserver")
        page = c.get("/ui/login")
        form = {"csrf": csrf_of(page.text), "user": user, "token": TOKENS[user], "next": "/ui/tasks"}
        assert c.post("/ui/login", data=form, follow_redirects=False).status_code == 303
        return c


def failed_run(bot_for: Callable[..., Bot], llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> FailedRun:
    """alice backfills 坏任务 (it fails), then bob asks `/status` about it."""
    monkeypatch.setenv("XIHE_UI_SECRET", "test-secret-of-the-cookie-signer")
    for user in ENV_USERS:
        monkeypatch.setenv(f"XIHE_UI_TOKEN_{user.upper()}", TOKENS[user])
    llm.add(call("trigger_dolphinscheduler", workflow="坏任务", dates="2026-11-30"), say("started"))
    bot = bot_for("3.2", extra={"ui.yaml": ui_yaml()})
    bot.say("alice", "backfill 坏任务 for 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    bot.say("bob", f"/status {inst.id}")
    return FailedRun(bot, inst)


def test_run_page_says_what_failed(
    bot_for: Callable[..., Bot], llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = failed_run(bot_for, llm, monkeypatch)
    inst, deps = run.inst, run.bot.app.deps
    queried = [t for t in deps.tasks.with_run(inst.id) if t.owner == "bob"]
    assert queried, "the /status task is recorded with the run"
    page = run.login("dave").get(f"/ui/runs/{inst.id}").text
    assert '<span class="status s-failed" id="run-state">FAILURE</span>' in page  # red, not green
    assert "broken_sync" in page and "2026-11-30" in page
    failed = next(t for t in inst.tasks if t.state == "FAILURE" and t.flag == "YES")
    card = page.split('id="failed-1"')[1].split("</section>")[0]
    assert (
        failed.name in card
        and failed.host in card
        and f"{failed.retry_times}/{failed.max_retry_times}" in card
    )
    assert "SQLException" in card  # the error line and the log tail, read from DS
    assert f"{failed.end_time:%Y-%m-%d %H:%M:%S} +00:00" in card  # log times labelled with their zone
    zone = deps.settings.core.timezone
    assert show(inst.start_time, zone) in page and show(inst.end_time, zone) in page
    started = page.split('id="run-tasks">')[1].split("</dd>")[0]
    looked = page.split('id="run-queries">')[1].split("</dd>")[0]
    assert 'href="/ui/tasks/1"' in started and "s-failed" in started  # alice's task, its badge red
    assert all(f'href="/ui/tasks/{t.id}"' in looked for t in queried)
    assert all(f'href="/ui/tasks/{t.id}"' not in started for t in queried)


def test_run_page_pages_the_log_from_dolphinscheduler_on_demand(
    bot_for: Callable[..., Bot], llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = failed_run(bot_for, llm, monkeypatch)
    failed = next(t for t in run.inst.tasks if t.state == "FAILURE" and t.flag == "YES")
    # a long log, one line carrying markup: the page reads it from DS, encoded
    failed.log = [f"line {i}" for i in range(250)] + ["[ERROR] <script>x</script> SQLException & done"]
    dave = run.login("dave")
    base = f"/ui/runs/{run.inst.id}"

    def log_of(html: str) -> tuple[list[str], str]:
        card = html.split(f'id="log-{failed.id}"')[1].split("</details>")[0]
        pre = card.split('<pre class="log">')[1].split("</pre>")[0]
        return pre.split("\n"), card

    lines, card = log_of(dave.get(base).text)
    assert len(lines) == 60 and lines[0] == "line 191"  # the last 60 of 251
    assert lines[-1] == "[ERROR] &lt;script&gt;x&lt;/script&gt; SQLException &amp; done"  # encoded
    assert "Log tail: lines 192–251 of 251" in card
    earlier = f'href="{base}?task={failed.id}&amp;from=91&amp;lines=100#log-{failed.id}"'
    assert earlier in card and "log-later" not in card

    lines, card = log_of(dave.get(f"{base}?task={failed.id}&from=91").text)
    assert lines[0] == "line 91" and lines[-1] == "line 190" and len(lines) == 100  # one bounded page
    assert "Log lines 92–191 of 251" in card
    assert f"from=0&amp;lines=91#log-{failed.id}" in card  # earlier: up to this page, not into it
    assert f"from=191#log-{failed.id}" in card  # later
    assert f'class="log-last" href="{base}#log-{failed.id}"' in card
    first = dave.get(f"{base}?task={failed.id}&from=0").text  # the error line still from the log's end
    assert "SQLException" in first.split('class="error">')[1].split("</dd>")[0]

    lines, card = log_of(dave.get(f"{base}?task={failed.id}&from=191").text)
    assert len(lines) == 60 and "log-later" not in card  # the end reached: no later page
    past = dave.get(f"{base}?task={failed.id}&from=5000").text
    assert "the log ends before that" in past

    for query, name in (
        ("task=1&from=0", "task"),  # not a failed task of this run
        (f"task={failed.id}&from=-1", "from"),
        (f"task={failed.id}&from=99999999999", "from"),
        ("from=10", "from"),  # from without task
        (f"task={failed.id}&from=0&lines=101", "lines"),  # at most one page
    ):
        r = dave.get(f"{base}?{query}")
        assert r.status_code == 400 and f"{name}: " in r.text, query
