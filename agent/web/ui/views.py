"""The /ui pages: Starlette routes rendering Jinja2 templates (autoescaped), no JavaScript at all.

Every page needs a session (else a 303 to the login page); every POST needs the session's CSRF
token (else 403); approvers and admins see everyone's tasks and audit, others their own. Store
calls are synchronous, so handlers run them in the thread pool.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent import approvals, pending_view
from xihe.agent.audit import AuditEvent
from xihe.agent.errors import TaskStateError
from xihe.agent.report import task_data
from xihe.agent.timefmt import offset_of, show
from xihe.agent.web.ui import data
from xihe.agent.web.ui.auth import (
    COOKIE,
    FLASH_COOKIE,
    PRELOGIN_COOKIE,
    Signer,
    Viewer,
    check_token,
    csrf_ok,
    new_session,
    secret_of,
    session_viewer,
)
from xihe.agent.web.ui.data import readable
from xihe.config.ui import UiConfig

if TYPE_CHECKING:
    from xihe.agent.app import App

HERE = Path(__file__).parent
REFRESH_SECONDS = 10  # pages showing unfinished tasks reload themselves (no JavaScript: a meta refresh)
MAX_FORM_BYTES = 64 * 1024
SECURITY_HEADERS = {
    # No scripts anywhere; bars are SVG attributes, so no inline styles are needed either.
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Columns worth a glance, in order (the alerts feature owns these tables; missing ones are skipped).
EVENT_COLUMNS = (
    "at",
    "kind",
    "reason",
    "tier",
    "instance_id",
    "workflow",
    "task",
    "detail",
    "notification_key",
)
OUTBOX_COLUMNS = ("created_at", "kind", "tier", "channel", "subject", "status", "attempts", "last_error",
                  "sent_at", "sent_via")  # fmt: skip

Handler = Callable[[Request, Viewer, dict[str, str]], Response]


def _duration(ms: int | None) -> str:
    if ms is None:
        return "…"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    return f"{minutes // 60}h {minutes % 60:02d}m"


def _safe_next(value: str | None) -> str:
    """Only local /ui paths (never '//host' or a scheme) are followed after login."""
    if value and value.startswith("/ui") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/tasks"


async def _read_form(request: Request) -> dict[str, str]:
    """URL-encoded form fields (the only kind our pages send); the last value of a repeated name wins."""
    if request.method != "POST":
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {"__too_large__": "1"}
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("application/x-www-form-urlencoded"):
        return {}
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


class WebUI:
    """The pages of one bot process."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.signer = Signer(secret_of(app.deps.settings, self.config))
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every value is escaped unless a template says otherwise (none do)
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = self._when
        self.env.filters["duration"] = _duration
        self.env.filters["cell"] = self._cell
        self.env.filters["readable"] = readable
        self.css = (HERE / "static" / "ui.css").read_text(encoding="utf-8")

    # ---- plumbing
    @property
    def config(self) -> UiConfig:
        cfg = self.app.deps.settings.section("ui")
        return cfg if isinstance(cfg, UiConfig) else UiConfig()

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.app.deps.settings.core.timezone)

    def _when(self, value: datetime | None) -> str:
        return show(value, self.tz)

    def _cell(self, value: Any) -> str:
        if isinstance(value, datetime):
            return self._when(value)
        if isinstance(value, dict | list):
            value = json.dumps(value, ensure_ascii=False, default=str)
        text = "" if value is None else readable(str(value), indent=None)
        return text if len(text) <= 300 else text[:300] + "…"

    def _viewer(self, request: Request) -> Viewer | None:
        payload = self.signer.loads("session", request.cookies.get(COOKIE))
        return session_viewer(self.app.deps.settings, self.config, payload, self.app.deps.clock())

    def _cookie(self, response: Response, name: str, value: str, max_age: int | None = None) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/ui",
            httponly=True,
            samesite="lax",
            secure=self.config.cookie_secure,
        )

    def render(
        self, request: Request, name: str, viewer: Viewer | None, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        flash = self.signer.loads("flash", request.cookies.get(FLASH_COOKIE)) or {}
        pending_count = 0
        if viewer is not None:
            pending_count = len(self._visible_pending(viewer))
        html = self.env.get_template(name).render(
            viewer=viewer,
            zone=f"{self.tz.key} ({offset_of(self.app.deps.clock().astimezone(self.tz))})",
            refresh=ctx.pop("refresh", 0),
            flash=flash.get("m"),
            flash_ok=flash.get("ok", True),
            pending_count=pending_count,
            path=request.url.path,
            **ctx,
        )
        response = HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
        if flash:
            response.delete_cookie(FLASH_COOKIE, path="/ui")
        return response

    def _flash_redirect(self, url: str, message: str, ok: bool = True) -> Response:
        response = RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)
        self._cookie(response, FLASH_COOKIE, self.signer.dumps("flash", {"m": message, "ok": ok}), 60)
        return response

    def _audit(self, viewer_user: str, outcome: str, reason: str, **detail: Any) -> None:
        self.app.deps.audit.record(
            AuditEvent(
                at=self.app.deps.clock(),
                kind="web",
                actor=viewer_user,
                outcome=outcome,
                reason=reason,
                detail=detail,
            )
        )

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a sync handler: session required, CSRF checked on POST, run in the thread pool."""

        async def endpoint(request: Request) -> Response:
            form = await _read_form(request)
            viewer = self._viewer(request)
            if viewer is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/ui/login?next={quote(target)}", status_code=303)
            if request.method == "POST" and not csrf_ok(viewer.csrf, form.get("csrf")):
                await run_in_threadpool(
                    self._audit,
                    viewer.user,
                    "csrf_refused",
                    "form without a valid CSRF token",
                    path=request.url.path,
                )
                return self.render(
                    request,
                    "error.html",
                    viewer,
                    403,
                    title="Refused",
                    message="This form has no valid CSRF token; reload the page and try again.",
                )
            return await run_in_threadpool(handler, request, viewer, form)

        return endpoint

    def routes(self) -> list[BaseRoute]:
        p = self.page
        return [
            Route("/ui", self.home),
            Route("/ui/", self.home),
            Route("/ui/static/ui.css", self.static_css),
            Route("/ui/login", self.login, methods=["GET", "POST"]),
            Route("/ui/login/wecom", self.wecom_start),
            Route("/ui/login/wecom/callback", self.wecom_callback),
            Route("/ui/logout", p(self.logout), methods=["POST"]),
            Route("/ui/tasks", p(self.tasks)),
            Route("/ui/tasks/{task_id:int}", p(self.task)),
            Route("/ui/tasks/{task_id:int}.json", p(self.task_json)),
            Route("/ui/artifacts/{art_id:str}", p(self.artifact)),
            Route("/ui/audit", p(self.audit)),
            Route("/ui/audit.json", p(self.audit_json)),
            Route("/ui/alerts", p(self.alerts)),
            Route("/ui/runs/{run_id:int}", p(self.run)),
            Route("/ui/pending", p(self.pending)),
            Route("/ui/pending/{action_id:int}/approve", p(self.approve), methods=["POST"]),
            Route("/ui/pending/{action_id:int}/reject", p(self.reject), methods=["POST"]),
        ]

    # ---- login
    async def home(self, request: Request) -> Response:
        return RedirectResponse("/ui/tasks", status_code=303)

    async def static_css(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    async def login(self, request: Request) -> Response:
        form = await _read_form(request)
        return await run_in_threadpool(self._login, request, form)

    def _login(self, request: Request, form: dict[str, str]) -> Response:
        pre = request.cookies.get(PRELOGIN_COOKIE)
        nxt = _safe_next(form.get("next") or request.query_params.get("next"))
        if request.method == "GET" or not pre:
            return self._login_page(request, nxt, None, 200)
        if not csrf_ok(pre, form.get("csrf")):
            self._audit(
                form.get("user", "")[:120] or "-", "csrf_refused", "login form without its CSRF token"
            )
            return self._login_page(request, nxt, "The form expired; please try again.", 403)
        user, token = form.get("user", "").strip(), form.get("token", "")
        fp = check_token(self.app.deps.settings, self.config, user, token) if user and token else None
        if fp is None:
            self._audit(
                user[:120] or "-",
                "login_failed",
                "unknown user or wrong token",
                via="token",
                client=request.client.host if request.client else "",
            )
            return self._login_page(request, nxt, "Unknown user or wrong token.", 401)
        return self._start_session(request, user, fp, "token", nxt)

    def _start_session(self, request: Request, user: str, fp: str, via: str, nxt: str) -> Response:
        now = self.app.deps.clock()
        payload = new_session(user, fp, via, now, self.config.session_hours)
        self._audit(
            user,
            "login",
            f"logged in to the web UI ({via})",
            via=via,
            client=request.client.host if request.client else "",
        )
        response = RedirectResponse(nxt, status_code=303, headers=SECURITY_HEADERS)
        self._cookie(
            response, COOKIE, self.signer.dumps("session", payload), int(self.config.session_hours * 3600)
        )
        response.delete_cookie(PRELOGIN_COOKIE, path="/ui")
        return response

    def _login_page(self, request: Request, nxt: str, error: str | None, status: int) -> Response:
        token = secrets.token_urlsafe(24)
        response = self.render(
            request,
            "login.html",
            None,
            status,
            csrf=token,
            next=nxt,
            error=error,
            wecom=self.config.wecom_oauth.enabled,
        )
        self._cookie(response, PRELOGIN_COOKIE, token, 3600)
        return response

    def logout(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        self._audit(viewer.user, "logout", "logged out of the web UI")
        response = RedirectResponse("/ui/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    async def wecom_start(self, request: Request) -> Response:
        from xihe.agent.web import wecom_oauth

        return await run_in_threadpool(wecom_oauth.start, self, request)

    async def wecom_callback(self, request: Request) -> Response:
        from xihe.agent.web import wecom_oauth

        return await run_in_threadpool(wecom_oauth.callback, self, request)

    # ---- tasks
    def tasks(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        q = request.query_params
        errors: list[str] = []
        since = until = None
        try:
            since = data.parse_when(q.get("since"), self.tz)
            until = data.parse_when(q.get("until"), self.tz, end_of_day=True)
        except ValueError:
            errors.append("Times are ISO dates or date-times, e.g. 2026-12-01 or 2026-12-01T08:30.")
        owner = (q.get("user") or None) if viewer.sees_all else viewer.user
        status = q.get("status") or None
        f = data.TaskFilter(
            status=status,
            owner=owner,
            kind=q.get("kind") or None,
            since=since,
            until=until,
            text=(q.get("q") or "").strip() or None,
        )
        page = max(1, int(q["page"])) if q.get("page", "").isdigit() else 1
        size = self.config.page_size
        rows = data.list_tasks(self.app.deps.engine, f, limit=size + 1, offset=(page - 1) * size)
        params = {k: v for k, v in q.items() if k != "page" and v}
        shown = rows[:size]
        return self.render(
            request,
            "tasks.html",
            viewer,
            refresh=REFRESH_SECONDS if any(not data.is_finished(t) for t in shown) else 0,
            tasks=shown,
            statuses=data.STATUSES,
            kinds=data.task_kinds(self.app.deps.engine),
            users=sorted(self.app.deps.settings.access.users),
            q=dict(q),
            errors=errors,
            page=page,
            next_url=f"/ui/tasks?{urlencode({**params, 'page': page + 1})}" if len(rows) > size else None,
            prev_url=f"/ui/tasks?{urlencode({**params, 'page': page - 1})}" if page > 1 else None,
        )

    def _task_or_error(self, request: Request, viewer: Viewer) -> Any:
        task_id = int(request.path_params["task_id"])
        try:
            t = self.app.deps.tasks.get(task_id)
        except TaskStateError:
            return self.render(
                request, "error.html", viewer, 404, title="Not found", message=f"There is no task {task_id}."
            )
        if not viewer.sees_all and t.owner != viewer.user:
            return self.render(
                request,
                "error.html",
                viewer,
                403,
                title="Not yours",
                message=f"Task {task_id} belongs to someone else.",
            )
        return t

    def task(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        t = self._task_or_error(request, viewer)
        if isinstance(t, Response):
            return t
        deps = self.app.deps
        attempts, span = data.timeline(deps.tasks.steps(t.id), deps.clock(), data.is_finished(t))
        audit_rows = deps.audit.search(task_id=t.id, limit=500)
        ids = data.linked_ids(attempts, audit_rows)
        instance_ids = [v for k, vs in ids.items() if "instance" in k for v in vs]
        alerts = (
            data.recent_rows(deps.engine, "alert_event", limit=50, where={"instance_id": instance_ids})
            if instance_ids
            else None
        )
        pending = [p for p in deps.pending.open_for(statuses=("pending", "confirmed")) if p.task_id == t.id]
        return self.render(
            request,
            "task.html",
            viewer,
            refresh=0 if data.is_finished(t) else REFRESH_SECONDS,
            task=t,
            attempts=attempts,
            span=span,
            audit=audit_rows,
            gates=[r for r in audit_rows if r["kind"] == "gate"],
            ids=ids,
            alerts=alerts,
            instance_ids=instance_ids,
            pending=[pending_view.view(p, deps, self.app.registry) for p in pending],
        )

    def task_json(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        t = self._task_or_error(request, viewer)
        if isinstance(t, Response):
            return t
        body = json.dumps(task_data(self.app.deps, t.id), ensure_ascii=False, indent=2, default=str)
        return Response(body, media_type="application/json", headers=SECURITY_HEADERS)

    def artifact(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        deps = self.app.deps
        found = deps.artifacts.get(request.path_params["art_id"])
        if found is None:
            return self.render(
                request, "error.html", viewer, 404, title="Not found", message="There is no such artifact."
            )
        ref, content, owner = found
        if not viewer.sees_all and owner != viewer.user:
            return self.render(
                request,
                "error.html",
                viewer,
                403,
                title="Not yours",
                message="This artifact belongs to someone else's task.",
            )
        if request.query_params.get("raw"):
            return Response(
                content,
                media_type="text/plain; charset=utf-8",
                headers={**SECURITY_HEADERS, "Content-Disposition": "inline"},
            )
        return self.render(
            request, "artifact.html", viewer, ref=ref, owner=owner, text=content.decode("utf-8", "replace")
        )

    # ---- audit
    def _audit_query(self, request: Request, viewer: Viewer) -> tuple[dict[str, Any], list[str]]:
        q = request.query_params
        errors: list[str] = []
        since = until = None
        try:
            since = data.parse_when(q.get("since"), self.tz)
            until = data.parse_when(q.get("until"), self.tz, end_of_day=True)
        except ValueError:
            errors.append("Times are ISO dates or date-times, e.g. 2026-12-01 or 2026-12-01T08:30.")
        task_id = int(q["task"]) if q.get("task", "").isdigit() else None
        limit = int(q["limit"]) if q.get("limit", "").isdigit() else self.config.page_size
        page = max(1, int(q["page"])) if q.get("page", "").isdigit() else 1
        limit = min(limit, 1000)
        filters = dict(
            actor=(q.get("user") or None) if viewer.sees_all else viewer.user,
            tool=q.get("tool") or None,
            outcome=q.get("outcome") or None,
            kind=q.get("kind") or None,
            task_id=task_id,
            since=since,
            until=until,
            text=(q.get("q") or "").strip() or None,
            workflow=(q.get("workflow") or "").strip() or None,
            limit=limit,
            offset=(page - 1) * limit,
        )
        return filters, errors

    def audit(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        filters, errors = self._audit_query(request, viewer)
        limit, offset = filters["limit"], filters["offset"]
        rows = self.app.deps.audit.search(
            **{**filters, "limit": limit + 1}
        )  # one more: is there a next page?
        q = dict(request.query_params)
        params = {k: v for k, v in q.items() if k != "page" and v}
        page = offset // limit + 1
        return self.render(
            request,
            "audit.html",
            viewer,
            rows=rows[:limit],
            first=offset + 1,
            q=q,
            errors=errors,
            json_url="/ui/audit.json?" + request.url.query,
            next_url=f"/ui/audit?{urlencode({**params, 'page': page + 1})}" if len(rows) > limit else None,
            prev_url=f"/ui/audit?{urlencode({**params, 'page': page - 1})}" if page > 1 else None,
        )

    def audit_json(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        """Exactly what `xihe audit search --json` prints for the same filters."""
        filters, errors = self._audit_query(request, viewer)
        if errors:
            return JSONResponse({"errors": errors}, status_code=400)
        rows = self.app.deps.audit.search(**filters)
        body = json.dumps(rows, ensure_ascii=False, indent=2, default=str)
        return Response(body, media_type="application/json", headers=SECURITY_HEADERS)

    # ---- alerts
    def alerts(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        deps = self.app.deps
        engine, size = deps.engine, self.config.page_size
        cfg = deps.settings.section("alerts")
        only = request.query_params.get("show", "")
        where: dict[str, list[Any]] = (
            {"reason": sorted(data.SUPPRESSED_REASONS | data.FOLDED_REASONS)} if only == "suppressed" else {}
        )
        instance = request.query_params.get("instance", "")
        if instance.isdigit():  # an alert's link to the run's trace: that instance's decisions only
            where["instance_id"] = [int(instance)]
        events = data.recent_rows(engine, "alert_event", limit=size, where=where or None)
        if events is not None:
            cols = data.pick(events[0], EVENT_COLUMNS)
            events = (["verdict", *cols], [{**r, "verdict": data.verdict(r)} for r in events[1]])
        outbox = data.recent_rows(engine, "alert_outbox", limit=size) or data.recent_rows(
            engine, "outbox", limit=size
        )
        if outbox is not None:
            outbox = (data.pick(outbox[0], OUTBOX_COLUMNS), outbox[1])
        channel_rows = data.recent_rows(engine, "alert_channel", limit=200)
        health = {str(r.get("channel")): r for r in (channel_rows[1] if channel_rows else [])}
        channels = []
        names = list(cfg.channels) if cfg is not None else []
        names += [n for n in health if n not in names]
        for name in names:
            ch = cfg.channels.get(name) if cfg is not None else None
            h = health.get(name, {})
            channels.append(
                {
                    "name": name,
                    "rate": ch.rate_limit_per_minute if ch is not None else None,
                    "email_to": ", ".join(ch.email_to) if ch is not None and ch.email_to else "smtp admins",
                    "known": name in health,
                    "mode": h.get("mode", "robot"),
                    "failures": h.get("failures", 0),
                    "last_probe_at": h.get("last_probe_at"),
                }
            )
        return self.render(
            request,
            "alerts.html",
            viewer,
            configured=cfg is not None,
            events=events,
            only=only,
            outbox=outbox,
            channels=channels,
            health_table=channel_rows is not None,
            maintenance=data.maintenance_rows(deps, deps.clock()),
            pushes=deps.audit.search(kind="alert_push", limit=20),
            suppressed=data.is_suppressed,
        )

    def run(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        from xihe.agent.web.ui.runs import run_page

        return run_page(self, request, viewer, form)

    # ---- pending confirmations
    def _visible_pending(self, viewer: Viewer) -> list[Any]:
        live = self.app.deps.pending.open_for(statuses=("pending", "confirmed"))
        return live if viewer.sees_all else [p for p in live if p.user_id == viewer.user]

    def pending(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        from xihe.agent.gate import Allow, may_approve

        deps = self.app.deps
        now = deps.clock()
        rows = []
        for p in self._visible_pending(viewer):
            may = isinstance(may_approve(viewer.user, p.user_id, deps.settings.access), Allow)
            live = p.expires_at > now
            rows.append(
                {
                    "p": p,
                    "view": pending_view.view(p, deps, self.app.registry),
                    "expired": not live,
                    "minutes_left": max(0, int((p.expires_at - now).total_seconds() // 60)),
                    "can_approve": may and live and p.needs_approval and p.approved_by is None,
                    "can_reject": may and live,
                    "mine": p.user_id == viewer.user,
                }
            )
        return self.render(request, "pending.html", viewer, rows=rows)

    def _act(self, request: Request, viewer: Viewer, verb: str) -> Response:
        action_id = int(request.path_params["action_id"])
        fn = approvals.approve if verb == "approve" else approvals.reject
        result = fn(self.app.agent, approvals.Approver(viewer.user, "web", viewer.via), action_id)
        if result.status == 403:
            return self.render(request, "error.html", viewer, 403, title="Refused", message=result.message)
        return self._flash_redirect("/ui/pending", result.message, result.ok)

    def approve(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "approve")

    def reject(self, request: Request, viewer: Viewer, form: dict[str, str]) -> Response:
        return self._act(request, viewer, "reject")


def routes(app: App) -> list[BaseRoute]:
    """The /ui routes, or none when ui.yaml turns the pages off."""
    ui = WebUI(app)
    return ui.routes() if ui.config.enabled else []
