"""`config/wecom.yaml`: the WeCom self-built app, its callback and the AI bot (智能机器人).

The YAML names environment variables; `resolve_settings` reads them into a `WeComSettings` whose
secret fields never show in repr or errors. The three default names `XIHE_WECOM_CORP_ID`,
`XIHE_WECOM_TOKEN` and `XIHE_WECOM_AES_KEY` are a public interface.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.agent.errors import ConfigError, ConfigErrors
from xihe.config.settings import Section
from xihe.config.yamlmodel import load_model

_AES_KEY_RE = re.compile(r"^[A-Za-z0-9]{43}$")


class LongConnectionConfig(BaseModel):
    """The AI bot's long connection (长连接): one WebSocket per bot, held by one replica at a time."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field("wss://openws.work.weixin.qq.com", description="WeCom's long-connection endpoint")
    bot_id_env: str = Field("XIHE_WECOM_AIBOT_ID", description="env var holding the bot's BotID")
    secret_env: str = Field("XIHE_WECOM_AIBOT_SECRET", description="env var holding the bot's Secret")
    heartbeat_seconds: float = Field(30, gt=0, le=300, description="a `ping` frame this often")
    lease_seconds: float = Field(
        90, gt=0, description="the replica holding the connection renews this lease on every heartbeat"
    )
    standby_poll_seconds: float = Field(
        5, gt=0, description="how often a replica without the lease checks whether it lapsed"
    )
    backoff_initial_seconds: float = Field(1, gt=0, description="first reconnect delay (then doubled)")
    backoff_max_seconds: float = Field(60, gt=0, description="reconnect delays never exceed this")
    open_timeout_seconds: float = Field(10, gt=0, description="connect + subscribe must finish within this")

    @model_validator(mode="after")
    def _lease_outlives_heartbeat(self) -> LongConnectionConfig:
        if self.lease_seconds <= self.heartbeat_seconds:
            raise ValueError(
                "lease_seconds must be longer than heartbeat_seconds (the lease is renewed per ping)"
            )
        return self


class AibotConfig(BaseModel):
    """The AI bot in API mode: JSON callbacks (receiveid "") or the long connection; streamed replies."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="answer the AI bot (callbacks or the long connection)")
    mode: Literal["callback", "websocket"] = Field(
        "callback", description="callback: WeCom POSTs /wecom/aibot; websocket: we hold a long connection"
    )
    long_connection: LongConnectionConfig = Field(
        default_factory=lambda: LongConnectionConfig.model_validate({}),
        description="the WebSocket mode's endpoint, credentials, heartbeat, lease and back-off",
    )
    token_env: str = Field("XIHE_WECOM_AIBOT_TOKEN", description="env var holding the bot's callback Token")
    aes_key_env: str = Field(
        "XIHE_WECOM_AIBOT_AES_KEY", description="env var holding the bot's 43-character EncodingAESKey"
    )
    stream_ttl_seconds: int = Field(
        360, ge=10, le=3600, description="how long a stream stays refreshable (WeCom stops after 6 min)"
    )
    ack_text: str = Field("", description="first stream frame shown while the answer is being prepared")
    welcome_text: str = Field("", description="reply to enter_chat events; empty = no reply")
    response_url_prefix: str = Field(
        "https://qyapi.weixin.qq.com/cgi-bin/aibot/response",
        description="response_url values must start with this (guards against posting elsewhere)",
    )


class WeComConfig(BaseModel):
    """The self-built app (自建应用): callback crypto, app message API and limits."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="serve /wecom/callback and send replies through the app API")
    corp_id_env: str = Field(
        "XIHE_WECOM_CORP_ID", description="env var holding the CorpID (also the receiveid)"
    )
    token_env: str = Field("XIHE_WECOM_TOKEN", description="env var holding the callback Token")
    aes_key_env: str = Field(
        "XIHE_WECOM_AES_KEY", description="env var holding the 43-character EncodingAESKey"
    )
    secret_env: str = Field(
        "XIHE_WECOM_APP_SECRET", description="env var holding the app's Secret (corpsecret)"
    )
    agent_id: int | None = Field(None, description="the app's AgentId; required to send replies")
    api_base: str = Field("https://qyapi.weixin.qq.com", description="WeCom API base URL (a fake in tests)")
    timestamp_window_seconds: int = Field(
        300, ge=10, le=86400, description="reject callbacks whose signed timestamp is further from now"
    )
    max_body_bytes: int = Field(65536, ge=1024, le=1048576, description="larger callback bodies get 413")
    msgid_ttl_seconds: int = Field(
        86400, ge=60, description="how long seen MsgIds are remembered; must exceed the timestamp window"
    )
    http_timeout_seconds: float = Field(10.0, gt=0, le=60, description="timeout of each app API call")
    workers: int = Field(
        4, ge=1, le=64, description="workers answering explicit commands (/status, /confirm …) per replica"
    )
    model_concurrency: int = Field(
        64,
        ge=1,
        le=1024,
        description="free-text turns (model calls) in flight per replica, apart from commands",
    )
    model_cpu_threads: int = Field(
        2,
        ge=1,
        le=64,
        description="of the free-text turns, how many run Python at once (the rest wait on the model)",
    )
    intake_threads: int = Field(
        4, ge=1, le=64, description="callbacks per lane recorded at once; more queue in arrival order"
    )
    queue_size: int = Field(
        200, ge=1, description="messages waiting in memory per lane and replica; more wait in the database"
    )
    max_waiting: int = Field(
        5000, ge=1, description="messages waiting in the database (all replicas) before new ones get 'busy'"
    )
    user_messages_per_minute: float = Field(30, gt=0, description="messages one user may send per minute")
    messages_per_second: float = Field(200, gt=0, description="messages one replica takes per second, in all")
    burst_messages: int = Field(2000, ge=1, description="messages one replica takes at once above that rate")
    queued_note_seconds: float = Field(
        10, ge=0, description="say 'queued, N ahead of you' when the expected wait is longer than this"
    )
    progress_interval_seconds: float = Field(
        10, ge=0, description="at most one progress message per task this often; final messages always go"
    )
    aibot: AibotConfig = Field(
        default_factory=lambda: AibotConfig.model_validate({}), description="AI bot (智能机器人) mode"
    )


