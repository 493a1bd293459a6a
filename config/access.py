"""`config/access.yaml`: users → roles → tools and environments. Deny by default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Environment(_Strict):
    """A place tools act on."""

    production: bool = Field(False, description="writes here also need an approver")


class Role(_Strict):
    """What a role may use."""

    tools: list[str] = Field(default_factory=list, description="tool names or globs, e.g. 'ds_*'")
    environments: list[str] = Field(default_factory=list, description="environments the role may act on")
    approver: bool = Field(False, description="may approve other users' production writes")
    admin: bool = Field(False, description="may use admin commands (/maint, config reload)")


class User(_Strict):
    """A person, keyed by the channel's verified id (WeCom userid)."""

    roles: list[str] = Field(default_factory=list)
    name: str = Field("", description="display name")
    email: str = Field("", description="for alert fallback mail")


class AccessConfig(_Strict):
    """Everything in access.yaml."""

    environments: dict[str, Environment] = Field(
        default_factory=lambda: {"test": Environment(), "prod": Environment(production=True)}
    )
    roles: dict[str, Role] = Field(default_factory=dict)
    users: dict[str, User] = Field(default_factory=dict)
    unknown_user_roles: list[str] = Field(default_factory=list, description="roles of users not listed")

    def production_environments(self) -> frozenset[str]:
        """The environments marked `production: true`: the one definition of production (lower case)."""
        return frozenset(name.lower() for name, env in self.environments.items() if env.production)
