"""The loopback world of `xihe demo` and `xihe fakes up`: the fakes, their seed data, and a config for them.

Four fakes stand in for the outside services: a model server (the real `openai` client talks to it),
the DolphinScheduler simulator, a WeCom robot sink and an SMTP sink. `write_config` writes a complete
config directory pointing at them; `point_config_at` rewrites only the addresses, so a kept demo
directory can be served by fakes started again later on other ports. The simulator keeps its next
instance and task ids in the directory (`SIM_STATE`), so runs started later never reuse an id the
kept store already knows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from xihe.agent.clock import FakeClock
from xihe.agent.errors import BotError
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.integrations.fakes.smtp_sink import SmtpSink
from xihe.integrations.wecom.robot_sink import RobotSink

ROBOT_KEY = "demo-robot-key-0000000000"
ROBOT_KEY_PROD = "demo-robot-key-prod-00000"
WEB_URL = "http://127.0.0.1:8080"  # `xihe serve`'s default address
# web UI logins of the demo users (ui.yaml names these variables); loopback-only demo values
UI_LOGINS = {
    "XIHE_UI_TOKEN_DAVE": "demo-ui-dave",
    "XIHE_UI_TOKEN_CAROL": "demo-ui-carol",
    "XIHE_UI_SECRET": "demo-ui-cookie-signing-secret",  # every replica signs the same way
}
SIM_STATE = "dolphin-sim.json"  # the simulator's next ids, beside a kept config
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # agent/, tools/, integrations/, config/


@dataclass
class Fakes:
    """The running fakes."""

    llm: ScriptedLLM
    sim: DolphinSimulator
    robot: RobotSink
    smtp: SmtpSink

    state: Path | None = None  # where the simulator's next ids are kept
    saved: tuple[int, int] | None = None  # the ids last written there

    def env(self) -> dict[str, str]:
        """The secrets the config names (`*_env`) as the fakes expect them, and the web UI logins."""
        return {
            "XIHE_DS_TOKEN": self.sim.token,
            "XIHE_ROBOT_KEY": ROBOT_KEY,
            "XIHE_ROBOT_KEY_PROD": ROBOT_KEY_PROD,
            **UI_LOGINS,
        }

    def received(self, seen: dict[str, int]) -> list[str]:
        """What the robot and SMTP sinks accepted since `seen` (counts per robot key and of mails,
        updated), readable."""
        out = []
        for key, messages in list(self.robot.messages.items()):
            for m in messages[seen.get(key, 0) :]:
                out.append(f"[WeCom robot {robot_label(key)}]\n" + textwrap.indent(m.content, "  "))
            seen[key] = len(messages)
        mails = self.smtp.mails
        for mail in mails[seen.get("smtp", 0) :]:
            head = f"[e-mail to {', '.join(mail.rcpt_to)}] {mail.subject}"
            out.append(head + "\n" + textwrap.indent(mail.body, "  "))
        seen["smtp"] = len(mails)
        return out

    def save_state(self) -> None:
        """Write the simulator's next ids to `state` (when one is kept)."""
        ids = (self.sim.next_instance_id, self.sim.next_task_id)
        if self.state is not None and ids != self.saved:
            names = {"next_instance_id": ids[0], "next_task_id": ids[1]}
            self.state.write_text(json.dumps(names) + "\n", encoding="utf-8")
            self.saved = ids


def robot_label(key: str) -> str:
    """The alert channel a fake robot key belongs to (the key itself is a secret in a real config)."""
    return {ROBOT_KEY_PROD: "prod", ROBOT_KEY: "default"}.get(key, "other")


