"""The DolphinScheduler service of one bot process, and the lookups every DS tool shares.

`DolphinService` is `deps.dolphin` (built by `xihe.agent.dolphin.feature`): the REST
client for tools and commands, a second client used only by the poll job (its requests are
counted in `metrics.ds_polls`), the SQL watch and catalog stores and the poll policy.

Name resolution goes catalog → `xihe.tools.dolphin.names.resolve`; an ambiguous, unknown or offline
name becomes a `ToolFailed` whose text the model (or the command reply) relays. A workflow's
environment comes from config/workflows.yaml; a workflow nobody configured is treated as
production (the strictest gate), because a wrong guess there must err on the side of an approver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from xihe.agent.errors import DolphinError, ToolFailed
from xihe.agent.registry import ToolContext
from xihe.config.dolphin import DolphinConfig, user_tokens
from xihe.config.load import Settings
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.factory import client_from_config
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.tools.dolphin.failures import explained, fail, labels, raw_or_told, release_state
from xihe.tools.dolphin.names import (
    Ambiguous,
    CatalogEntry,
    Offline,
    Resolved,
    Unknown,
    aliases_from_config,
    resolve,
    sync_catalog,
)
from xihe.tools.dolphin.schedule_store import ScheduleOffStore
from xihe.tools.dolphin.store import SqlCatalogStore, SqlWatchStore
from xihe.tools.dolphin.watch import PollPolicy, policy_from_config

if TYPE_CHECKING:
    from xihe.agent.deps import Deps

log = logging.getLogger("xihe.dolphin")

A = TypeVar("A")
C = TypeVar("C", ToolContext, "Deps")  # a run's context, or the deps of a precheck
R = TypeVar("R")
RESYNC_AFTER = timedelta(seconds=60)  # an unknown/offline name triggers a fresh sync at most this often
NOT_HERE_CODES = frozenset({50001, 50003, 10018})  # instance/definition/project not in this project


@dataclass
class DolphinService:
    """Clients, stores and policy for DolphinScheduler in one process."""

    config: DolphinConfig
    client: DolphinClient  # tools and commands
    poll_client: DolphinClient  # the poll job only: every request it sends is a counted poll request
    watches: SqlWatchStore
    catalog: SqlCatalogStore
    policy: PollPolicy
    schedules_off: ScheduleOffStore
    instance_projects: dict[int, int] = field(default_factory=dict)  # instance id → project code (immutable)
    user_clients: dict[str, DolphinClient] = field(default_factory=dict)  # user → client with their own token

    def writer(self, user: str) -> DolphinClient:
        """The client a write for `user` goes out with: their own token when they have one, else the bot's."""
        return self.user_clients.get(user, self.client)

    def asked_by(self, user: str) -> dict[str, str]:
        """Who asked for a write and whose credentials it went out with (never a token), for its result."""
        own = f"{user}'s own token" if user in self.user_clients else "the bot's credentials"
        return {"requested_by": user, "credentials": own}


def build_service(deps: Deps, cfg: DolphinConfig, env: Mapping[str, str] | None = None) -> DolphinService:
    """A service from config; ConfigError when the credentials the config names are not set."""
    client = client_from_config(cfg, env)
    poll_client = client_from_config(cfg, env, count_request=deps.metrics.ds_polls.inc)
    lease = timedelta(seconds=deps.settings.core.store.lease_seconds)
    tokens = user_tokens(cfg, deps.settings.access.users, env)
    return DolphinService(
        user_clients={user: client_from_config(cfg, env, token=token) for user, token in tokens.items()},
        config=cfg,
        client=client,
        poll_client=poll_client,
        watches=SqlWatchStore(deps.engine, deps.holder, lease),
        catalog=SqlCatalogStore(deps.engine),
        policy=policy_from_config(cfg.poll),
        schedules_off=ScheduleOffStore(deps.engine),
    )


def service_of(deps: Deps) -> DolphinService | None:
    """The configured service, or None when DolphinScheduler is off."""
    return deps.dolphin if isinstance(deps.dolphin, DolphinService) else None


def service(deps: Deps) -> DolphinService:
    """The configured service, or ToolFailed saying DolphinScheduler is not configured."""
    svc = service_of(deps)
    if svc is None:
        raise ToolFailed(fail("not_configured"))
    return svc


def told(fn: Callable[[A, C], R], argument: Callable[[A], str]) -> Callable[[A, C], R]:
    """`fn` (a tool's run or precheck) whose DolphinScheduler errors are told to people
    (`failures.explained`), naming the argument they concern; the error and its English are unchanged."""

    def wrapper(args: A, ctx: C) -> R:
        try:
            return fn(args, ctx)
        except DolphinError as exc:
            deps = ctx.deps if isinstance(ctx, ToolContext) else ctx
            svc = service_of(deps)
            explained(exc, svc.config if svc else None, argument(args))
            raise

    return wrapper


