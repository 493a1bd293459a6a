"""Shared WeCom test fixtures: the official vectors, settings, a fake clock and a uvicorn loopback server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from starlette.applications import Starlette

from tests.conftest import REPO, write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.wecom import feature as wecom_feature
from xihe.config.wecom import AibotSettings, WeComSettings
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.integrations.wecom.aibot import StreamRegistry
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.fake_ws import FakeWeComWS
from xihe.integrations.wecom.inbound import InboundMessage, InMemoryMsgIdStore, Rejected
from xihe.integrations.wecom.longconn import LongConnection
from xihe.integrations.wecom.routes import wecom_routes

# a verbatim copy of reference/wecom_crypto_vectors.json, so the tests run anywhere
VECTORS_PATH = Path(__file__).with_name("wecom_crypto_vectors.json")

CORP_ID = "ww1436e0e65a779aee"
TOKEN = "hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo"
AES_KEY = "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt"
BOT_TOKEN = "QDG6eK"
BOT_AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
AGENT_ID = 1000002


def load_vectors() -> list[dict[str, Any]]:
    """Every vector in the reference file."""
    data: list[dict[str, Any]] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    return data


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 12, 2, 9, 0, tzinfo=UTC))


def make_settings(**over: Any) -> WeComSettings:
    """Settings with the vector-A app and vector-B key for the AI bot."""
    base: dict[str, Any] = dict(
        corp_id=CORP_ID,
        token=TOKEN,
        aes_key=AES_KEY,
        secret="app-secret-value",
        agent_id=AGENT_ID,
        timestamp_window_seconds=300,
        max_body_bytes=65536,
        aibot=AibotSettings(token=BOT_TOKEN, aes_key=BOT_AES_KEY, ack_text="收到"),
    )
    base.update(over)
    return WeComSettings(**base)


class ServerThread:
    """uvicorn serving an ASGI app on 127.0.0.1:<free port> in a thread."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Gateway:
    """A running gateway plus everything a test asserts on."""

    def __init__(
        self,
        url: str,
        clock: FakeClock,
        dispatched: list[InboundMessage],
        rejected: list[Rejected],
        store: InMemoryMsgIdStore,
        streams: StreamRegistry,
    ) -> None:
        self.url, self.clock, self.dispatched, self.rejected = url, clock, dispatched, rejected
        self.store, self.streams = store, streams

    def app_sender(self, **kw: Any) -> CallbackSender:
        return CallbackSender(
            self.url,
            kw.pop("token", TOKEN),
            kw.pop("aes_key", AES_KEY),
            kw.pop("receiveid", CORP_ID),
            self.clock,
            **kw,
        )

    def bot_sender(self, **kw: Any) -> CallbackSender:
        return CallbackSender(
            self.url,
            kw.pop("token", BOT_TOKEN),
            kw.pop("aes_key", BOT_AES_KEY),
            kw.pop("receiveid", ""),
            self.clock,
            **kw,
        )


@pytest.fixture
def make_gateway(clock: FakeClock) -> Iterator[Callable[..., Gateway]]:
    servers: list[ServerThread] = []

    def make(dispatch: Callable[[InboundMessage], Any] | None = None, **over: Any) -> Gateway:
        dispatched: list[InboundMessage] = []
        rejected: list[Rejected] = []
        store = InMemoryMsgIdStore()
        streams = StreamRegistry()
        routes = wecom_routes(
            make_settings(**over),
            store,
            dispatch or dispatched.append,
            clock,
            streams=streams,
            on_reject=lambda _path, r: rejected.append(r),
        )
        server = ServerThread(Starlette(routes=routes)).__enter__()
        servers.append(server)
        return Gateway(server.url, clock, dispatched, rejected, store, streams)

    yield make
    for s in servers:
        s.__exit__()


@pytest.fixture
def gateway(make_gateway: Callable[..., Gateway]) -> Gateway:
    return make_gateway()


@pytest.fixture
def fake_wecom(clock: FakeClock) -> Iterator[FakeWeCom]:
    with FakeWeCom(clock) as fake:
        fake.add_app(CORP_ID, "app-secret-value", AGENT_ID)
        yield fake


# ---- the AI bot's long connection: a real bot against the WebSocket fake ------------------------

BOT_ID = "bot1"
BOT_SECRET = "bot-secret-0123456789"


@pytest.fixture
def fake_ws() -> Iterator[FakeWeComWS]:
    with FakeWeComWS({BOT_ID: BOT_SECRET}) as fake:
        yield fake


Start = Callable[..., App]


@pytest.fixture
def start_bot(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    clock: FakeClock,
    fake_ws: FakeWeComWS,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Start]:
    """Build a bot in websocket mode and start its long connection (the feature's startup hook)."""
    started: list[App] = []
    monkeypatch.setenv("XIHE_WECOM_AIBOT_ID", BOT_ID)

    def start(
        name: str = "r1", *, secret: str = BOT_SECRET, heartbeat: float = 0.5, backoff_max: float = 60
    ) -> App:
        monkeypatch.setenv("XIHE_WECOM_AIBOT_SECRET", secret)
        cfg_dir = write_config(tmp_path / f"cfg-{name}", llm_url=llm.base_url)
        cfg = yaml.safe_load((REPO / "config" / "wecom.yaml").read_text())
        cfg.update(enabled=False, progress_interval_seconds=0, workers=2)
        cfg["aibot"].update(enabled=True, mode="websocket", ack_text="收到")
        cfg["aibot"]["long_connection"].update(
            url=fake_ws.url,
            heartbeat_seconds=heartbeat,
            lease_seconds=30,
            standby_poll_seconds=5,
            backoff_initial_seconds=1,
            backoff_max_seconds=backoff_max,
        )
        (cfg_dir / "wecom.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
        app = build_app(cfg_dir, clock=clock, database_url=db_url, holder=name)
        conn = longconn(app)
        never = threading.Event()
        # back-off and standby waits are recorded, not waited out: only a short pause between polls
        conn.sleep = lambda seconds: never.wait(0.01)
        wecom_feature.startup(app)
        started.append(app)
        return app

    yield start
    for app in started:
        wecom_feature.shutdown(app)
        app.deps.engine.dispose()


def longconn(app: App) -> LongConnection:
    wecom = app.get(wecom_feature.CHANNEL)
    assert wecom is not None
    conn = wecom.conn
    assert isinstance(conn, LongConnection)
    return conn
