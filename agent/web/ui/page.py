"""What every /ui page shares: the session, CSRF, templates, cookies, the audit, and the page wrapper.

Every page needs a session (else a 303 to the login page); every POST needs the session's CSRF
token (else 403). Store calls are synchronous, so `page()` runs handlers in the thread pool.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Deps
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
    csrf_ok,
    new_session,
    secret_of,
    session_viewer,
)
from xihe.agent.web.ui.data import parse_when, readable
from xihe.config.ui import UI_SECTION, UiConfig

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

Handler = Callable[[Request, Viewer, dict[str, str]], Response]


class Host(Protocol):
    """What the pages use of the wired bot (agent.app.App fits)."""

    deps: Deps
    registry: Registry
    agent: Agent


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

    def viewer(self, request: Request) -> Viewer | None:
        """Who the session cookie says this is, or None."""
        payload = self.signer.loads("session", request.cookies.get(COOKIE))
        return session_viewer(self.app.deps.settings, self.config, payload, self.app.deps.clock())

    def cookie(self, response: Response, name: str, value: str, max_age: int | None = None) -> None:
        """Set one of our cookies (path /ui, HttpOnly, SameSite=Lax, Secure when configured)."""
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/ui",
            httponly=True,
            samesite="lax",
            secure=self.config.cookie_secure,
        )

    def visible_pending(self, viewer: Viewer) -> list[PendingAction]:
        """Open confirmations the viewer may see: everyone's for approvers and admins, else their own."""
        live = self.app.deps.pending.open_for(statuses=LIVE)
        return live if viewer.sees_all else [p for p in live if p.user_id == viewer.user]

    def render(
        self, request: Request, name: str, viewer: Viewer | None, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        """A template with the page frame's values (viewer, zone, flash message, pending count)."""
        flash = self.signer.loads("flash", request.cookies.get(FLASH_COOKIE)) or {}
        pending_count = len(self.visible_pending(viewer)) if viewer is not None else 0
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

    def error(
        self, request: Request, viewer: Viewer | None, status: int, title: str, message: str
    ) -> Response:
        """The error page."""
        return self.render(request, "error.html", viewer, status, title=title, message=message)

    def flash_redirect(self, url: str, message: str, ok: bool = True) -> Response:
        """A 303 to `url` that shows `message` once."""
        response = RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)
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
        """Log `user` in (a token or WeCom login succeeded): audit, session cookie, redirect to `nxt`."""
        now = self.app.deps.clock()
        payload = new_session(user, fp, via, now, self.config.session_hours)
        self.audit(
            user,
            "login",
            f"logged in to the web UI ({via})",
            via=via,
            client=request.client.host if request.client else "",
        )
        response = RedirectResponse(nxt, status_code=303, headers=SECURITY_HEADERS)
        self.cookie(
            response, COOKIE, self.signer.dumps("session", payload), int(self.config.session_hours * 3600)
        )
        response.delete_cookie(PRELOGIN_COOKIE, path="/ui")
        return response

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a sync handler: session required, CSRF checked on POST, run in the thread pool."""

        async def endpoint(request: Request) -> Response:
            form = await read_form(request)
            viewer = self.viewer(request)
            if viewer is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/ui/login?next={quote(target)}", status_code=303)
            if request.method == "POST" and not csrf_ok(viewer.csrf, form.get("csrf")):
                await run_in_threadpool(
                    self.audit,
                    viewer.user,
                    "csrf_refused",
                    "form without a valid CSRF token",
                    path=request.url.path,
                )
                return self.error(
                    request,
                    viewer,
                    403,
                    "Refused",
                    "This form has no valid CSRF token; reload the page and try again.",
                )
            return await run_in_threadpool(handler, request, viewer, form)

        return endpoint

    def query_times(self, request: Request) -> tuple[datetime | None, datetime | None, list[str]]:
        """The `since`/`until` filters of a list page, and the error to show when they do not parse."""
        q = request.query_params
        since = until = None
        try:
            since = parse_when(q.get("since"), self.tz)
            until = parse_when(q.get("until"), self.tz, end_of_day=True)
        except ValueError:
            return since, until, ["Times are ISO dates or date-times, e.g. 2026-12-01 or 2026-12-01T08:30."]
        return since, until, []
