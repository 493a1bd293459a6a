"""Who may run a matched entry, and whether it needs confirmation: a pure decision with every reason.

Roles come from the entry's `roles` list and a user -> roles mapping (the shared `config/access.yaml`
model, `config.access.AccessConfig`). The lead's gate owns the general decision for all tools; this
is the shell-specific part used by `xihe shell check` and as a defence in depth by the tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from config.access import AccessConfig
from config.shell import ShellConfig
from tools.shell.whitelist import Match

Outcome = Literal["allowed", "needs_confirmation", "denied"]


@dataclass(frozen=True)
class Decision:
    """The verdict on one matched command; `reasons` explains every rule that applied."""

    outcome: Outcome
    reasons: tuple[str, ...]
    entry: str | None = None
    argv: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        """True unless denied (a confirmation still lets the command run after the user's yes)."""
        return self.outcome != "denied"


def roles_of(access: AccessConfig | None, user: str | None) -> frozenset[str] | None:
    """The user's roles from access.yaml (unknown users get `unknown_user_roles`); None without a config."""
    if access is None:
        return None
    if user is not None and user in access.users:
        return frozenset(access.users[user].roles)
    return frozenset(access.unknown_user_roles)


def _role_environments(access: AccessConfig | None, roles: Iterable[str]) -> set[str] | None:
    if access is None:
        return None
    envs: set[str] = set()
    for r in roles:
        if r in access.roles:
            envs |= set(access.roles[r].environments)
    return envs


def decide(
    match: Match,
    *,
    user: str | None,
    roles: Iterable[str] | None,
    config: ShellConfig,
    access: AccessConfig | None = None,
    environment: str | None = None,
    sandbox_available: bool = True,
) -> Decision:
    """Allowed, needs confirmation or denied for `user` running `match` in `environment`, with reasons."""
    entry = match.entry
    denied: list[str] = []
    confirm: list[str] = []
    notes: list[str] = [f"matches entry {entry.name!r}"]
    role_set = frozenset(roles) if roles is not None else None
    if entry.roles:
        if role_set is None:
            denied.append(
                f"entry {entry.name!r} needs one of the roles {', '.join(entry.roles)}; no user roles known"
            )
        elif not role_set & set(entry.roles):
            have = ", ".join(sorted(role_set)) or "none"
            denied.append(
                f"user {user!r} has roles [{have}]; entry {entry.name!r} needs one of: "
                f"{', '.join(entry.roles)}"
            )
        else:
            notes.append(f"user {user!r} has role {sorted(role_set & set(entry.roles))[0]!r}")
    else:
        notes.append("entry is open to every user")
    if environment is not None:
        if entry.environments and environment not in entry.environments:
            denied.append(
                f"entry {entry.name!r} is enabled only in {', '.join(entry.environments)}, "
                f"not {environment!r}"
            )
        allowed_envs = _role_environments(access, role_set or ())
        if allowed_envs is not None and "*" not in allowed_envs and environment not in allowed_envs:
            denied.append(f"user {user!r} may not act on environment {environment!r}")
        production = environment in config.production_environments or (
            access is not None
            and environment in access.environments
            and access.environments[environment].production
        )
        if production:
            confirm.append(f"environment {environment!r} is production: the user confirms first")
    if entry.risk == "write":
        confirm.append(f"entry {entry.name!r} has risk: write; the user confirms first")
    if entry.writes:
        notes.append("runs on a throwaway copy of the workspace")
    if config.sandbox == "none":
        notes.append("WARNING: sandbox: none; the command would run unsandboxed")
    elif not sandbox_available:
        denied.append(f"sandbox {config.sandbox!r} is not available on this host")
    if denied:
        return Decision("denied", tuple(denied + confirm + notes), entry.name, match.argv)
    if confirm:
        return Decision("needs_confirmation", tuple(confirm + notes), entry.name, match.argv)
    return Decision("allowed", tuple(notes), entry.name, match.argv)


def user_roles_mapping(mapping: Mapping[str, Iterable[str]], user: str | None) -> frozenset[str] | None:
    """Roles from a plain user -> roles mapping (for callers without an AccessConfig)."""
    if user is None:
        return None
    return frozenset(mapping.get(user, ()))
