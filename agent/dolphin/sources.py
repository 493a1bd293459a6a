"""What the DolphinScheduler feature hands to the alert pipeline besides its own runs' failures.

Installed when config/alerts.yaml exists (whether or not dolphin.yaml does):

    routes     POST /hooks/dolphinscheduler: DolphinScheduler's HTTP alert plugin (webhook.py); shared
               secret from the env variable alerts.yaml names, validated body, idempotent (a
               re-post is recorded as a duplicate)
    jobs       alerts_scan when alerts.yaml's `scan.enabled`: failed runs of the configured projects
               the bot did not start → `deps.alerts.feed`, once each (scan.py, scanner.py)
    services   `deps.origins`: who started a run, when the bot did (origin.py), for instance alerts

The watcher's failures go the same way from `ds_poll` (feature.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.alerts.model import PUSHED, Reason
from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Services
from xihe.agent.dolphin.origin import SqlRunOrigins
from xihe.agent.dolphin.scan import ScanResult
from xihe.agent.dolphin.scanner import Scanner
from xihe.agent.dolphin.webhook import handle_ds_webhook
from xihe.agent.feature import Context, Installed, Job, Runtime, StateKey
from xihe.config.alerts import ALERTS_SECTION
from xihe.tools.dolphin.service import DolphinService

log = logging.getLogger("xihe.alerts")
SCANNER = StateKey("dolphin", Scanner)  # the failed-run scanner, when alerts.yaml enables `scan`


def install_sources(ctx: Context) -> Installed:
    """When alerts.yaml exists: the webhook route, the run origins and (if on) the scan job and its Scanner."""
    cfg = ctx.settings.get(ALERTS_SECTION)
    if cfg is None or ctx.offline:
        return Installed()
    jobs, scan = [], None
    if cfg.scan.enabled:
        scan = Scanner(ctx.deps, cfg.scan, ctx.settings.workflows)
        jobs.append(Job("alerts_scan", scan_failed_runs, cfg.scan.interval_seconds))
    return Installed(
        services=Services(origins=SqlRunOrigins(ctx.deps.engine)), jobs=jobs, routes=[routes], state=scan
    )


def scan_failed_runs(app: Runtime) -> ScanResult | None:
    """Job: report failed runs of the configured DS projects the bot did not start (once each)."""
    alerts, scan = app.deps.alerts, app.get(SCANNER)
    if alerts is None or scan is None:
        return None
    ds = app.deps.dolphin
    if not isinstance(ds, DolphinService):
        log.warning("alerts.yaml enables the failed-run scan, but DolphinScheduler is not configured")
        return None
    return scan.run(ds, alerts.feed, app.deps.clock())


def _audit_rejected(app: Runtime, request: Request, now: datetime, reason: str) -> None:
    app.deps.audit.record(
        AuditEvent(
            at=now,
            kind="webhook",
            actor=request.client.host if request.client else "unknown",
            outcome="rejected",
            tool="/hooks/dolphinscheduler",
            reason=reason,
        )
    )


def routes(app: Runtime) -> list[BaseRoute]:
    """POST /hooks/dolphinscheduler."""
    cfg = app.settings.get(ALERTS_SECTION)
    if cfg is None:
        return []

    async def hook(request: Request) -> Response:
        alerts = app.deps.alerts
        if alerts is None:
            return JSONResponse({"ok": False, "error": "alerts are not configured"}, status_code=503)
        body = await request.body()
        secret = app.settings.secret(cfg.webhook.secret_env) or ""
        now = app.deps.clock()
        status, out = handle_ds_webhook(
            request.headers, body, secret, now, cfg.webhook.header, cfg.webhook.ds_timezone
        )
        if isinstance(out, str):
            _audit_rejected(app, request, now, f"HTTP {status}: {out}")
            return JSONResponse({"ok": False, "error": out}, status_code=status)
        records = await run_in_threadpool(alerts.feed, out.events, out.bad)
        if status != 200:
            _audit_rejected(
                app, request, now, f"HTTP {status}: " + "; ".join(why for _w, why in out.bad)[:500]
            )
        return JSONResponse(
            {
                "ok": status == 200,
                "events": len(out.events),
                "bad": [{"item": where, "error": why} for where, why in out.bad],
                "pushed": sum(1 for r in records if r.reason in PUSHED),
                "duplicates": sum(1 for r in records if r.reason is Reason.DUPLICATE_EVENT),
                "records": [r.to_dict() for r in records],
            },
            status_code=status,
        )

    return [Route("/hooks/dolphinscheduler", hook, methods=["POST"])]