# ---- the name catalog ------------------------------------------------------------------------


def sync(svc: DolphinService, now: datetime) -> list[CatalogEntry]:
    """Read every definition's name, code and release state from DS into the catalog store."""
    entries = sync_catalog(svc.client, svc.config.projects)
    svc.catalog.replace(entries, now)
    return svc.catalog.entries()


def catalog(svc: DolphinService, now: datetime) -> list[CatalogEntry]:
    """The synced catalog; synced on first use when the job has not run yet."""
    entries = svc.catalog.entries()
    if entries:
        return entries
    try:
        return sync(svc, now)
    except DolphinError as exc:
        error = raw_or_told(explained(exc, svc.config, "workflow list"))
        raise ToolFailed(fail("catalog_unreadable", error=error)) from exc


def resolve_workflow(deps: Deps, name: str, project: str = "", *, offline_ok: bool = False) -> CatalogEntry:
    """The one online workflow `name` means, or ToolFailed listing choices, closest names or why not
    (`offline_ok`: an offline one too, for what DolphinScheduler allows on it, such as its schedule)."""
    svc = service(deps)
    now = deps.clock()
    aliases = aliases_from_config(deps.settings.workflows)
    result = resolve(name, catalog(svc, now), aliases, project=project or None)
    synced = svc.catalog.synced_at()
    if isinstance(result, Unknown | Offline) and (synced is None or now - synced >= RESYNC_AFTER):
        try:  # maybe it was created or released since the last sync
            result = resolve(name, sync(svc, now), aliases, project=project or None)
        except DolphinError as exc:
            log.warning("catalog resync failed: %s", exc)
    where = fail("in_project", project=project) if project else ""
    if isinstance(result, Resolved):
        return result.entry
    if isinstance(result, Offline):
        e = result.entry
        if offline_ok:
            return e
        state = release_state(e)
        raise ToolFailed(fail("offline", workflow=e.name, project=e.project, code=e.code, state=state))
    if isinstance(result, Ambiguous):
        options = labels(result.candidates)
        raise ToolFailed(fail("ambiguous", name=name, where=where, options=options))
    hint = fail("closest", names=labels(result.closest)) if result.closest else ""
    raise ToolFailed(fail("unknown", name=name, where=where, hint=hint))


def environment_of_workflow(settings: Settings, project: str, name: str) -> str:
    """The workflow's environment from workflows.yaml; unconfigured ones count as production."""
    for wf in settings.workflows.workflows:
        if wf.name == name and wf.project == project:
            return wf.environment
    production = [n for n, e in settings.access.environments.items() if e.production]
    return production[0] if production else ""


# ---- instances -------------------------------------------------------------------------------


def project_code_of(deps: Deps, project: str) -> int:
    """The code of a project named in chat (from the catalog, else asked from DS)."""
    svc = service(deps)
    for e in svc.catalog.entries():
        if e.project == project:
            return e.project_code
    try:
        return svc.client.project_code(project)
    except DolphinError as exc:
        error = raw_or_told(explained(exc, svc.config, f"project {project!r}"))
        raise ToolFailed(fail("no_project", project=project, error=error)) from exc


def locate(deps: Deps, instance_id: int, project: str = "") -> Instance:
    """Read one workflow instance, finding its project from the args, the watches or the catalog."""
    svc = service(deps)
    if project:
        codes = [project_code_of(deps, project)]
    elif instance_id in svc.instance_projects:
        codes = [svc.instance_projects[instance_id]]
    else:
        watch = svc.watches.with_instance(instance_id)
        codes = [watch.project_code] if watch else []
        for e in catalog(svc, deps.clock()):
            if e.project_code not in codes:
                codes.append(e.project_code)
    for code in codes:
        try:
            inst = svc.client.get_instance(code, instance_id)
        except DolphinError as exc:
            if exc.code in NOT_HERE_CODES:
                continue
            explained(exc, svc.config, f"instance_id {instance_id}")
            raise
        svc.instance_projects[instance_id] = code
        return inst
    where = fail("project", project=project) if project else fail("any_project")
    raise ToolFailed(fail("no_instance", id=instance_id, where=where))


def workflow_of(deps: Deps, inst: Instance) -> CatalogEntry | None:
    """The catalog entry of an instance's definition, when the catalog knows it."""
    svc = service(deps)
    for e in svc.catalog.entries():
        if e.code == inst.definition_code:
            return e
    return None


def environment_of_instance(deps: Deps, inst: Instance, project: str = "") -> str:
    """Where acting on an instance lands: its workflow's environment."""
    entry = workflow_of(deps, inst)
    if entry is None:
        return environment_of_workflow(deps.settings, project, inst.name)
    return environment_of_workflow(deps.settings, entry.project, entry.name)
