"""`xihe demo` is the shop window: it must keep working, end to end, on the loopback fakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.cli.test_fakes import chat, start_fakes, stop_fakes
from tests.conftest import REPO


def test_demo_plays_every_scene_and_keeps_its_world(tmp_path: Path) -> None:
    kept = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "xihe.agent.cli.main", "demo", "--keep", str(kept)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "agent/pending.py" in out  # a cited path that exists
    # backfill followed to the end, told in the conversation's language
    assert 'complementStartDate":"20' in out and "，已结束：成功" in out
    assert "正在等待审批" in out and "，已结束：失败" in out and "<@bob>" in out  # P0 alert
    # the P0 alert links the run page, and that page says what failed (state, task, error line)
    assert "[运行详情](http://127.0.0.1:8080/ui/runs/" in out
    assert "] state FAILURE" in out and "failed task report on 10.0.0.13:1234:" in out
    assert "Connection refused (pay_db:3306)" in out.split("] state FAILURE", 1)[1].split("===", 1)[0]
    # the link in DolphinScheduler's error reaches the robot and the chat as text, never as a link
    # (only the run page's facts, printed as plain text for an HTML page that escapes them, keep it as is)
    raw = [line for line in out.splitlines() if "[点此处理](" in line]
    assert "［点此处理］(http://evil.example/phish)" in out
    assert raw and all(line.lstrip().startswith("failed task report") for line in raw), raw
    # alice writes Chinese: the shell's result and refusals are told in Chinese
    assert "［沙箱：bwrap］" in out and "（路径穿越）" in out and "'rm' 不是白名单里的程序" in out
    assert "错误：进程在这一步中途停止" in out and "task 5 done" in out  # /task 5 in alice's language
    assert "tool:1:0 #1 完成 run_shell_command" in out and "tool:1:0 #2" not in out  # not redone
    assert "Traceback" not in out + result.stderr
    # the audit found by the name the admin knows; who may start a production run, as the gate decides
    assert "$ xihe audit search --workflow payment_reconcile   # 2 events, typed as 支付对账" in out
    assert "谁能使用 `trigger_dolphinscheduler`（prod）（按门禁的判定）：" in out
    assert "🟠 bob（operator）：发起人 /confirm，并由 carol 或 dave /approve 之后" in out
    # the web pages: guesses lock the login, a logout ends the session on another replica too
    assert "8 guessed tokens from 203.0.113.9 → [401, 401, 401, 401, 401, 429, 429, 429]" in out
    assert "dave's real token → 429" in out and "on another replica → 200; after POST /ui/logout → 303" in out

    # --keep: the demo's store and config stay; the fakes come back on new ports and chat goes on there
    assert f"xihe fakes up --dir {kept}" in out
    assert {"config", "xihe.db", "fakes.env", "index"} <= {p.name for p in kept.iterdir()}
    old_url = yaml.safe_load((kept / "config" / "xihe.yaml").read_text())["llm"]["base_url"]
    proc = start_fakes(kept)
    try:
        assert yaml.safe_load((kept / "config" / "xihe.yaml").read_text())["llm"]["base_url"] != old_url
        tasks = chat(kept, "/tasks\n")
    finally:
        stop_fakes(proc)
    assert "#2" in tasks and "把订单同步任务补跑一下昨天的" in tasks, (
        tasks
    )  # alice's demo backfill, in the kept store
