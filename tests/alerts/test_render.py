"""Renderer: escaping per wecom-api §1.7, the 4,096-byte bound, the log tail, our own <@userid>."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import UndefinedError

from xihe.agent.alerts.render import Renderer, fit_bytes
from xihe.agent.wecom_markdown import block, checked_url


def ctx(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "mentions": ("zhangsan",),
        "tier": "P0",
        "followup": 0,
        "workflow_name": "order_sync",
        "project_name": "etl",
        "instance_id": 42,
        "environment": "prod",
        "task_list": [{"name": "load", "retry": 2, "max": 2}],
        "task_more": 0,
        "host_list": ["10.0.0.1:1234"],
        "failed_at": datetime(2026, 12, 2, 1, 5, tzinfo=UTC),
        "start": datetime(2026, 12, 2, 1, 0, tzinfo=UTC),
        "end": datetime(2026, 12, 2, 1, 5, tzinfo=UTC),
        "seconds": 300,
        "summary_error": "boom",
        "tail_log": "ok\nERROR: cause",
        "log_url": checked_url("http://ds.example/log/42"),
        "origin": None,
        "started_by_name": "",
        "approved_by_name": "",
        "next_summary": None,
        "maint_scope": "workflow:order_sync",
        "trace_url": checked_url("https://xihe.example/ui/runs/42"),
        "ds_url": checked_url("http://ds.example/ui/projects/7/workflow/instances/42"),
    }
    base.update(kw)
    return base


def nbytes(s: str) -> int:
    return len(s.encode("utf-8"))


def test_escapes_tags_backticks_and_line_start_controls():
    out = block("<font color=red>x</font>\n# head\n> q\n- item\n1. one\n```code```\n<@all>")
    assert "<" not in out and ">" not in out and "`" not in out
    assert out.splitlines()[1].startswith("＃") and out.splitlines()[3].startswith("－")
    assert out.splitlines()[4].startswith("1．")


def test_instance_message_has_the_fields_and_our_mention_intact():
    text = Renderer().render("instance.md.j2", ctx())
    assert text.startswith("<@zhangsan>")
    for needle in (
        "order_sync",
        "环境：prod",
        "42",
        "load（重试 2/2）",
        "10.0.0.1:1234",
        "boom",
        "> ERROR: cause",
        "失败时间：2026-12-02 09:05:00 +08:00",  # the team's zone, with its offset
        "[完整日志](http://ds.example/log/42)",
        "[运行详情](https://xihe.example/ui/runs/42)",
        "[DolphinScheduler 实例](http://ds.example/ui/projects/7/workflow/instances/42)",
        "/status 42",
        "/rerun 42",
        "/maint on 30m workflow:order_sync",
        "非 xihe 发起",
        "5m00s",
        "P0",
    ):
        assert needle in text


def test_values_cannot_inject_mentions_or_fonts():
    text = Renderer().render(
        "instance.md.j2",
        ctx(
            workflow_name="<@all>",
            summary_error='<font color="warning">',
            mentions=("bad id<script>", "ok_user"),
        ),
    )
    assert "<@all>" not in text and "<@bad" not in text and "<@ok_user>" in text
    assert text.count("<font") == 1  # only the tier colour we add


def test_bad_log_url_is_shown_as_text_not_a_link():
    text = Renderer().render("instance.md.j2", ctx(log_url="javascript:alert(1)"))
    assert "](javascript" not in text


def test_only_a_checked_url_becomes_a_link():
    text = Renderer().render("instance.md.j2", ctx(log_url="http://evil.example/log"))
    assert "](http://evil" not in text and "http://evil.example/log" in text


def test_missing_variable_fails_loudly():
    c = ctx()
    del c["workflow_name"]
    with pytest.raises(UndefinedError):
        Renderer().render("instance.md.j2", c)


def test_admin_override_directory_wins(tmp_path: Path):
    (tmp_path / "instance.md.j2").write_text(
        "custom {{ workflow_name }} {{ summary_error }}", encoding="utf-8"
    )
    assert Renderer(tmp_path).render("instance.md.j2", ctx(summary_error="<x>")) == "custom order_sync ＜x＞"


def test_long_log_keeps_its_last_500_characters():
    log = "HEAD-MARKER\n" + "\n".join(f"line {i} 中文日志" for i in range(2000)) + "\nTHE ROOT CAUSE"
    text = Renderer().render("instance.md.j2", ctx(tail_log=log))
    assert nbytes(text) <= 4096
    assert "THE ROOT CAUSE" in text and "HEAD-MARKER" not in text
    assert "line 1999 中文日志" in text


NASTY = [
    "中" * 5000,
    "😀" * 3000,
    "x" * 20000,
    ("<" * 100 + "`" * 100 + "\n# " * 100) * 10,
    "\x00\x07\r\n" * 2000,
    "A" * 4095 + "😀",
]


@pytest.mark.parametrize("nasty", NASTY, ids=range(len(NASTY)))
def test_nasty_inputs_stay_within_4096_bytes(nasty: str):
    r = Renderer()
    text = r.render(
        "instance.md.j2",
        ctx(
            workflow_name=nasty,
            summary_error=nasty,
            tail_log=nasty,
            task_list=[{"name": nasty, "retry": 1, "max": 1}] * 50,
            host_list=[nasty] * 10,
        ),
    )
    assert nbytes(text) <= 4096 and text.startswith("<@zhangsan>")
    text2 = r.render(
        "aggregate.md.j2",
        {
            "mentions": (),
            "tier": "P1",
            "folded": 3,
            "total": 4,
            "opened": None,
            "ends": None,
            "workflow_list": [{"name": nasty, "count": 1}] * 40,
            "instance_count": 40,
            "parts": 1,
            "instances": list(range(40)),
            "host_list": [nasty],
            "sample_name": nasty,
            "sample_task_name": nasty,
            "sample_error": nasty,
        },
    )
    assert nbytes(text2) <= 4096


@settings(max_examples=60, deadline=None)
@given(
    log=st.text(max_size=3000),
    err=st.text(max_size=2000),
    name=st.text(max_size=400),
    tasks=st.lists(st.text(max_size=200), max_size=30),
)
def test_property_any_text_fits_the_byte_limit(log: str, err: str, name: str, tasks: list[str]):
    text = Renderer().render(
        "instance.md.j2",
        ctx(
            tail_log=log,
            summary_error=err,
            workflow_name=name,
            task_list=[{"name": t, "retry": 0, "max": 0} for t in tasks],
        ),
    )
    assert nbytes(text) <= 4096
    assert text.startswith("<@zhangsan>")
    assert "<@" not in text[len("<@zhangsan>") :]  # no mention other than ours


def test_fit_bytes_never_splits_a_character_or_our_tag():
    s = "ab<@zhangsan>" + "中" * 10
    for limit in range(5, 40):
        out = fit_bytes(s, limit)
        assert nbytes(out) <= limit
        assert "<@" not in out or "<@zhangsan>" in out
