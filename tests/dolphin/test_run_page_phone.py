"""The run page at phone width (390 px) in headless Chromium: no sideways scrolling, the state red."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.dolphin.support import Bot
from tests.dolphin.test_run_page import failed_run
from tests.ui.test_browser import PHONE, browser, log_in, serving, shot  # noqa: F401  (browser: fixture)
from xihe.integrations.fakes.llm_server import ScriptedLLM


def test_run_page_reads_on_a_phone(
    bot_for: Callable[..., Bot],
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    browser: Any,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    run = failed_run(bot_for, llm, monkeypatch)
    failed = next(t for t in run.inst.tasks if t.state == "FAILURE" and t.flag == "YES")
    failed.log = [f"[INFO] step {i} of a long log " + "x" * 80 for i in range(150)] + ["[ERROR] SQLException"]
    with serving(run) as base:  # type: ignore[arg-type]
        context = browser.new_context(**PHONE)
        page = context.new_page()
        log_in(page, base, "carol")
        page.goto(f"{base}/ui/runs/{run.inst.id}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the run page scrolls sideways on a phone by {overflow}px"
        color = page.locator("#run-state").evaluate("e => getComputedStyle(e).color")
        assert color == "rgb(198, 40, 40)"  # --bad
        assert page.locator(".failed-task pre.log").is_visible()
        shot(page, "run-phone", request)
        # earlier lines on demand: a tap reads the page before the tail from DolphinScheduler
        tail = page.locator(".failed-task pre.log").inner_text().splitlines()
        page.locator(".failed-task a.log-earlier").first.click()
        page.wait_for_url("**from=*")
        earlier = page.locator(".failed-task pre.log").inner_text().splitlines()
        assert earlier[0].startswith("[INFO] step 0 ") and earlier[-1].startswith("[INFO] step 90 ")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the paged log scrolls the page sideways by {overflow}px"
        page.locator(".failed-task a.log-last").first.click()
        page.wait_for_url(f"**/ui/runs/{run.inst.id}#log-*")
        assert page.locator(".failed-task pre.log").inner_text().splitlines() == tail
        context.close()
