"""The gate: may this user make this call here, and who must say yes first? A pure function.

    decide(tool, risk, environment, who, access, scope) -> Allow | Confirm | Deny

Deny by default. A read is allowed when a role of the user grants the tool on that environment.
A call may be narrowed further by a per-call `Scope` (a shell entry's `roles` and `environments`).
A write needs the requester's confirmation; a write on a production environment also needs an
approver: a different user whose role has `approver: true`. Every decision carries its reason as a
code with arguments: `reason` is the English text the audit and the model read, `text(lang)` the same
reason for people in their language (REASONS).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch

from xihe.agent.i18n import Catalog, Lang, say
from xihe.config.access import AccessConfig

REASONS: Catalog = {
    "no_grant": {
        "en": "no role of {who} grants the tool {tool}",
        "zh": "{who}没有哪个角色允许使用工具 {tool}",
    },
    "scope_role": {
        "en": "{who} may not run {scope}: it needs one of the roles {roles}",
        "zh": "{who}不能执行{scope}：需要以下角色之一：{roles}",
    },
    "scope_env": {
        "en": "{scope} is enabled only in {environments}, not {environment}",
        "zh": "{scope}只在 {environments} 启用，不在 {environment}",
    },
    "scope_no_env": {
        "en": "{scope} is enabled only in {environments}, not without an environment",
        "zh": "{scope}只在 {environments} 启用，不能在没有环境时执行",
    },
    "unknown_env": {
        "en": "{tool} would act on unknown environment '{environment}'",
        "zh": "{tool} 要操作的环境“{environment}”不存在",
    },
    "env_not_granted": {
        "en": "{who} may use {tool} but not on environment {environment}",
        "zh": "{who}可以使用 {tool}，但不能在环境 {environment} 上使用",
    },
    "read": {"en": "read tool {tool} allowed by role {role}", "zh": "只读工具 {tool}，角色 {role} 允许"},
    "read_on": {
        "en": "read tool {tool} on {environment} allowed by role {role}",
        "zh": "只读工具 {tool}（{environment}），角色 {role} 允许",
    },
    "production_write": {
        "en": "{tool} writes to production environment {environment}: it needs your /confirm "
        "and an approver's /approve",
        "zh": "{tool} 会写入生产环境 {environment}：需要你的 /confirm，以及审批人的 /approve",
    },
    "write": {
        "en": "{tool} is a write: it runs only after your /confirm",
        "zh": "{tool} 是写操作：你 /confirm 之后才会执行",
    },
    "write_on": {
        "en": "{tool} is a write on {environment}: it runs only after your /confirm",
        "zh": "{tool} 是在 {environment} 上的写操作：你 /confirm 之后才会执行",
    },
    "interrupted": {
        "en": "`{tool}` was interrupted and may or may not have taken effect",
        "zh": "`{tool}` 执行时被中断，可能生效了，也可能没有",
    },
    "own_approval": {
        "en": "the requester cannot approve their own production write",
        "zh": "发起人不能批准自己的生产环境写操作",
    },
    "not_approver": {"en": "{who} has no approver role", "zh": "{who}没有审批人角色"},
    "approver": {"en": "{approver} holds an approver role", "zh": "{approver} 有审批人角色"},
    # who the caller is, as the reasons above name them
    "who": {"en": "{user} ({roles})", "zh": "{user}（角色：{roles}）"},
    "who_none": {"en": "{user} (no roles)", "zh": "{user}（没有角色）"},
    "who_unknown": {"en": "{user} ({roles}, unknown user)", "zh": "{user}（未登记的用户，角色：{roles}）"},
    "who_unknown_none": {"en": "{user} (no roles, unknown user)", "zh": "{user}（未登记的用户，没有角色）"},
    # what a Scope narrows
    "entry": {"en": "entry '{name}'", "zh": "条目“{name}”"},
}


@dataclass(frozen=True)
class Who:
    """The caller as the channel verified them, with roles from config."""

    user: str
    roles: tuple[str, ...]
    known: bool


@dataclass(frozen=True)
class Reasoned:
    """A decision's reason: a REASONS code and its arguments (a `who` is the caller's roles, rendered)."""

    code: str
    args: tuple[tuple[str, object], ...] = ()

    @property
    def reason(self) -> str:
        """The reason in English, for the audit record and the model."""
        return self.text("en")

    def text(self, lang: Lang) -> str:
        """The reason for people reading `lang`."""
        values = {k: _who(v, lang) if isinstance(v, Who) else v for k, v in self.args}
        if "scope" in values and isinstance(values["scope"], str):
            values["scope"] = say(REASONS, "entry", lang, name=values["scope"])
        return say(REASONS, self.code, lang, **values)


@dataclass(frozen=True)
class Allow(Reasoned):
    pass


@dataclass(frozen=True)
class Confirm(Reasoned):
    needs_approval: bool = False


@dataclass(frozen=True)
class Deny(Reasoned):
    pass


Decision = Allow | Confirm | Deny


@dataclass(frozen=True)
class Scope:
    """Per-call narrowing of a tool's grant, e.g. a shell entry's `roles` and `environments`."""

    name: str  # the shell entry narrowed, named in the reason, e.g. "rollout"
    roles: tuple[str, ...] = ()  # the user also needs one of these roles; () = no extra role
    environments: tuple[str, ...] = ()  # the call is enabled only here; () = wherever the grant allows


def identify(user: str, access: AccessConfig) -> Who:
    """Roles of a verified user id; unknown users get `unknown_user_roles` only."""
    if user in access.users:
        return Who(user, tuple(access.users[user].roles), True)
    return Who(user, tuple(access.unknown_user_roles), False)


def _who(who: Who, lang: Lang) -> str:
    key = ("who" if who.known else "who_unknown") + ("" if who.roles else "_none")
    return say(REASONS, key, lang, user=who.user, roles=", ".join(who.roles))


def _args(**values: object) -> tuple[tuple[str, object], ...]:
    return tuple(values.items())


def decide(
    tool: str, risk: str, environment: str, who: Who, access: AccessConfig, scope: Scope | None = None
) -> Decision:
    """Decide one call. `environment` is '' for tools that act on no environment."""
    granting = [
        r for r in who.roles if r in access.roles and any(fnmatch(tool, g) for g in access.roles[r].tools)
    ]
    if not granting:
        return Deny("no_grant", _args(who=who, tool=tool))
    if scope is not None and scope.roles and not set(who.roles) & set(scope.roles):
        return Deny("scope_role", _args(who=who, scope=scope.name, roles=", ".join(scope.roles)))
    if scope is not None and scope.environments and environment not in scope.environments:
        listed = ", ".join(scope.environments)
        if not environment:
            return Deny("scope_no_env", _args(scope=scope.name, environments=listed))
        return Deny("scope_env", _args(scope=scope.name, environments=listed, environment=environment))
    production = False
    if environment:
        env = access.environments.get(environment)
        if env is None:
            return Deny("unknown_env", _args(tool=tool, environment=environment))
        granting = [
            r
            for r in granting
            if environment in access.roles[r].environments or "*" in access.roles[r].environments
        ]
        if not granting:
            return Deny("env_not_granted", _args(who=who, tool=tool, environment=environment))
        production = env.production
    on = _args(tool=tool, environment=environment) if environment else _args(tool=tool)
    if risk == "read":
        return Allow("read_on" if environment else "read", (*on, ("role", granting[0])))
    if production:
        return Confirm("production_write", on, needs_approval=True)
    return Confirm("write_on" if environment else "write", on)


def may_approve(approver: str, requester: str, access: AccessConfig) -> Decision:
    """An approver is a different user holding a role with `approver: true`."""
    if approver == requester:
        return Deny("own_approval")
    who = identify(approver, access)
    if not any(r in access.roles and access.roles[r].approver for r in who.roles):
        return Deny("not_approver", _args(who=who))
    return Allow("approver", _args(approver=approver))


def interrupted(tool: str) -> Confirm:
    """A call that was interrupted: only a fresh yes runs it again."""
    return Confirm("interrupted", _args(tool=tool))


def is_admin(who: Who, access: AccessConfig) -> bool:
    """Admin commands (maintenance windows, config reload) need a role with `admin: true`."""
    return any(r in access.roles and access.roles[r].admin for r in who.roles)


def visible(tool: str, risk: str, environments: tuple[str, ...], who: Who, access: AccessConfig) -> bool:
    """Whether /help should list the tool: some environment (or none) would not deny it."""
    envs = environments or ("",)
    if environments == ("*",):
        envs = tuple(access.environments)
    return any(not isinstance(decide(tool, risk, e, who, access), Deny) for e in envs)
