"""`xihe serve`: one ASGI process serving the features' routes plus health, readiness and metrics,
with the scheduler started in the lifespan and stopped (waiting for running jobs) on shutdown."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent import scheduler

if TYPE_CHECKING:
    from xihe.agent.deps import Deps
    from xihe.agent.feature import Installed, Runtime


class Replica(Protocol):
    """What readiness reads of the wired bot."""

    deps: Deps
    installed: Installed


log = logging.getLogger("xihe.server")


@dataclass(frozen=True)
class Problem:
    """One reason a replica is not ready (or a feature is off): a public line and the detailed one."""

    public: str  # for anyone: no paths, no secret or variable names
    detail: str  # for admins (/ui/readyz) and the log


def readiness(app: Replica) -> tuple[list[Problem], list[Problem]]:
    """(problems: not ready, warnings: configured features that are off)."""
    problems = []
    try:
        with app.deps.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        problems.append(Problem("store unreachable", f"store unreachable: {type(exc).__name__}"))
    for feature, reason in sorted(app.installed.problems.items()):
        problems.append(Problem(f"{feature}: not ready", f"{feature}: {reason}"))
    reload_error = app.deps.reload_error
    if reload_error:  # the files on disk are not what runs: a deploy must not count this replica ready
        problems.append(Problem("config reload refused", f"config reload refused: {reload_error}"))
    warnings = [
        Problem(f"{f}: off", f"{f}: {reason}") for f, reason in sorted(app.installed.warnings.items())
    ]
    return problems, warnings


def readiness_body(app: Replica, *, detailed: bool) -> tuple[dict[str, Any], int]:
    """The /readyz JSON and status; `detailed` (admins only) names the reasons."""
    problems, warnings = readiness(app)
    pick = (lambda p: p.detail) if detailed else (lambda p: p.public)
    reload_error = app.deps.reload_error
    if reload_error and not detailed:
        reload_error = "refused; the reason is in the server log and on /ui/readyz for admins"
    body: dict[str, Any] = {
        "ready": not problems,
        "problems": [pick(p) for p in problems],
        "config_reload_error": reload_error,
    }
    if warnings:  # configured features that are off; the replica still serves everything else
        body["warnings"] = [pick(w) for w in warnings]
    return body, 200 if not problems else 503


def core_routes(app: Runtime) -> list[BaseRoute]:
    """/healthz (process up), /readyz (store reachable, config valid; reasons without detail, as
    anyone may ask), /metrics (Prometheus)."""

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        body, status = await run_in_threadpool(readiness_body, app, detailed=False)
        return JSONResponse(body, status_code=status)

    async def metrics(request: Request) -> Response:
        return Response(app.deps.metrics.render(), media_type="text/plain; version=0.0.4")

    return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)]


def create_server(app: Runtime, *, with_scheduler: bool = True) -> Starlette:
    """The ASGI application of one replica."""
    routes = core_routes(app)
    for make_routes in app.installed.routes:
        routes.extend(make_routes(app))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        for start in app.installed.startup:
            start(app)
        if app.agent.llm is not None:  # the model client off the first turns' path (see LLMClient.warm)
            threading.Thread(target=app.agent.llm.warm, name="llm-warm", daemon=True).start()
        sched = scheduler.start(app) if with_scheduler else None
        log.info("xihe serving as %s", app.deps.holder, extra={"holder": app.deps.holder})
        try:
            async with contextlib.AsyncExitStack() as contexts:
                for enter in app.installed.contexts:
                    await contexts.enter_async_context(enter(app))
                yield
        finally:
            # stop taking work (channels hand queued messages over), let running jobs finish, then
            # give up the leases of whatever is still in flight so another replica continues at once
            for stop in reversed(app.installed.shutdown):
                await run_in_threadpool(stop, app)
            if sched is not None:
                await run_in_threadpool(sched.shutdown, True)
            released = scheduler.release_leases(app)
            log.info("xihe stopped", extra={"holder": app.deps.holder, "leases_released": released})
            app.deps.engine.dispose()

    return Starlette(routes=routes, lifespan=lifespan)