@dataclass(frozen=True)
class LongConnectionSettings:
    """Resolved long-connection settings; the secret is hidden from repr."""

    bot_id: str
    secret: str = field(repr=False)
    url: str = "wss://openws.work.weixin.qq.com"
    heartbeat_seconds: float = 30
    lease_seconds: float = 90
    standby_poll_seconds: float = 5
    backoff_initial_seconds: float = 1
    backoff_max_seconds: float = 60
    open_timeout_seconds: float = 10


@dataclass(frozen=True)
class AibotSettings:
    """Resolved AI-bot settings; secrets hidden from repr. `long_connection` is set in websocket mode."""

    token: str = field(repr=False)
    aes_key: str = field(repr=False)
    stream_ttl_seconds: int = 360
    ack_text: str = ""
    welcome_text: str = ""
    response_url_prefix: str = "https://qyapi.weixin.qq.com/cgi-bin/aibot/response"
    long_connection: LongConnectionSettings | None = None

    @property
    def callbacks(self) -> bool:
        """True when WeCom POSTs to /wecom/aibot (callback mode)."""
        return self.long_connection is None


@dataclass(frozen=True)
class WeComSettings:
    """Config plus the secrets read from the environment; what the routes and clients take."""

    corp_id: str
    token: str = field(repr=False)
    aes_key: str = field(repr=False)
    app_enabled: bool = True
    secret: str = field(default="", repr=False)
    agent_id: int | None = None
    api_base: str = "https://qyapi.weixin.qq.com"
    timestamp_window_seconds: int = 300
    max_body_bytes: int = 65536
    msgid_ttl_seconds: int = 86400
    http_timeout_seconds: float = 10.0
    workers: int = 4
    model_concurrency: int = 128
    model_cpu_threads: int = 2
    intake_threads: int = 4
    queue_size: int = 200
    max_waiting: int = 5000
    user_messages_per_minute: float = 30
    messages_per_second: float = 200
    burst_messages: int = 2000
    queued_note_seconds: float = 10
    progress_interval_seconds: float = 10.0
    aibot: AibotSettings | None = None


def load_wecom(text: str, name: str = "config/wecom.yaml") -> WeComConfig:
    """Validate wecom.yaml text; errors read `file:line: key: problem`."""
    return load_model(text, name, WeComConfig)


