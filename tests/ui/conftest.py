"""A bot with ui.yaml on the scripted LLM, an HTTP client per user, and seeded tasks to look at."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.agent.web.server import create_server
from xihe.config.ui import is_loopback
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step, call, fail, say

TOKENS = {
    "dave": "dave-token-7f3a",  # admin + approver, token from an env var
    "carol": "carol-token-91bc",  # approver + viewer, token as sha256 in the YAML
    "alice": "alice-token-22de",  # developer: read-only here
    "bob": "bob-token-5e10",  # operator: read-only here
}
ENV_USERS = ("dave", "bob")


def ui_yaml() -> dict[str, Any]:
    users: dict[str, Any] = {}
    for user, token in TOKENS.items():
        if user in ENV_USERS:
            users[user] = {"token_env": f"XIHE_UI_TOKEN_{user.upper()}"}
        else:
            users[user] = {"token_sha256": hashlib.sha256(token.encode()).hexdigest()}
    return {"session_secret_env": "XIHE_UI_SECRET", "session_hours": 12, "page_size": 20, "users": users}


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@dataclass
class UiBot:
    """One bot process plus helpers to talk to it in chat and over HTTP."""

    app: App
    config_dir: Path
    db_url: str
    clock: FakeClock
    llm: ScriptedLLM
    notes: list[tuple[str, str]] = field(default_factory=list)

    def server(self) -> Any:
        return create_server(self.app, with_scheduler=False)

    def client(self, address: str = "testclient") -> TestClient:
        """A browser at `address`; over HTTPS when the cookies are Secure (a jar keeps them off HTTP)."""
        scheme = "http" if is_loopback(self.app.deps.listen) else "https"
        return TestClient(self.server(), base_url=f"{scheme}://testserver", client=(address, 50000))

    def login(self, user: str, token: str | None = None, address: str = "testclient") -> TestClient:
        c = self.client(address)
        page = c.get("/ui/login")
        r = c.post(
            "/ui/login",
            data={
                "csrf": csrf_of(page.text),
                "user": user,
                "token": token or TOKENS[user],
                "next": "/ui/tasks",
            },
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        return c

    def remove_user(self, user: str) -> str:
        """Take `user` out of access.yaml (and ui.yaml, which may only name access.yaml's users), then
        run the config reload job once; its outcome."""
        from xihe.agent.ops import feature as ops

        for name in ("access.yaml", "ui.yaml"):
            path = self.config_dir / name
            data = yaml.safe_load(path.read_text())
            del data["users"][user]
            path.write_text(yaml.safe_dump(data))
        return ops.reload_config(self.app)

    def ask(self, user: str, text: str, conv: str | None = None) -> str:
        return self.app.session.handle(Inbound(user, conv or f"wecom:{user}", text, "wecom"))

    # ---- seeds (each consumes its own scripted LLM steps, in order)
    def seed_failed(self, user: str = "alice", reason: str = "disk full on /data") -> int:
        """A failed task: its tool step failed, then the model endpoint refused (HTTP 400)."""
        self.llm.add(call("always_fail", reason=reason), fail(400))
        self.ask(user, "backfill order_sync for 2026-12-01")
        return max(t.id for t in self.app.deps.tasks.recent(owner=user, limit=5))

    def seed_done(self, user: str = "alice", text: str = "hello") -> int:
        self.llm.add(call("echo", text=text), say(f"echoed {text}"))
        self.ask(user, f"echo {text}")
        return max(t.id for t in self.app.deps.tasks.recent(owner=user, limit=5))

    def seed_prod_write(self, user: str = "bob", note: str = "rotate keys", confirm: bool = True) -> int:
        """A production write waiting for an approver (confirmed by its requester); returns the action id."""
        self.llm.add(call("write_note", note=note, environment="prod"), say(f"Wrote the note {note}."))
        reply = self.ask(user, f"write the note {note} on prod")
        action_id = int(re.search(r"/confirm (\d+)", reply).group(1))  # type: ignore[union-attr]
        if confirm:
            assert "waiting for an approver" in self.ask(user, f"/confirm {action_id}")
        return action_id


MakeUiBot = Callable[..., UiBot]


@pytest.fixture
def ui_bot(
    tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> MakeUiBot:
    """Build (or rebuild over the same store) a bot whose config has ui.yaml."""
    monkeypatch.setenv("XIHE_UI_SECRET", "test-secret-of-the-cookie-signer")
    for user in ENV_USERS:
        monkeypatch.setenv(f"XIHE_UI_TOKEN_{user.upper()}", TOKENS[user])
    counter = {"n": 0}

    def make(
        script: list[Step] | None = None,
        files: tuple[str, ...] = ("xihe.yaml", "access.yaml"),
        ui: dict[str, Any] | None = None,
        listen: str = "127.0.0.1",
        config_dir: Path | None = None,
    ) -> UiBot:
        counter["n"] += 1
        if script:
            llm.add(*script)
        if config_dir is None:  # a new directory; else another replica over the same files
            cfg = write_config(tmp_path / f"config{counter['n']}", llm_url=llm.base_url, files=files)
            (cfg / "ui.yaml").write_text(yaml.safe_dump({**ui_yaml(), **(ui or {})}))
        else:
            cfg = config_dir
        notes: list[tuple[str, str]] = []
        app = build_app(
            cfg,
            clock=clock,
            database_url=db_url,
            notify=lambda conv, text: notes.append((conv, text)),
            holder=f"ui-test-{counter['n']}",
            listen=listen,
        )
        return UiBot(app, cfg, db_url, clock, llm, notes)

    return make
