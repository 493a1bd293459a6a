"""The hostile corpus on the web pages: Jinja autoescape is the web's encoder, checked on what a browser gets.

A task whose goal and error are hostile strings is listed and opened; the HTML a browser receives may
hold no tag, attribute or link that came from them, and still shows their words.
"""

from __future__ import annotations

from tests.encode.corpus import HOSTILE, readable
from tests.encode.html_page import parsed
from tests.ui.conftest import MakeUiBot, ui_bot  # noqa: F401  (the fixture)
from xihe.agent.tasks import TaskStatus


def test_hostile_goals_and_errors_reach_the_browser_as_text(ui_bot: MakeUiBot) -> None:  # noqa: F811
    bot = ui_bot()
    deps = bot.app.deps
    ids = []
    for _id, hostile, _words in HOSTILE:
        text = hostile.replace("\x00", "")  # PostgreSQL refuses NUL in text columns (noticed, not ours here)
        task = deps.tasks.create(kind="chat", owner="alice", conversation="c", goal=text, now=bot.clock())
        deps.tasks.update(task.id, bot.clock(), status=TaskStatus.FAILED, error=text)
        ids.append(task.id)
    c = bot.login("dave")
    baseline = parsed(c.get(f"/ui/tasks/{ids[0]}").text)
    allowed = {tag for tag, _a in baseline.tags}
    for task_id, (_id, text, words) in zip(ids, HOSTILE, strict=True):
        page = parsed(c.get(f"/ui/tasks/{task_id}").text)
        assert {tag for tag, _a in page.tags} <= allowed  # no <script>, <img>, <font> from the goal
        assert not any("evil" in str(v) for _t, attrs in page.tags for v in attrs.values())
        assert not any(k.startswith("on") for _t, attrs in page.tags for k in attrs)
        shown = readable("".join(page.text))
        assert all(readable(w) in shown for w in words if len(text) < 80), (text, shown[:2000])
    listing = parsed(c.get("/ui/tasks").text)
    assert {tag for tag, _a in listing.tags}.isdisjoint({"img", "font", "script"} - allowed)
    assert not any("evil" in str(v) for _t, attrs in listing.tags for v in attrs.values())
