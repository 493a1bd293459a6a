"""The gate: may this user make this call here, and who must say yes first? A pure function.

    decide(tool, risk, environment, who, access, scope) -> Allow | Confirm | Deny

Deny by default. A read is allowed when a role of the user grants the tool on that environment.
A call may be narrowed further by a per-call `Scope` (a shell entry's `roles` and `environments`).
A write needs the requester's confirmation; a write on a production environment also needs an
approver: a different user whose role has `approver: true`. Every decision carries its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch

from xihe.config.access import AccessConfig


@dataclass(frozen=True)
class Who:
    """The caller as the channel verified them, with roles from config."""

    user: str
    roles: tuple[str, ...]
    known: bool


@dataclass(frozen=True)
class Allow:
    reason: str


@dataclass(frozen=True)
class Confirm:
    reason: str
    needs_approval: bool = False


@dataclass(frozen=True)
class Deny:
    reason: str


Decision = Allow | Confirm | Deny


@dataclass(frozen=True)
class Scope:
    """Per-call narrowing of a tool's grant, e.g. a shell entry's `roles` and `environments`."""

    name: str  # what is narrowed, for the reason, e.g. "entry 'rollout'"
    roles: tuple[str, ...] = ()  # the user also needs one of these roles; () = no extra role
    environments: tuple[str, ...] = ()  # the call is enabled only here; () = wherever the grant allows


def identify(user: str, access: AccessConfig) -> Who:
    """Roles of a verified user id; unknown users get `unknown_user_roles` only."""
    if user in access.users:
        return Who(user, tuple(access.users[user].roles), True)
    return Who(user, tuple(access.unknown_user_roles), False)


def _roles_text(who: Who) -> str:
    label = ", ".join(who.roles) if who.roles else "no roles"
    return f"{who.user} ({label}{'' if who.known else ', unknown user'})"


def decide(
    tool: str, risk: str, environment: str, who: Who, access: AccessConfig, scope: Scope | None = None
) -> Decision:
    """Decide one call. `environment` is '' for tools that act on no environment."""
    granting = [
        r for r in who.roles if r in access.roles and any(fnmatch(tool, g) for g in access.roles[r].tools)
    ]
    if not granting:
        return Deny(f"no role of {_roles_text(who)} grants the tool {tool}")
    if scope is not None and scope.roles and not set(who.roles) & set(scope.roles):
        return Deny(
            f"{_roles_text(who)} may not run {scope.name}: it needs one of the roles {', '.join(scope.roles)}"
        )
    if scope is not None and scope.environments and environment not in scope.environments:
        return Deny(
            f"{scope.name} is enabled only in {', '.join(scope.environments)}, not {environment or 'without an environment'}"
        )
    production = False
    if environment:
        env = access.environments.get(environment)
        if env is None:
            return Deny(f"{tool} would act on unknown environment {environment!r}")
        granting = [
            r
            for r in granting
            if environment in access.roles[r].environments or "*" in access.roles[r].environments
        ]
        if not granting:
            return Deny(f"{_roles_text(who)} may use {tool} but not on environment {environment}")
        production = env.production
    where = f" on {environment}" if environment else ""
    if risk == "read":
        return Allow(f"read tool {tool}{where} allowed by role {granting[0]}")
    if production:
        return Confirm(
            f"{tool} writes to production environment {environment}: it needs your /confirm "
            "and an approver's /approve",
            needs_approval=True,
        )
    return Confirm(f"{tool} is a write{where}: it runs only after your /confirm")


def may_approve(approver: str, requester: str, access: AccessConfig) -> Decision:
    """An approver is a different user holding a role with `approver: true`."""
    if approver == requester:
        return Deny("the requester cannot approve their own production write")
    who = identify(approver, access)
    if not any(r in access.roles and access.roles[r].approver for r in who.roles):
        return Deny(f"{_roles_text(who)} has no approver role")
    return Allow(f"{approver} holds an approver role")


def is_admin(who: Who, access: AccessConfig) -> bool:
    """Admin commands (maintenance windows, config reload) need a role with `admin: true`."""
    return any(r in access.roles and access.roles[r].admin for r in who.roles)


def visible(tool: str, risk: str, environments: tuple[str, ...], who: Who, access: AccessConfig) -> bool:
    """Whether /help should list the tool: some environment (or none) would not deny it."""
    envs = environments or ("",)
    if environments == ("*",):
        envs = tuple(access.environments)
    return any(not isinstance(decide(tool, risk, e, who, access), Deny) for e in envs)
