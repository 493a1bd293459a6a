"""/ui/alerts: the alerts' states (firing, acknowledged, resolved, expired) and how fast they are
handled, channel health, maintenance windows, failure events with what was suppressed and why, the
outbox, and the pushes the audit recorded."""

from __future__ import annotations

from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from xihe.agent.alerts.measures import span
from xihe.agent.web.ui import data
from xihe.agent.web.ui.auth import Viewer
from xihe.agent.web.ui.page import REFRESH_SECONDS, Pages
from xihe.agent.web.ui.params import MAX_ID, int_param
from xihe.agent.web.ui.visibility import owner_filter, visible_runs
from xihe.config.alerts import ALERTS_SECTION

MEASURE_DAYS = 7  # the period of the measures the page shows (`xihe alerts stats --since` for others)
# Columns worth a glance, in order.
EVENT_COLUMNS = ("at", "kind", "reason", "tier", "instance_id", "workflow", "task", "detail",
                 "notification_key")  # fmt: skip


class Alerts:
    """Everyone who may log in sees channel health and maintenance; failure events, notifications and
    pushes follow agent/web/ui/visibility.py's rule (an event's owners: those of its run)."""

    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        return [Route("/ui/alerts", self.ui.page(self.alerts))]

    def alerts(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        deps = self.ui.app.deps
        engine, size = deps.engine, self.ui.config.page_size
        cfg = deps.settings.get(ALERTS_SECTION)
        only = request.query_params.get("show", "")
        reasons = sorted(data.SUPPRESSED_REASONS | data.FOLDED_REASONS) if only == "suppressed" else None
        # an alert's link to the run's trace: that instance's decisions only
        instance = int_param(request.query_params, "instance", None, 0, MAX_ID)
        wanted = [instance] if instance is not None else None
        instance_ids = visible_runs(engine, viewer, wanted)
        if instance is not None and not instance_ids:
            return self.ui.error(
                request, viewer, 403, "Not yours", f"Run {instance} was not started by one of your tasks."
            )
        events = data.alert_events(engine, limit=size, instance_ids=instance_ids, reasons=reasons)
        if events is not None:
            events = (["verdict", *EVENT_COLUMNS], [{**r, "verdict": data.verdict(r)} for r in events[1]])
        since = deps.clock() - timedelta(days=MEASURE_DAYS)
        states = data.alert_states(engine, since=since, limit=size, instance_ids=instance_ids)
        measures = data.alert_measures(engine, since=since, instance_ids=instance_ids)
        waiting = data.unacked_p0_alerts(engine, instance_ids)
        health = data.channel_health(engine)
        known = health or {}
        channels = []
        names = list(cfg.channels) if cfg is not None else []
        names += [n for n in known if n not in names]
        for name in names:
            ch = cfg.channels.get(name) if cfg is not None else None
            h = known.get(name)
            channels.append(
                {
                    "name": name,
                    "rate": ch.rate_limit_per_minute if ch is not None else None,
                    "email_to": ", ".join(ch.email_to) if ch is not None and ch.email_to else "smtp admins",
                    "known": h is not None,
                    "mode": h.mode if h is not None else "robot",
                    "failures": h.failures if h is not None else 0,
                    "last_probe_at": h.last_probe_at if h is not None else None,
                }
            )
        return self.ui.render(
            request,
            "alerts.html",
            viewer,
            configured=cfg is not None,
            states=states,
            measures=measures,
            measure_days=MEASURE_DAYS,
            unacked=waiting,
            span=span,
            events=events,
            only=only,
            everyone=viewer.sees_all,
            outbox=data.outbox_rows(engine, limit=size) if viewer.sees_all else None,
            channels=channels,
            health_table=health is not None,
            maintenance=data.maintenance_rows(deps, deps.clock()),
            pushes=deps.audit.search(kind="alert_push", visible_to=owner_filter(viewer), limit=20),
            suppressed=data.is_suppressed,
            refresh=REFRESH_SECONDS,  # new failures, pushes and channel health arrive on their own
            refresh_why="",
        )
