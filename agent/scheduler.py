"""The clock of background work: APScheduler runs feature jobs; all their state is in the database.

Jobs are the core ones below plus the features' (`Installed.jobs`), run with coalesce and
max_instances=1, and each run is counted in metrics. A failing job is logged and retried at its next interval.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from xihe.agent.errors import TaskStateError
from xihe.agent.feature import Job, Runtime

if TYPE_CHECKING:
    from xihe.agent.tasks import Task

log = logging.getLogger("xihe.jobs")


def run_job(app: Runtime, job: Job) -> None:
    """Run one job once, counting its outcome; exceptions are logged, never raised into the scheduler."""
    try:
        job.run(app)
    except Exception:
        app.deps.metrics.job_runs.labels(job.id, "error").inc()
        log.exception("job %s failed", job.id)
    else:
        app.deps.metrics.job_runs.labels(job.id, "ok").inc()


def all_jobs(app: Runtime) -> list[Job]:
    """The core jobs plus every feature's."""
    lease = app.settings.core.store.lease_seconds
    jobs = [
        # a dead replica's task is taken over within half a lease after its lease lapsed
        Job(
            "resume_orphans", resume_orphans, max(1.0, min(30.0, lease / 2)), run_at_start=True, follows=True
        ),
        Job("expire_confirmations", expire_confirmations, 30, follows=True),
        # a live replica keeps its tasks however long a step takes
        Job("renew_leases", renew_leases, max(1.0, lease / 3), follows=True),
    ]
    return jobs + app.installed.jobs


def follow_jobs(app: Runtime) -> list[Job]:
    """The jobs a `xihe chat` process runs while it lives: those that follow what conversations started."""
    return [job for job in all_jobs(app) if job.follows]


def start(app: Runtime, jobs: list[Job] | None = None) -> BackgroundScheduler:
    """Start a background scheduler with the given (default: all) jobs."""
    scheduler = BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})
    for job in jobs if jobs is not None else all_jobs(app):
        if job.run_at_start:
            run_job(app, job)
        scheduler.add_job(
            run_job,
            "interval",
            args=(app, job),
            seconds=job.seconds,
            id=job.id,
            misfire_grace_time=max(1, int(job.seconds)),
        )
    scheduler.start()
    return scheduler


def _take_orphan(app: Runtime, orphan: Task) -> bool:
    """Compare-and-swap the lease from the holder we saw to us: of two replicas, exactly one wins."""
    deps = app.deps
    ttl = timedelta(seconds=deps.settings.core.store.lease_seconds)
    return deps.tasks.take(orphan, deps.holder, deps.clock(), ttl)


def resume_orphans(app: Runtime) -> None:
    """Tasks a dead replica left running, or confirmed but not resumed, continue once its lease lapsed (by one replica)."""
    for orphan in app.deps.tasks.orphans(app.deps.clock()):
        if not _take_orphan(app, orphan):
            continue  # another replica took it first
        try:
            outcome = app.agent.resume(orphan.id)
        except TaskStateError:
            continue  # finished meanwhile
        if outcome.status != "busy":
            app.deps.notify(orphan.conversation, outcome.reply)


def renew_leases(app: Runtime) -> None:
    """Extend the leases of the tasks this replica is working on (it is alive)."""
    deps = app.deps
    deps.tasks.renew_all(deps.holder, deps.clock(), timedelta(seconds=deps.settings.core.store.lease_seconds))


def release_leases(app: Runtime) -> int:
    """Shutdown: give up every task lease this replica still holds, so another takes over at once."""
    return app.deps.tasks.release_all(app.deps.holder)


def expire_confirmations(app: Runtime) -> None:
    """Overdue confirmations become visibly `expired`, their tasks tell the user, and the expiry
    listeners (a channel's cards) show it at once."""
    for action in app.deps.pending.expire_due(app.deps.clock()):
        outcome = app.agent.resume(action.task_id)
        app.deps.notify(action.conversation, outcome.reply)
        expired = app.deps.pending.get(action.id) or action
        for heard in app.agent.hooks.expiry_listeners:
            try:
                heard(expired)
            except Exception:  # a card left stale must not stop the other expiries
                log.exception("expiry listener failed for action %s", action.id)
