"""`xihe fakes up`: the loopback fakes on their own, and `xihe chat` against them, as a newcomer would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from xihe.integrations.fakes.rules_llm import respond

TOOLS = [{"type": "function", "function": {"name": n}} for n in ("trigger_dolphinscheduler", "search_code")]


def _user(text: str, tools: list[dict[str, Any]] = TOOLS) -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": text}],
        "tools": tools,
    }


@pytest.mark.parametrize(
    ("text", "tool", "args"),
    [
        (
            "把订单同步任务补跑一下昨天的",
            "trigger_dolphinscheduler",
            {"workflow": "订单同步", "dates": "昨天"},
        ),
        (
            "补数 order_sync 2026-12-01到2026-12-03",
            "trigger_dolphinscheduler",
            {"workflow": "order_sync", "dates": "2026-12-01到2026-12-03"},
        ),
        (
            "backfill order_sync for yesterday",
            "trigger_dolphinscheduler",
            {"workflow": "order_sync", "dates": "yesterday"},
        ),
        (
            "确认操作是在哪里绑定到用户的？",
            "search_code",
            {"query": "确认操作是在哪里绑定到用户的？", "k": 5},
        ),
    ],
)
def test_rules_turn_requests_into_one_tool_call(text: str, tool: str, args: dict[str, Any]) -> None:
    step = respond(_user(text))
    assert [name for name, _ in step.tool_calls] == [tool]
    assert json.loads(step.tool_calls[0][1]) == args


def test_rules_only_call_offered_tools_and_quote_results() -> None:
    assert respond(_user("把订单同步补跑一下昨天的", tools=[])).tool_calls == ()
    body = _user("在哪里？")
    body["messages"].append({"role": "tool", "content": "[Tool Result: search_code]\nagent/pending.py:10"})
    step = respond(body)
    assert step.tool_calls == () and "agent/pending.py:10" in step.content and "工具结果" in step.content
    assert "/help" in respond(_user("hello")).content


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def start_fakes(root: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "xihe.agent.cli.main", "fakes", "up", "--dir", str(root), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        seen.append(line)
        if "Ctrl-C stops the fakes" in line:
            return proc
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError("fakes up ended early:\n" + "".join(seen))


def stop_fakes(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return out


def chat(root: Path, lines: str, user: str = "alice") -> str:
    env = {**os.environ, **_env_file(root / "fakes.env")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "xihe.agent.cli.main",
            "chat",
            "--config",
            str(root / "config"),
            "--user",
            user,
        ],
        input=lines,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


def test_fakes_up_serves_a_backfill_from_chat(tmp_path: Path) -> None:
    root = tmp_path / "fakes"
    proc = start_fakes(root, "--task-seconds", "1")
    try:
        out = chat(root, "把订单同步任务补跑一下昨天的\n/confirm\n确认操作是在哪里绑定到用户的？\n")
    finally:
        assert "fakes down" in stop_fakes(proc)
    assert "在 test 启动 order_sync" in out  # the confirmation, from the real gate, in the message's language
    assert '"status": "started"' in out  # the simulator took the start
    assert "[Tool Result: search_code]" in out and '"hits"' in out  # the index was built at start-up
