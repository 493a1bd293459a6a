"""`config/alerts.yaml`: alert windows, thresholds, channels, maintenance schedules, delivery and SMTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.agent.cron import CronSpec

if TYPE_CHECKING:  # the cross-file checks and ALERTS_SECTION import these when used (see the end)
    from xihe.config.settings import Problem, Section, Settings

    ALERTS_SECTION: Section[AlertsConfig]


class NodeStorm(BaseModel):
    """When many failures on one worker host become one "suspect node" alert."""

    model_config = ConfigDict(extra="forbid")

    threshold: int = Field(
        default=5, ge=2, description="distinct failed instances on one host within the window"
    )
    window_minutes: int = Field(
        default=10, ge=1, le=1440, description="sliding window for counting host failures"
    )
    channel: str = Field(default="default", description="channel that receives suspect-node alerts")


class Channel(BaseModel):
    """One alert channel: where its messages go (a notifier of `kind`), plus the e-mail fallback for it."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["wecom_robot", "wecom_app"] = Field(
        default="wecom_robot",
        description="the notifier that sends this channel's messages (agent/alerts/notify/<kind>.py): "
        "wecom_robot (a group robot webhook: text commands only) or wecom_app (the self-built app: "
        "P0/P1 alerts also carry buttons)",
    )
    robot_key_env: str = Field(
        description="environment variable holding the robot webhook key, e.g. XIHE_ROBOT_OPS "
        "(wecom_app: the variable holding the app's Secret, e.g. XIHE_WECOM_APP_SECRET)"
    )
    to_users: list[str] = Field(
        default_factory=list, description="wecom_app: the members (UserIDs) who get this channel's alerts"
    )
    agent_id: int | None = Field(default=None, description="wecom_app: the app's AgentId")
    corp_id_env: str = Field(
        default="XIHE_WECOM_CORP_ID", description="wecom_app: environment variable holding the CorpID"
    )
    api_base: str = Field(default="https://qyapi.weixin.qq.com", description="wecom_app: the WeCom API")

    @model_validator(mode="after")
    def _app_fields(self) -> Channel:
        if self.kind == "wecom_app" and (not self.to_users or self.agent_id is None):
            raise ValueError("a wecom_app channel needs to_users (UserIDs) and agent_id")
        return self

    rate_limit_per_minute: int = Field(
        default=20, ge=1, le=20, description="messages per minute for this robot (WeCom: 20)"
    )
    email_to: list[str] = Field(default_factory=list, description="fallback recipients; empty = smtp.admins")
    conversations: list[str] = Field(
        default_factory=list,
        description="chat conversations (a WeCom group chatid, a user id) that read this channel: "
        "a bare /ack there acknowledges this channel's latest alert",
    )


class Scope(BaseModel):
    """What a maintenance window covers."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["all", "project", "workflow", "host"] = Field(
        default="all", description="all | project | workflow | host"
    )
    value: str = Field(
        default="", description="project name, workflow name or host (ip or ip:port); empty for all"
    )

    @model_validator(mode="after")
    def _value_needed(self) -> Scope:
        if self.kind != "all" and not self.value:
            raise ValueError(f"scope kind {self.kind!r} needs a value")
        return self


class MaintenanceSchedule(BaseModel):
    """A planned maintenance window: either a cron start plus a duration, or a fixed start/end."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="short name shown in suppression records, e.g. nightly-worker-restart")
    cron: str = Field(
        default="", description="5-field cron (minute hour day month weekday) in `timezone`; needs duration"
    )
    duration_minutes: int = Field(
        default=0, ge=0, le=7 * 24 * 60, description="length of each cron occurrence"
    )
    start: datetime | None = Field(default=None, description="fixed start (ISO 8601, with offset)")
    end: datetime | None = Field(default=None, description="fixed end (ISO 8601, with offset)")
    scope: Scope = Field(default_factory=lambda: Scope(), description="what the window silences")

    @model_validator(mode="after")
    def _one_form(self) -> MaintenanceSchedule:
        if self.cron:
            CronSpec.parse(self.cron)  # raises ValueError with the problem
            if self.duration_minutes <= 0:
                raise ValueError("a cron schedule needs duration_minutes > 0")
            if self.start or self.end:
                raise ValueError("use either cron + duration_minutes or start + end, not both")
        else:
            if self.start is None or self.end is None:
                raise ValueError("give cron + duration_minutes, or both start and end")
            if self.start.tzinfo is None or self.end.tzinfo is None:
                raise ValueError("start and end need a UTC offset, e.g. 2026-12-02T22:00:00+08:00")
            if self.end <= self.start:
                raise ValueError("end must be after start")
        return self


