"""Real `xihe serve` processes for tests: a config directory wired to the fakes, start, wait, stop, kill.

Each replica is `python -m xihe.agent.cli.main --config DIR serve --port P` with its own environment; the test
process hosts the fakes (scripted LLM, WeCom) and talks to the replicas over HTTP like WeCom would.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.child_env import pythonpath
from tests.conftest import REPO, write_config
from xihe.agent.clock import utc_now
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom

CORP_ID = "ww1436e0e65a779aee"
TOKEN = "hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo"
AES_KEY = "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt"
BOT_TOKEN = "QDG6eK"
BOT_AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
SECRET = "app-secret-value-0123"
AGENT_ID = 1000002

WECOM_ENV = {
    "XIHE_WECOM_CORP_ID": CORP_ID,
    "XIHE_WECOM_TOKEN": TOKEN,
    "XIHE_WECOM_AES_KEY": AES_KEY,
    "XIHE_WECOM_APP_SECRET": SECRET,
    "XIHE_WECOM_AIBOT_TOKEN": BOT_TOKEN,
    "XIHE_WECOM_AIBOT_AES_KEY": BOT_AES_KEY,
}


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_config(
    directory: Path,
    fake: FakeWeCom,
    *,
    llm_url: str = "",
    lease_seconds: int = 120,
    wecom: dict[str, Any] | None = None,
    ops: dict[str, Any] | None = None,
) -> Path:
    """xihe.yaml + access.yaml + wecom.yaml (app API and AI bot at the fake) + ops.yaml."""
    write_config(directory, llm_url=llm_url, overrides={"store": {"lease_seconds": lease_seconds}})
    cfg = yaml.safe_load((REPO / "config" / "wecom.yaml").read_text())
    cfg.update(api_base=fake.url, agent_id=AGENT_ID, progress_interval_seconds=0, workers=4)
    cfg.update(
        user_messages_per_minute=100000
    )  # test traffic comes from few users; the limit has its own test
    cfg["aibot"].update(
        enabled=True, ack_text="收到", response_url_prefix=fake.url + "/cgi-bin/aibot/response"
    )
    cfg.update(wecom or {})
    (directory / "wecom.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    ops_cfg = yaml.safe_load((REPO / "config" / "ops.yaml").read_text())
    ops_cfg["config_reload"]["interval_seconds"] = 1
    for key, value in (ops or {}).items():
        ops_cfg[key].update(value)
    (directory / "ops.yaml").write_text(yaml.safe_dump(ops_cfg))
    return directory


class Replica:
    """One `xihe serve` subprocess."""

    def __init__(
        self, config: Path, db_url: str, workdir: Path, name: str, env: dict[str, str] | None = None
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        full_env = {
            **os.environ,
            **WECOM_ENV,
            "XIHE_DATABASE_URL": db_url,
            "PYTHONPATH": pythonpath(),
            **(env or {}),
        }
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "xihe.agent.cli.main",
                "--config",
                str(config),
                "serve",
                "--port",
                str(self.port),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=workdir,
        )
        self.http = requests.Session()

    def wait_ready(self, timeout: float = 60) -> Replica:
        """Until /healthz answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"xihe serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                if self.http.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise AssertionError(f"xihe serve did not start:\n{self.log()}")

    def log(self) -> str:
        """What the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample in /metrics (0 when absent)."""
        text = self.http.get(self.url + "/metrics", timeout=10).text
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
            if m and m.group(1) == name:
                got = ",".join(sorted((m.group(2) or "").split(","))) if m.group(2) else ""
                if got == want:
                    return float(m.group(3))
        return 0.0

    def app_sender(self) -> CallbackSender:
        """Plays WeCom's self-built app callbacks at this replica (real clock: the server checks it)."""
        return CallbackSender(self.url, TOKEN, AES_KEY, CORP_ID, utc_now)

    def bot_sender(self) -> CallbackSender:
        """Plays the AI bot's callbacks at this replica."""
        return CallbackSender(self.url, BOT_TOKEN, BOT_AES_KEY, "", utc_now)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait (graceful shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        self._log.close()
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()


def wait_until(check: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy (processes synchronise; no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