def _env(environ: Mapping[str, str], var: str, key: str, name: str, errors: list[ConfigError]) -> str:
    value = environ.get(var, "")
    if not value:
        errors.append(ConfigError(f"environment variable {var} is not set", name, None, key))
    return value


def _check_aes(value: str, var: str, key: str, name: str, errors: list[ConfigError]) -> None:
    if value and not _AES_KEY_RE.match(value):
        # say what is wrong without echoing the value
        errors.append(ConfigError(f"{var} must be 43 characters of [A-Za-z0-9]", name, None, key))


def resolve_settings(
    config: WeComConfig,
    environ: Mapping[str, str],
    name: str = "config/wecom.yaml",
    *,
    need_secret: bool = False,
) -> WeComSettings:
    """Read the named environment variables; raise ConfigErrors naming each missing or bad one."""
    errors: list[ConfigError] = []
    corp_id = token = aes_key = ""
    if config.enabled:
        corp_id = _env(environ, config.corp_id_env, "corp_id_env", name, errors)
        token = _env(environ, config.token_env, "token_env", name, errors)
        aes_key = _env(environ, config.aes_key_env, "aes_key_env", name, errors)
        _check_aes(aes_key, config.aes_key_env, "aes_key_env", name, errors)
    secret = environ.get(config.secret_env, "")
    if need_secret and config.enabled:
        if not secret:
            errors.append(
                ConfigError(f"environment variable {config.secret_env} is not set", name, None, "secret_env")
            )
        if config.agent_id is None:
            errors.append(ConfigError("agent_id is required to send app messages", name, None, "agent_id"))
    aibot = None
    if config.aibot.enabled:
        b = config.aibot
        bot_token = bot_key = ""
        long_connection = None
        if b.mode == "callback":
            bot_token = _env(environ, b.token_env, "aibot.token_env", name, errors)
            bot_key = _env(environ, b.aes_key_env, "aibot.aes_key_env", name, errors)
            _check_aes(bot_key, b.aes_key_env, "aibot.aes_key_env", name, errors)
        else:
            lc = b.long_connection
            long_connection = LongConnectionSettings(
                bot_id=_env(environ, lc.bot_id_env, "aibot.long_connection.bot_id_env", name, errors),
                secret=_env(environ, lc.secret_env, "aibot.long_connection.secret_env", name, errors),
                url=lc.url,
                heartbeat_seconds=lc.heartbeat_seconds,
                lease_seconds=lc.lease_seconds,
                standby_poll_seconds=lc.standby_poll_seconds,
                backoff_initial_seconds=lc.backoff_initial_seconds,
                backoff_max_seconds=max(lc.backoff_max_seconds, lc.backoff_initial_seconds),
                open_timeout_seconds=lc.open_timeout_seconds,
            )
        aibot = AibotSettings(
            token=bot_token,
            aes_key=bot_key,
            stream_ttl_seconds=b.stream_ttl_seconds,
            ack_text=b.ack_text,
            welcome_text=b.welcome_text,
            response_url_prefix=b.response_url_prefix,
            long_connection=long_connection,
        )
    if config.msgid_ttl_seconds <= config.timestamp_window_seconds:
        errors.append(
            ConfigError("must be longer than timestamp_window_seconds", name, None, "msgid_ttl_seconds")
        )
    if errors:
        raise ConfigErrors(errors)
    return WeComSettings(
        app_enabled=config.enabled,
        corp_id=corp_id,
        token=token,
        aes_key=aes_key,
        secret=secret,
        agent_id=config.agent_id,
        api_base=config.api_base.rstrip("/"),
        timestamp_window_seconds=config.timestamp_window_seconds,
        max_body_bytes=config.max_body_bytes,
        msgid_ttl_seconds=config.msgid_ttl_seconds,
        http_timeout_seconds=config.http_timeout_seconds,
        workers=config.workers,
        model_concurrency=config.model_concurrency,
        model_cpu_threads=config.model_cpu_threads,
        intake_threads=config.intake_threads,
        queue_size=config.queue_size,
        max_waiting=config.max_waiting,
        user_messages_per_minute=config.user_messages_per_minute,
        messages_per_second=config.messages_per_second,
        burst_messages=config.burst_messages,
        queued_note_seconds=config.queued_note_seconds,
        progress_interval_seconds=config.progress_interval_seconds,
        aibot=aibot,
    )


WECOM_SECTION = Section("wecom.yaml", "wecom", WeComConfig)
