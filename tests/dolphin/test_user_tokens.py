"""Who asked: every write names its requester to DolphinScheduler, and runs under the engineer's own
token when dolphin.yaml names one for them (env pattern or an owner-only file), else the bot token."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.dolphin.support import make_bot
from xihe.agent.cli.main import main
from xihe.agent.clock import FakeClock
from xihe.agent.errors import ConfigError
from xihe.config.dolphin import load_dolphin, user_tokens
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator

ALICE_TOKEN = "alice-own-token-7f3c9a"


def _with_user_tokens(cfg: Path, user_tokens: dict[str, str]) -> None:
    path = cfg / "dolphin.yaml"
    data = yaml.safe_load(path.read_text())
    data["user_tokens"] = user_tokens
    path.write_text(yaml.safe_dump(data))


def test_alices_start_uses_her_token_and_bobs_the_bot_token(
    tmp_path: Path,
    clock: FakeClock,
    make_sim: Callable[..., DolphinSimulator],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = make_sim("3.2", clock=clock)
    sim.tokens[ALICE_TOKEN] = clock() + (sim.tokens[sim.token] - clock())
    monkeypatch.setenv("XIHE_DS_TOKEN", sim.token)
    monkeypatch.setenv("XIHE_DS_TOKEN_ALICE", ALICE_TOKEN)
    bot = make_bot(tmp_path / "cfg", sim, clock, f"sqlite:///{tmp_path / 'x.db'}",
                   extra={"dolphin.yaml": {"base_url": sim.url, "version": "3.2", "token_env": "XIHE_DS_TOKEN",
                                           "retries": 0, "user_tokens": {"env_pattern": "XIHE_DS_TOKEN_{user}"}}})  # fmt: skip
    bot.say("alice", "/run daily_backfill")
    reply = bot.say("alice", "/confirm")
    assert "Started" in reply and ALICE_TOKEN not in reply
    bot.say("bob", "/run daily_backfill")
    bot.say("bob", "/confirm")
    starts = [token for path, token in sim.writes if "start-process-instance" in path]
    assert starts == [ALICE_TOKEN, sim.token]
    asked = [json.loads(s["startParams"])["xihe_requested_by"] for s in sim.starts]
    assert asked == ["alice", "bob"]  # DS keeps it with the run (commandParam / globalParams)
    audit = bot.app.deps.audit.search(tool="trigger_dolphinscheduler")
    assert {e["actor"] for e in audit} >= {"alice", "bob"}
    assert ALICE_TOKEN not in json.dumps(audit, default=str)


def test_a_token_file_must_be_owner_only_and_its_errors_name_no_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(f"alice: {ALICE_TOKEN}\n")
    os.chmod(path, 0o644)
    cfg = load_dolphin(f"base_url: http://ds/dolphinscheduler\nuser_tokens: {{file: {path}}}\n")
    with pytest.raises(ConfigError) as err:
        user_tokens(cfg, ["alice", "bob"], {})
    assert (
        "mode 0644" in str(err.value) and "chmod 600" in str(err.value) and ALICE_TOKEN not in str(err.value)
    )
    os.chmod(path, 0o600)
    assert user_tokens(cfg, ["alice", "bob"], {}) == {"alice": ALICE_TOKEN}


def test_config_check_says_which_users_have_their_own_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    make_sim: Callable[..., DolphinSimulator],
) -> None:  # fmt: skip
    from tests.dolphin.support import write_ds_config

    cfg = write_ds_config(tmp_path / "cfg", make_sim("3.3"))
    _with_user_tokens(cfg, {"env_pattern": "XIHE_DS_TOKEN_{user}"})
    monkeypatch.setenv("XIHE_DS_TOKEN_ALICE", ALICE_TOKEN)
    assert main(["config", "check", "--offline", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "NOTE dolphin.yaml: users with their own DolphinScheduler token: alice" in out
    assert "use the bot's credentials: bob, carol, dave" in out and ALICE_TOKEN not in out
