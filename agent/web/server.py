"""`xihe serve`: one ASGI process serving the features' routes plus health, readiness and metrics,
with the scheduler started in the lifespan and stopped (waiting for running jobs) on shutdown."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent import scheduler

if TYPE_CHECKING:
    from xihe.agent.feature import Runtime

log = logging.getLogger("xihe.server")


def core_routes(app: Runtime) -> list[BaseRoute]:
    """/healthz (process up), /readyz (store reachable, config valid), /metrics (Prometheus)."""

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        problems = []
        try:
            with app.deps.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            problems.append(f"store unreachable: {type(exc).__name__}")
        for feature, reason in sorted(app.installed.problems.items()):
            problems.append(f"{feature}: {reason}")
        reload_error = app.deps.reload_error
        if reload_error:  # the files on disk are not what runs: a deploy must not count this replica ready
            problems.append(f"config reload refused: {reload_error}")
        body = {"ready": not problems, "problems": problems, "config_reload_error": reload_error}
        warnings = app.installed.warnings
        if warnings:  # configured features that are off; the replica still serves everything else
            body["warnings"] = [f"{feature}: {reason}" for feature, reason in sorted(warnings.items())]
        return JSONResponse(body, status_code=200 if not problems else 503)

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
        sched = scheduler.start(app) if with_scheduler else None
        log.info("xihe serving as %s", app.deps.holder, extra={"holder": app.deps.holder})
        try:
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