def _first_ids(state: Path | None) -> tuple[int, int]:
    if state is None or not state.exists():
        return 101, 5001
    try:
        ids = json.loads(state.read_text(encoding="utf-8"))
        return int(ids["next_instance_id"]), int(ids["next_task_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BotError(f"{state}: not the simulator's state ({exc}); delete it to start at id 101") from None


@contextmanager
def running_fakes(
    clock: FakeClock,
    llm: ScriptedLLM,
    *,
    task_seconds: int = 60,
    fail_retries: int = 1,
    state: Path | None = None,
) -> Iterator[Fakes]:
    """Start the simulator, robot and SMTP sinks around an already built model server.

    With `state`, the simulator's ids go on from those saved there, and are saved again at the end.
    """
    with ExitStack() as stack:
        stack.enter_context(llm)
        sim = DolphinSimulator(
            seed(task_seconds, fail_retries), version="3.2", clock=clock, first_ids=_first_ids(state)
        )
        stack.enter_context(sim)
        robot = stack.enter_context(RobotSink(keys={ROBOT_KEY, ROBOT_KEY_PROD}, clock=clock))
        smtp = stack.enter_context(SmtpSink())
        fakes = Fakes(llm, sim, robot, smtp, state)
        stack.callback(fakes.save_state)
        yield fakes


def seed(task_seconds: int = 60, fail_retries: int = 1) -> list[SimProject]:
    """Two workflows: order_sync (test, succeeds) and payment_reconcile (prod, core, fails on its DB
    after `fail_retries` retries a minute apart)."""
    return [
        SimProject(
            "etl",
            1000000000001,
            [
                SimDefinition(
                    "order_sync",
                    2000000000001,
                    tasks=("extract", "transform", "load"),
                    scenario=Scenario(task_seconds=task_seconds),
                ),
                SimDefinition(
                    "payment_reconcile",
                    2000000000002,
                    tasks=("pull", "match", "report"),
                    scenario=Scenario(
                        kind="fail",
                        max_retry_times=fail_retries,
                        task_seconds=task_seconds,
                        host="10.0.0.13:1234",
                        # the error carries a link (as anyone who can make a task print a line could):
                        # the alert and the chat show it as text (issue 26)
                        error="java.sql.SQLException: Connection refused (pay_db:3306) "
                        "[点此处理](http://evil.example/phish)",
                    ),
                ),
            ],
        )
    ]


def source_repo(root: Path) -> Path:
    """A small git repository of xihe's own source, to ask questions about."""
    repo = root / "xihe-src"
    for part in ("agent", "tools", "integrations"):
        shutil.copytree(
            PACKAGE_ROOT / part,
            repo / part,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "templates", "static"),
        )
    commit_all(repo)
    return repo


def commit_all(repo: Path) -> None:
    """Make `repo` a git repository with everything in one commit (when git is installed)."""
    if shutil.which("git"):
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "demo",
            "GIT_AUTHOR_EMAIL": "demo@example.com",
            "GIT_COMMITTER_NAME": "demo",
            "GIT_COMMITTER_EMAIL": "demo@example.com",
        }
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "demo"]):
            subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True)


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _dump(path: Path, data: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def point_config_at(cfg: Path, fakes: Fakes) -> None:
    """Rewrite the fakes' addresses in an existing config directory (nothing else changes)."""
    core = _load(cfg / "xihe.yaml")
    core["llm"].update({"base_url": fakes.llm.base_url, "model": fakes.llm.model})
    _dump(cfg / "xihe.yaml", core)
    dolphin = _load(cfg / "dolphin.yaml")
    dolphin.update({"base_url": fakes.sim.url, "version": fakes.sim.version})
    _dump(cfg / "dolphin.yaml", dolphin)
    alerts = _load(cfg / "alerts.yaml")
    alerts["delivery"]["robot_base_url"] = fakes.robot.url
    alerts["smtp"].update({"host": fakes.smtp.host, "port": fakes.smtp.port})
    _dump(cfg / "alerts.yaml", alerts)


def write_config(cfg: Path, fakes: Fakes, *, db: str, repo: Path, index_dir: Path) -> None:
    """A whole config directory for the fakes: shipped files, adjusted, plus the demo's workflows and shell."""
    cfg.mkdir(parents=True)
    shipped = PACKAGE_ROOT / "config"
    shutil.copy(shipped / "access.yaml", cfg / "access.yaml")
    shutil.copy(shipped / "ui.yaml", cfg / "ui.yaml")
    core = _load(shipped / "xihe.yaml")
    core["llm"]["max_wait_seconds"] = 0
    core["store"]["url"] = db
    core["language"] = "zh"  # the demo's team writes Chinese; an approver's bare /approve is answered so
    _dump(cfg / "xihe.yaml", core)
    _dump(cfg / "workflows.yaml", WORKFLOWS)
    _dump(cfg / "oncall.yaml", ONCALL)
    dolphin = _load(shipped / "dolphin.yaml")
    dolphin["retries"] = 0
    _dump(cfg / "dolphin.yaml", dolphin)
    alerts = _load(shipped / "alerts.yaml")
    # alerts link each run's page on the web UI `xihe serve` starts (its default port, loopback)
    alerts.update({"maintenance": [], "instance_wait_seconds": 10, "public_base_url": WEB_URL})
    alerts["delivery"]["tries_per_run"] = 1
    alerts["smtp"]["starttls"] = False
    # an unanswered P0 pages the next step of its chain every 30 minutes (the last scene shows it)
    alerts["lifecycle"]["tiers"]["P0"]["escalate_after"] = 30
    _dump(cfg / "alerts.yaml", alerts)
    code = _load(shipped / "code.yaml")
    code.update({"repos": [str(repo)], "index_dir": str(index_dir)})
    _dump(cfg / "code.yaml", code)
    _dump(cfg / "shell.yaml", shell_config(repo))
    point_config_at(cfg, fakes)


WORKFLOWS: dict[str, Any] = {
    "timezone": "Asia/Shanghai",
    "workflows": [
        {
            "name": "order_sync",
            "project": "etl",
            "aliases": ["订单同步"],
            "environment": "test",
            "owner": "alice",
        },
        {
            "name": "payment_reconcile",
            "project": "etl",
            "aliases": ["支付对账"],
            "environment": "prod",
            "core": True,
            "owner": "bob",
            "team": "payments",
            "oncall": ["bob"],
            "channel": "prod",
        },
    ],
}


# payment_reconcile's team: bob is always the primary (so the P0 scene pages him), carol his backup
ONCALL: dict[str, Any] = {
    "timezone": "Asia/Shanghai",
    "rotations": {
        "payments": {
            "members": ["bob"],
            "every": "weekly",
            "handoff": "10:00",
            "start": "2026-11-30",
            "secondary": ["carol"],
        }
    },
}


def shell_config(repo: Path) -> dict[str, Any]:
    """Two read-only entries over the demo repository, sandboxed by bubblewrap when it is installed."""
    return {
        "sandbox": "bwrap" if shutil.which("bwrap") else "none",
        "workspaces": {"repo": str(repo)},
        "entries": [
            {
                "name": "ls",
                "description": "List a directory of the repository.",
                "workspace": "repo",
                "argv": ["ls", "{path}"],
                "risk": "read",
                "roles": ["developer", "operator", "admin"],
                "args": {
                    "path": {"type": "path", "description": "directory relative to the repository root"}
                },
            },
            {
                "name": "git_log",
                "description": "Recent commits that touched a path.",
                "workspace": "repo",
                "argv": ["git", "log", "--oneline", "-n", "{count}", "--", "{path}"],
                "risk": "read",
                # the sandbox runs as nobody; the checkout belongs to the demo user
                "env": {
                    "GIT_CONFIG_COUNT": "1",
                    "GIT_CONFIG_KEY_0": "safe.directory",
                    "GIT_CONFIG_VALUE_0": "*",
                },
                "roles": ["developer", "operator", "admin"],
                "args": {
                    "count": {"type": "integer", "min": 1, "max": 50, "description": "how many commits"},
                    "path": {"type": "path", "description": "file or directory"},
                },
            },
        ],
    }


def write_env_file(path: Path, env: dict[str, str]) -> None:
    """`NAME=value` lines for `set -a; . FILE; set +a` (the fakes' own test secrets, not real ones)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(env.items())), encoding="utf-8")
    path.chmod(0o600)
