"""`xihe chat` follows what it starts, and each terminal hears only its own conversation.

Three `xihe chat` processes share one SQLite store and the real loopback fakes (the rule-following
model, the DolphinScheduler 3.2 simulator, the robot sink): alice backfills order_sync; bob starts a
production run that carol approves from her own terminal. No `xihe serve` runs. Every chat runs the
poll job; the watch leases make exactly one of them report each outcome, and the store's mail takes
each message to the terminal of the conversation that asked, whichever process made it.

On the old code no chat polled (nobody followed a run without `xihe serve`), and a message for
another conversation was printed by whichever process made it (bob's start in carol's terminal).
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from tests.cli.terminals import Terminal
from xihe.agent.clock import FakeClock, utc_now
from xihe.agent.demo.environment import ROBOT_KEY_PROD, WEB_URL, running_fakes, write_config
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.integrations.fakes.rules_llm import respond

SIM_SPEED = 20  # simulated seconds per second of waiting: the failing run retries a minute later


def test_each_terminal_hears_only_its_own_followups(tmp_path: Path) -> None:
    clock = FakeClock(utc_now())
    llm = ScriptedLLM(model="fake-rules", responder=respond)
    with running_fakes(clock, llm, task_seconds=2) as fakes:
        cfg = tmp_path / "config"
        repo = tmp_path / "repo"
        repo.mkdir()
        write_config(cfg, fakes, db=f"sqlite:///{tmp_path / 'xihe.db'}", repo=repo, index_dir=tmp_path / "i")
        dolphin = yaml.safe_load((cfg / "dolphin.yaml").read_text())
        dolphin["poll"].update({"interval_seconds": 1, "max_interval_seconds": 2})
        (cfg / "dolphin.yaml").write_text(yaml.safe_dump(dolphin))

        def tick() -> None:  # the simulator runs ahead of the chats' real clock, never behind it
            behind = (utc_now() - clock()).total_seconds()
            fakes.sim.advance(max(behind, SIM_SPEED * 0.1))

        env = fakes.env()
        alice, bob, carol = (Terminal(cfg, user, env) for user in ("alice", "bob", "carol"))
        try:
            alice.type("把订单同步任务补跑一下昨天的")
            alice.wait_for("`/confirm ", tick=tick)
            alice.type("/confirm")
            bob.ask_approval("/run 支付对账 2026-12-01", carol)
            carol.wait_for("已批准操作")
            alice.wait_for("✅ order_sync 实例", tick=tick)
            failed = bob.lines[bob.wait_for("❌ payment_reconcile 实例", tick=tick)]
            run = failed.split("实例 ")[1].split("（")[0]
            deadline = time.monotonic() + 60
            while not fakes.robot.messages.get(ROBOT_KEY_PROD) and time.monotonic() < deadline:
                tick()
                time.sleep(0.1)
            alerts = [m.content for m in fakes.robot.messages.get(ROBOT_KEY_PROD, [])]
        finally:
            screens = {t.user: t.close() for t in (alice, bob, carol)}

    # bob hears his run start (after carol's approval) and end, in his own terminal
    assert "[xihe → cli:bob] 已启动 **payment_reconcile**" in screens["bob"]
    assert "order_sync" not in screens["bob"]
    # carol hears her approval's answer, and nothing addressed to bob or alice
    assert screens["carol"].count("已启动 **payment_reconcile**") == 1  # inside her own reply:
    assert "已批准操作" in screens["carol"]
    assert "❌ payment_reconcile" not in screens["carol"] and "order_sync" not in screens["carol"]
    assert "payment_reconcile" not in screens["alice"]
    # the P0 alert the run raised went out from a chat process, once, linking the run's page
    assert len(alerts) == 1 and "<@bob>" in alerts[0], alerts
    assert f"{WEB_URL}/ui/runs/{run}" in alerts[0]
    # three processes polled; each outcome was reported once
    everything = "\n".join(screens.values())
    assert everything.count("✅ order_sync 实例") == 1 and everything.count("❌ payment_reconcile 实例") == 1
    assert "Traceback" not in everything
