"""The clock of background work: APScheduler runs feature jobs; all their state is in the database.

Jobs are referenced as text ('module:function'), run with coalesce and max_instances=1, and each
run is counted in metrics. A failing job is logged and retried at its next interval.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import BackgroundScheduler

from agent.features import Job
from agent.features import modules as feature_modules

if TYPE_CHECKING:
    from agent.app import App

log = logging.getLogger("xihe.jobs")


def _resolve(ref: str) -> Callable[[App], Any]:
    module, _, name = ref.partition(":")
    func: Callable[[App], Any] = getattr(importlib.import_module(module), name)
    return func


def run_job(app: App, job: Job) -> None:
    """Run one job once, counting its outcome; exceptions are logged, never raised into the scheduler."""
    try:
        _resolve(job.func)(app)
    except Exception:
        app.deps.metrics.job_runs.labels(job.id, "error").inc()
        log.exception("job %s failed", job.id)
    else:
        app.deps.metrics.job_runs.labels(job.id, "ok").inc()


def all_jobs(app: App) -> list[Job]:
    """Every feature's jobs plus the core ones."""
    jobs = [
        Job("resume_orphans", "agent.scheduler:resume_orphans", 30, run_at_start=True),
        Job("expire_confirmations", "agent.scheduler:expire_confirmations", 30),
    ]
    for feature in feature_modules():
        if hasattr(feature, "jobs"):
            jobs.extend(feature.jobs(app))
    return jobs


def start(app: App, jobs: list[Job] | None = None) -> BackgroundScheduler:
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


def resume_orphans(app: App) -> None:
    """Tasks left running by a dead replica are continued once their lease lapsed."""
    for outcome in app.agent.resume_orphans():
        task = app.deps.tasks.get(outcome.task_id)
        app.deps.notify(task.conversation, outcome.reply)


def expire_confirmations(app: App) -> None:
    """Overdue confirmations become visibly `expired`, and their tasks tell the user."""
    for action in app.deps.pending.expire_due(app.deps.clock()):
        outcome = app.agent.resume(action.task_id)
        app.deps.notify(action.conversation, outcome.reply)