class Delivery(BaseModel):
    """How the outbox sender behaves."""

    model_config = ConfigDict(extra="forbid")

    robot_base_url: str = Field(
        default="https://qyapi.weixin.qq.com/cgi-bin/webhook/send",
        description="WeCom robot webhook endpoint (the fakes override it)",
    )
    timeout_seconds: float = Field(default=5.0, gt=0, description="HTTP timeout per attempt")
    tries_per_run: int = Field(
        default=3, ge=1, le=10, description="tenacity attempts per row per run for retryable errors"
    )
    failures_before_email: int = Field(
        default=3, ge=1, description="consecutive failed rows before a channel falls back to e-mail"
    )
    probe_seconds: int = Field(
        default=60, ge=1, description="while on e-mail, try the robot again this often"
    )
    retry_seconds: int = Field(
        default=30, ge=1, description="first back-off for a row that failed; doubles, capped at 10 min"
    )
    lease_seconds: int = Field(
        default=60, ge=5, description="claim lease; a crashed sender's rows are taken back after it"
    )
    batch: int = Field(default=50, ge=1, description="rows claimed per run")


class Smtp(BaseModel):
    """The e-mail fallback (standard-library smtplib)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="", description="SMTP server; empty disables the e-mail fallback")
    port: int = Field(default=25, description="SMTP port (587 with starttls, 25 plain)")
    starttls: bool = Field(default=False, description="upgrade the connection with STARTTLS")
    username: str = Field(default="", description="login name; empty = no AUTH")
    password_env: str = Field(default="", description="environment variable holding the SMTP password")
    from_addr: str = Field(default="xihe@localhost", description="envelope and header From")
    admins: list[str] = Field(default_factory=list, description="default recipients of fallback mail")
    timeout_seconds: float = Field(default=10.0, gt=0, description="socket timeout")


class Webhook(BaseModel):
    """`POST /hooks/dolphinscheduler` (DolphinScheduler's HTTP alert plugin)."""

    model_config = ConfigDict(extra="forbid")

    secret_env: str = Field(
        default="XIHE_DS_WEBHOOK_SECRET", description="environment variable with the shared secret"
    )
    header: str = Field(
        default="X-Xihe-Token",
        description="header carrying the secret (configure it in the plugin's headerParams)",
    )
    ds_timezone: str = Field(
        default="Asia/Shanghai", description="timezone of the naive times DolphinScheduler posts"
    )


class Scan(BaseModel):
    """The opt-in scan for failed runs the bot did not start (cron runs, runs started in the DS UI)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="run the scan job (needs config/dolphin.yaml)")
    projects: list[str] = Field(
        default_factory=list, description="DolphinScheduler project names to scan (required when enabled)"
    )
    interval_seconds: int = Field(default=120, ge=10, le=3600, description="seconds between scans")
    lookback_minutes: int = Field(
        default=30, ge=1, le=1440, description="report FAILURE runs that ended within this many minutes"
    )
    max_run_hours: int = Field(
        default=24,
        ge=1,
        le=168,
        description="how long before the look-back window a failed run may have started "
        "(DolphinScheduler filters its list by start time)",
    )
    max_pages: int = Field(default=5, ge=1, le=100, description="instance-list pages per project and scan")
    lease_seconds: int = Field(
        default=300,
        ge=10,
        description="a replica's claim on an instance; a crashed scan's claims lapse after it",
    )

    @model_validator(mode="after")
    def _projects_named(self) -> Scan:
        if self.enabled and not self.projects:
            raise ValueError("scan.enabled needs the project names to scan under scan.projects")
        return self


class TierPolicy(BaseModel):
    """How long an alert of one tier lives: escalation when nobody acknowledges it, resolved notices."""

    model_config = ConfigDict(extra="forbid")

    escalate_after: int = Field(
        default=0,
        ge=0,
        le=1440,
        description="minutes an alert may stay unacknowledged before the next step of its escalation "
        "chain is paged (and as long again between steps); 0 = never escalate",
    )
    max_escalations: int = Field(
        default=3, ge=0, le=10, description="at most this many escalation pages per alert (N)"
    )
    send_resolved: bool = Field(
        default=True, description="tell the channel when the failed run (or a later run) succeeds"
    )


TierName = Literal["P0", "P1", "P2"]
_UNSET_TIER = TierPolicy()  # a tier not configured (read only)


def _default_tiers() -> dict[TierName, TierPolicy]:
    return {
        "P0": TierPolicy(escalate_after=15),
        "P1": TierPolicy(),
        "P2": TierPolicy(send_resolved=False),
    }


class Lifecycle(BaseModel):
    """An alert's life after its first push: acknowledge, escalate, resolve, expire."""

    model_config = ConfigDict(extra="forbid")

    tiers: dict[TierName, TierPolicy] = Field(
        default_factory=_default_tiers,
        description="per tier: escalate_after, max_escalations, send_resolved (a tier left out: "
        "no escalation, resolved notices on)",
    )
    fallback: list[str] = Field(
        default_factory=list,
        description="WeCom userids paged as the last step of every escalation chain (after the "
        "on-call, the secondary and the workflow owner)",
    )
    expire_hours: int = Field(
        default=72, ge=1, le=24 * 31, description="an alert still open after this long is marked expired"
    )

    def policy(self, tier: str) -> TierPolicy:
        """The policy of `tier` (a tier not configured: no escalation, resolved notices on)."""
        found = self.tiers.get(tier)  # type: ignore[call-overload]
        return found if found is not None else _UNSET_TIER


class AlertsConfig(BaseModel):
    """All alert pipeline settings."""

    model_config = ConfigDict(extra="forbid")

    timezone: str = Field(
        default="Asia/Shanghai", description="timezone for cron schedules and times shown in messages"
    )
    instance_wait_seconds: int = Field(
        default=15,
        ge=0,
        le=600,
        description="hold a new P1 instance's message this long so its other failed tasks join it "
        "(P0 goes out at once; tasks that fail later come in a follow-up)",
    )
    public_base_url: str = Field(
        default="",
        description="where people reach xihe's web UI, e.g. https://xihe.example.com; "
        "alerts link the run's trace page under it (empty: no link)",
    )
    dolphinscheduler_instance_url: str = Field(
        default="",
        description="link to a run in DolphinScheduler's UI, with {project}, {project_code}, "
        "{workflow_code} and {instance_id} placeholders (empty: no link)",
    )
    window_minutes: int = Field(
        default=10, ge=1, le=1440, description="fingerprint and P2 aggregation window"
    )
    fold_p0: bool = Field(
        default=False,
        description="also fold P0 failures into fingerprint windows (default: P0 always pushed)",
    )
    repeat_lookback_minutes: int = Field(
        default=60,
        ge=0,
        le=10080,
        description="a failure of the same workflow with the same fingerprint within this many minutes "
        "of the last one is marked as a repeat (第 3 次（40 分钟内）) with a link to the first; 0: off",
    )
    node_storm: NodeStorm = Field(default_factory=lambda: NodeStorm(), description="suspect-node detection")
    memory_hours: int = Field(default=24, ge=1, description="how long instance and dedupe state is kept")
    log_tail_chars: int = Field(
        default=500, ge=50, le=2000, description="characters of the log tail kept in a message"
    )
    max_bytes: int = Field(
        default=4096, ge=512, le=4096, description="markdown content limit in UTF-8 bytes (WeCom: 4096)"
    )
    templates_dir: str = Field(
        default="", description="directory with admin overrides of instance/aggregate/node .md.j2"
    )
    channels: dict[str, Channel] = Field(
        default_factory=lambda: {"default": Channel(robot_key_env="XIHE_ROBOT_KEY")},
        description="channel name → robot and fallback; workflows name their channel",
    )
    maintenance: list[MaintenanceSchedule] = Field(
        default_factory=list, description="planned maintenance windows"
    )
    delivery: Delivery = Field(default_factory=lambda: Delivery(), description="outbox sender settings")
    smtp: Smtp = Field(default_factory=lambda: Smtp(), description="e-mail fallback")
    webhook: Webhook = Field(default_factory=lambda: Webhook(), description="DolphinScheduler alert webhook")
    scan: Scan = Field(
        default_factory=lambda: Scan(), description="scan DS for failed runs the bot did not start"
    )
    lifecycle: Lifecycle = Field(
        default_factory=lambda: Lifecycle(),
        description="acknowledge, escalate, resolve: the alert's state after its first push",
    )

    @model_validator(mode="after")
    def _default_channel(self) -> AlertsConfig:
        for name in ("public_base_url", "dolphinscheduler_instance_url"):
            url = getattr(self, name)
            if url and not url.startswith(("http://", "https://")):
                raise ValueError(f"{name} must start with http:// or https://")
        try:
            self.dolphinscheduler_instance_url.format(
                project="p", project_code=1, workflow_code=1, instance_id=1
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"dolphinscheduler_instance_url: bad placeholder {exc}") from None
        if "default" not in self.channels:
            raise ValueError("channels must define 'default' (workflows without a channel use it)")
        if self.node_storm.channel not in self.channels:
            raise ValueError(f"node_storm.channel {self.node_storm.channel!r} is not defined under channels")
        return self


def channel_problems(settings: Settings, cfg: AlertsConfig) -> Iterator[Problem]:
    """Workflows (workflows.yaml) naming a channel this file does not define; a missing templates_dir."""
    from xihe.config.semantic import unknown_name

    for i, wf in enumerate(settings.workflows.workflows):
        if wf.channel not in cfg.channels:
            yield (
                "workflows.yaml",
                ("workflows", i, "channel"),
                unknown_name("channel", wf.channel, cfg.channels, "alerts.yaml channels"),
            )
    if cfg.templates_dir and not Path(cfg.templates_dir).is_dir():
        yield "alerts.yaml", ("templates_dir",), f"{cfg.templates_dir!r} is not a directory"


def known_people(settings: Settings) -> set[str]:
    """Userids a page or an acknowledgement may name: access.yaml users and everyone of an oncall.yaml
    rotation (members and listed secondaries)."""
    from xihe.config.oncall import ONCALL_SECTION

    people = set(settings.access.users)
    oncall = settings.get(ONCALL_SECTION)
    for rot in oncall.rotations.values() if oncall is not None else ():
        people.update(rot.members, rot.secondary if isinstance(rot.secondary, list) else ())
    return people


def lifecycle_problems(settings: Settings, cfg: AlertsConfig) -> Iterator[Problem]:
    """`lifecycle.fallback` userids nobody registered: a page to a typo reaches no one."""
    from xihe.config.semantic import unknown_name

    known = known_people(settings)
    for i, user in enumerate(cfg.lifecycle.fallback):
        if user not in known:
            where = "access.yaml users, oncall.yaml members"
            yield "alerts.yaml", ("lifecycle", "fallback", i), unknown_name("user", user, known, where)


def alerts_problems(settings: Settings, cfg: AlertsConfig) -> Iterator[Problem]:
    """Every cross-check of alerts.yaml."""
    yield from channel_problems(settings, cfg)
    yield from lifecycle_problems(settings, cfg)


def __getattr__(name: str) -> Any:
    """`ALERTS_SECTION`, made on first use: the settings machinery (oncall.yaml's models, the
    semantic checks) is not imported by commands that only read alerts.yaml (`xihe alerts replay`)."""
    if name != "ALERTS_SECTION":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from xihe.config.settings import Section

    section = globals()["ALERTS_SECTION"] = Section(
        "alerts.yaml", "alerts", AlertsConfig, checks=alerts_problems
    )
    return section
