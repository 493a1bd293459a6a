"""Operations of `xihe serve`: retention pruning, config reload and structured JSON logs.

Retention deletes finished tasks (their steps and confirmations go with them by cascade), their
orphaned artifacts, old audit events, delivered outbox rows, old WeCom inbox/stream rows and ended
web sessions with old login tries and lockouts, in batches so locks stay short; every replica may
run it (deletes are idempotent).

Config reload (agent/ops/reload.py) re-reads the directory when a file changed, on its job's tick or
on SIGHUP. A valid directory replaces the running settings; an invalid one keeps the last good config
running, and `/readyz` answers 503 naming it until the files are fixed. Both are audited with the
files and keys that changed, the new files' digest and what triggered the reload.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, Table, and_, delete, not_, or_, select
from sqlalchemy.exc import SQLAlchemyError

from xihe.agent.alert_tables import alert_outbox
from xihe.agent.audit import AuditEvent
from xihe.agent.core_tables import artifact, audit_event, task
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime
from xihe.agent.mail_tables import chat_mail
from xihe.agent.ops.reload import ReloadState, file_digests, on_sighup, reload_config
from xihe.agent.redact import Redactor
from xihe.agent.tasks import FINISHED
from xihe.agent.web_tables import ui_login_attempt, ui_login_lock, ui_session
from xihe.agent.wecom_tables import wecom_inbox, wecom_stream
from xihe.config.ops import OPS_SECTION, OpsConfig

log = logging.getLogger("xihe.ops")


def ops_config(app: Runtime | Context) -> OpsConfig:
    """ops.yaml, or its defaults when the file is absent."""
    return app.settings.get(OPS_SECTION) or OpsConfig.model_validate({})


# ---- structured logs -------------------------------------------------------------------------------

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, exception and every `extra` field
    (task_id, key, user ...). Every value passes through the redactor."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or Redactor()

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(self._scrub(out), ensure_ascii=False, default=str)

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redactor.text(value)
        if isinstance(value, dict):
            return {k: self._scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._scrub(v) for v in value]
        if isinstance(value, int | float | bool) or value is None:
            return value
        return self.redactor.text(str(value))


def configure_logging(app: Runtime) -> None:
    """JSON (or text) logs for the root and uvicorn handlers, each with the redactor."""
    from xihe.agent.redact import RedactingFilter

    cfg = ops_config(app).logging
    root = logging.getLogger()
    root.setLevel(cfg.level)
    logging.getLogger("apscheduler").setLevel(max(logging.WARNING, root.level))  # one line per job run
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    loggers = [root] + [logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter(app.deps.redactor))
            if cfg.format == "json":
                handler.setFormatter(JsonFormatter(app.deps.redactor))


def startup(app: Runtime) -> None:
    """Server lifespan start: logs, and SIGHUP reloads the config."""
    configure_logging(app)
    on_sighup(app)


# ---- retention -------------------------------------------------------------------------------------


def _delete_batches(engine: Engine, table: Table, where: Any, batch: int) -> int:
    """Delete matching rows `batch` at a time (short transactions); the number deleted."""
    pk = next(iter(table.primary_key.columns))
    total = 0
    while True:
        with engine.begin() as conn:
            ids = select(pk).where(where).limit(batch).scalar_subquery()
            n = conn.execute(delete(table).where(pk.in_(ids))).rowcount
        total += n
        if n < batch:
            return total


def prune(app: Runtime, now: datetime | None = None) -> dict[str, int]:
    """Delete rows older than the configured ages; the count per table."""
    cfg = ops_config(app).retention
    deps = app.deps
    now = now or deps.clock()
    days = timedelta(days=1)
    plan: list[tuple[str, Table, Any]] = [
        (
            "task",
            task,
            and_(task.c.status.in_(FINISHED), task.c.updated_at < now - cfg.tasks_days * days),
        ),
        (
            "artifact",
            artifact,
            and_(
                artifact.c.created_at < now - cfg.tasks_days * days,
                or_(artifact.c.task_id.is_(None), not_(artifact.c.task_id.in_(select(task.c.id)))),
            ),
        ),
        ("audit_event", audit_event, audit_event.c.at < now - cfg.audit_days * days),
        ("wecom_inbox", wecom_inbox, wecom_inbox.c.seen_at < now - cfg.inbox_days * days),
        ("wecom_stream", wecom_stream, wecom_stream.c.created_at < now - cfg.inbox_days * days),
    ]
    ended = now - cfg.sessions_days * days
    plan += [
        ("ui_session", ui_session, or_(ui_session.c.ended_at < ended, ui_session.c.expires_at < ended)),
        ("ui_login_attempt", ui_login_attempt, ui_login_attempt.c.at < ended),
        ("ui_login_lock", ui_login_lock, ui_login_lock.c.until < ended),
    ]
    plan.append(("chat_mail", chat_mail, chat_mail.c.created_at < now - cfg.tasks_days * days))
    plan.append(
        (
            "outbox",
            alert_outbox,
            and_(alert_outbox.c.status == "sent", alert_outbox.c.created_at < now - cfg.outbox_days * days),
        )
    )
    counts: dict[str, int] = {}
    for name, table, where in plan:
        try:
            counts[name] = _delete_batches(deps.engine, table, where, cfg.batch)
        except SQLAlchemyError as exc:  # e.g. a table of a feature not migrated here, or a foreign key
            log.warning("retention of %s failed: %s", name, type(exc).__name__)
            counts[name] = 0
    if any(counts.values()):
        deps.audit.record(
            AuditEvent(at=now, kind="retention", actor=deps.holder, outcome="pruned", detail=counts)
        )
        log.info("retention pruned old rows", extra={"deleted": counts})
    return counts


def retention(app: Runtime) -> None:
    """Job: prune old rows."""
    if ops_config(app).retention.enabled:
        prune(app)


# ---- the feature interface -------------------------------------------------------------------------


def install(ctx: Context) -> Installed:
    """Logging at start-up, retention and config reload; the fingerprint of the config as loaded, so
    the first reload only acts on changes."""
    cfg = ops_config(ctx)
    jobs = []
    if cfg.retention.enabled:
        jobs.append(Job("retention", retention, cfg.retention.interval_minutes * 60))
    if cfg.config_reload.enabled:
        jobs.append(Job("config_reload", reload_config, cfg.config_reload.interval_seconds))
    return Installed(jobs=jobs, startup=[startup], state=ReloadState(file_digests(ctx.settings.directory)))


FEATURE = Feature("ops", OPS_SECTION, install)
