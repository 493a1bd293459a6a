"""What every /ui page shares: the session, CSRF, templates, cookies, the audit, and the page wrapper.

Every page needs a live session (else a 303 to the login page); every POST needs the session's CSRF
token and must not come from another site (else 403); a malformed parameter is a 400 naming it.
Store calls are synchronous, so `page()` runs the session lookup and handlers in the thread pool.

Cookies are Secure and named `__Host-…` (path /) when ui.yaml's cookie_secure says so (auto: unless
`xihe serve` listens on loopback); else plain names under /ui.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Deps
from xihe.agent.feature import Installed
from xihe.agent.loop import Agent
from xihe.agent.pending import LIVE, PendingAction
from xihe.agent.registry import Registry
from xihe.agent.timefmt import offset_of, show
from xihe.agent.web.ui.auth import (
    COOKIE,
    FLASH_COOKIE,
    PRELOGIN_COOKIE,
    Signer,
    Viewer,
    cross_site,
    csrf_ok,
    login_refusal,
    secret_of,
    viewer_of,
)
from xihe.agent.web.ui.data import parse_when, readable
from xihe.agent.web.ui.params import BadParam, check_ids
from xihe.agent.web.ui.sessions import SessionStore, lapsed
from xihe.agent.web.ui.throttle import LoginThrottles
from xihe.agent.web.ui.visibility import owner_filter
from xihe.config.ui import UI_SECTION, UiConfig

HERE = Path(__file__).parent
# Pages showing unfinished tasks, the pending list and the alerts page reload themselves. No JavaScript
# (the CSP allows no script): a meta refresh, which reloads the same URL, so the query's filters stay.
REFRESH_SECONDS = 10
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

Handler = Callable[[Request, Viewer, dict[str, str]], Response]


class Host(Protocol):
    """What the pages use of the wired bot (agent.app.App fits)."""

    deps: Deps
    registry: Registry
    agent: Agent
    installed: Installed


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


async def read_form(request: Request) -> dict[str, str]:
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


class Pages:
    """The shared machinery of one bot process's pages; each page module adds its routes."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.signer = Signer(secret_of(app.deps.settings, self.config))
        self.sessions = SessionStore(app.deps.engine)
        self.throttles = LoginThrottles(app.deps.engine)
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every value is escaped unless a template says otherwise (none do)
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = self.when
        self.env.filters["duration"] = _duration
        self.env.filters["cell"] = self._cell
        self.env.filters["readable"] = readable

    @property
    def config(self) -> UiConfig:
        """ui.yaml (its defaults when the file is absent)."""
        return self.app.deps.settings.get(UI_SECTION) or UiConfig()

    @property
    def tz(self) -> ZoneInfo:
        """The team's zone: every time on every page is shown in it."""
        return ZoneInfo(self.app.deps.settings.core.timezone)

    def when(self, value: datetime | None) -> str:
        """A time in the team's zone, with its offset."""
        return show(value, self.tz)

    def _cell(self, value: Any) -> str:
        if isinstance(value, datetime):
            return self.when(value)
        if isinstance(value, dict | list):
            value = json.dumps(value, ensure_ascii=False, default=str)
        text = "" if value is None else readable(str(value), indent=None)
        return text if len(text) <= 300 else text[:300] + "…"

    @property
    def secure(self) -> bool:
        """Cookies are Secure (and `__Host-`) when this server is reached over HTTPS."""
        return self.config.secure_for(self.app.deps.listen)

    @property
    def headers(self) -> dict[str, str]:
        """The security headers of every page (with HSTS when ui.yaml sets hsts_seconds)."""
        if not self.config.hsts_seconds:
            return SECURITY_HEADERS
        return {**SECURITY_HEADERS, "Strict-Transport-Security": f"max-age={self.config.hsts_seconds}"}

    def cookie_name(self, base: str) -> str:
        """`__Host-` + name when Secure: the browser then refuses it from a sibling host or over HTTP."""
        return f"__Host-{base}" if self.secure else base

    def read_cookie(self, request: Request, base: str) -> str | None:
        return request.cookies.get(self.cookie_name(base))

    def cookie(self, response: Response, base: str, value: str, max_age: int | None = None) -> None:
        """Set one of our cookies (HttpOnly, SameSite=Lax; Secure with path / when secure, else /ui)."""
        response.set_cookie(
            self.cookie_name(base),
            value,
            max_age=max_age,
            path="/" if self.secure else "/ui",
            httponly=True,
            samesite="lax",
            secure=self.secure,
        )

    def drop_cookie(self, response: Response, base: str) -> None:
        response.delete_cookie(
            self.cookie_name(base),
            path="/" if self.secure else "/ui",
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )

    def viewer(self, request: Request) -> Viewer | None:
        """Who the session cookie says this is, or None (no session, or it has ended: it is marked so)."""
        payload = self.signer.loads("session", self.read_cookie(request, COOKIE)) or {}
        sid = payload.get("s")
        if not isinstance(sid, str):
            return None
        row = self.sessions.find(sid)
        if row is None:
            return None
        deps, cfg = self.app.deps, self.config
        now = deps.clock()
        why = lapsed(row, now, timedelta(minutes=cfg.session_idle_minutes)) or login_refusal(
            deps.settings, cfg, row.user, row.via, row.token_fp
        )
        if why is not None:
            if row.ended_at is None:
                self.sessions.end(now, why, session_id=row.id)
            return None
        self.sessions.touch(row, now)
        return viewer_of(deps.settings, row.user, self.signer.mac("csrf", sid), row.via, row.id)

    def visible_pending(self, viewer: Viewer) -> list[PendingAction]:
        """Open confirmations the viewer may see: everyone's for approvers and admins, else their own."""
        live = self.app.deps.pending.open_for(statuses=LIVE)
        only = owner_filter(viewer)
        return live if only is None else [p for p in live if p.user_id == only]

    def render(
        self, request: Request, name: str, viewer: Viewer | None, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        """A template with the page frame's values (viewer, zone, flash message, pending count)."""
        flash = self.signer.loads("flash", self.read_cookie(request, FLASH_COOKIE)) or {}
        pending_count = len(self.visible_pending(viewer)) if viewer is not None else 0
        html = self.env.get_template(name).render(
            viewer=viewer,
            zone=f"{self.tz.key} ({offset_of(self.app.deps.clock().astimezone(self.tz))})",
            refresh=ctx.pop("refresh", 0),
            refresh_why=ctx.pop("refresh_why", " while tasks run"),
            flash=flash.get("m"),
            flash_ok=flash.get("ok", True),
            pending_count=pending_count,
            path=request.url.path,
            **ctx,
        )
        response = HTMLResponse(html, status_code=status, headers=self.headers)
        if flash:
            self.drop_cookie(response, FLASH_COOKIE)
        return response

    def error(
        self, request: Request, viewer: Viewer | None, status: int, title: str, message: str
    ) -> Response:
        """The error page."""
        return self.render(request, "error.html", viewer, status, title=title, message=message)

    def flash_redirect(self, url: str, message: str, ok: bool = True) -> Response:
        """A 303 to `url` that shows `message` once."""
        response = RedirectResponse(url, status_code=303, headers=self.headers)
        self.cookie(response, FLASH_COOKIE, self.signer.dumps("flash", {"m": message, "ok": ok}), 60)
        return response

    def audit(self, viewer_user: str, outcome: str, reason: str, **detail: Any) -> None:
        """One `web` audit event."""
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

    def start_session(self, request: Request, user: str, fp: str, via: str, nxt: str) -> Response:
        """Log `user` in (a token or WeCom login succeeded): audit, a stored session, its cookie, a
        redirect to `nxt`."""
        now, cfg = self.app.deps.clock(), self.config
        client = request.client.host if request.client else ""
        sid = self.sessions.start(user, via, fp, client, now, cfg.session_hours)
        self.audit(user, "login", f"logged in to the web UI ({via})", via=via, client=client)
        response = RedirectResponse(nxt, status_code=303, headers=self.headers)
        self.cookie(response, COOKIE, self.signer.dumps("session", {"s": sid}), int(cfg.session_hours * 3600))
        self.drop_cookie(response, PRELOGIN_COOKIE)
        return response

    def bad_request(self, request: Request, viewer: Viewer | None, exc: BadParam) -> Response:
        """400 naming the parameter: JSON for the .json endpoints, else the error page."""
        if request.url.path.endswith(".json"):
            return JSONResponse({"errors": [str(exc)]}, status_code=400, headers=self.headers)
        return self.error(request, viewer, 400, "Bad request", str(exc))

    def refused_post(self, request: Request, viewer: Viewer | None, form: dict[str, str]) -> str | None:
        """Why a POST is refused before its handler runs (another site, no valid CSRF token), or None."""
        if cross_site(request.headers):
            return "This form was sent from another site."
        if viewer is not None and not csrf_ok(viewer.csrf, form.get("csrf")):
            return "This form has no valid CSRF token; reload the page and try again."
        return None

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a sync handler: session required, POSTs checked, parameters strict, in the thread pool."""

        def run(request: Request, form: dict[str, str]) -> Response:
            viewer = self.viewer(request)
            if viewer is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/ui/login?next={quote(target)}", status_code=303)
            refused = self.refused_post(request, viewer, form) if request.method == "POST" else None
            if refused is not None:
                self.audit(viewer.user, "csrf_refused", refused, path=request.url.path)
                return self.error(request, viewer, 403, "Refused", refused)
            try:
                check_ids(request.path_params)
                return handler(request, viewer, form)
            except BadParam as exc:
                return self.bad_request(request, viewer, exc)

        async def endpoint(request: Request) -> Response:
            form = await read_form(request)
            return await run_in_threadpool(run, request, form)

        return endpoint

    def query_times(self, request: Request) -> tuple[datetime | None, datetime | None, list[str]]:
        """The `since`/`until` filters of a list page, and the error to show when they do not parse."""
        q = request.query_params
        since = until = None
        for name in ("since", "until"):
            try:
                value = parse_when(q.get(name), self.tz, end_of_day=name == "until")
                if value is not None:
                    value.astimezone(UTC)  # a year-1 or year-9999 local time overflows in UTC
            except (ValueError, OverflowError):
                return (
                    None,
                    None,
                    [f"{name}: Times are ISO dates or date-times, e.g. 2026-12-01 or 2026-12-01T08:30."],
                )
            since, until = (value, until) if name == "since" else (since, value)
        return since, until, []
