"""One whitelisted command (`Entry`) and its typed arguments (`ArgSpec`), as written in shell.yaml.

An entry may declare `check:`, a read-only argv template over the same typed arguments that answers
"did it already happen?" after a crash interrupted the command: exit 0 = it happened (recorded as done,
not run again), exit 1 = it did not (safe to run), anything else = cannot tell (the user is asked).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.config.shell.sandbox import Limits

ENTRY_NAME = r"^[a-z][a-z0-9_]{0,63}$"


class ArgSpec(BaseModel):
    """One typed argument of an entry; the fields that apply depend on `type`."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["enum", "integer", "string", "path", "text"] = Field(
        description="enum (one of choices) | integer (min..max) | string (regex) | path (inside a workspace root) "
        "| text (free text, one argv item, never an option)"
    )
    description: str = Field(description="what the model reads about this argument")
    choices: list[str] = Field(default_factory=list, description="enum: the allowed values")
    min: int | None = Field(None, description="integer: smallest allowed value")
    max: int | None = Field(None, description="integer: largest allowed value")
    pattern: str | None = Field(None, description="string: regex the whole value must match")
    max_length: int = Field(200, ge=1, le=8192, description="longest value in characters")
    root: str | None = Field(
        None, description="path: workspace name the path must stay inside (default: the entry's)"
    )
    must_exist: bool = Field(True, description="path: the path must exist")
    kind: Literal["any", "file", "dir"] = Field("any", description="path: what the path must be")
    allow_glob: bool = Field(False, description="allow * ? [ ] { } ~ (the program itself expands them)")
    allow_shell_chars: bool = Field(
        False, description="text: allow ; & | ` $ < > (inert: no shell runs, but refused by default)"
    )
    allow_unicode: bool | None = Field(
        None, description="allow non-ASCII letters; default true for text, false otherwise"
    )
    required: bool = Field(True, description="false only for arguments inside an optional argv group")
    secret: bool = Field(False, description="redact the value in audit records and logs")

    @model_validator(mode="after")
    def _fields_fit_type(self) -> ArgSpec:
        t = self.type
        if t == "enum" and not self.choices:
            raise ValueError("an enum argument needs a non-empty 'choices' list")
        if t != "enum" and self.choices:
            raise ValueError(f"'choices' only applies to enum arguments, not {t}")
        if t != "integer" and (self.min is not None or self.max is not None):
            raise ValueError(f"'min'/'max' only apply to integer arguments, not {t}")
        if t == "integer" and (self.min is None or self.max is None):
            raise ValueError("an integer argument needs both 'min' and 'max'")
        if t == "integer" and self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        if t == "string" and not self.pattern:
            raise ValueError("a string argument needs a 'pattern' (use text for free text)")
        if t != "string" and self.pattern:
            raise ValueError(f"'pattern' only applies to string arguments, not {t}")
        if self.pattern:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern does not compile: {exc}") from None
        if t != "path" and self.root is not None:
            raise ValueError(f"'root' only applies to path arguments, not {t}")
        if t != "text" and self.allow_shell_chars:
            raise ValueError("'allow_shell_chars' only applies to text arguments")
        return self

    @property
    def unicode_ok(self) -> bool:
        """Whether non-ASCII letters are accepted (explicit setting, else only for text)."""
        return self.type == "text" if self.allow_unicode is None else self.allow_unicode


class Entry(BaseModel):
    """One whitelisted command."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=ENTRY_NAME, description="what the model passes as `command`, e.g. pytest_k")
    description: str = Field(min_length=1, description="what the model reads: when to use this command")
    argv: list[str | list[str]] = Field(
        min_length=1, description="argv template; argv[0] is a literal program"
    )
    args: dict[str, ArgSpec] = Field(
        default_factory=dict, description="typed arguments named in the template"
    )
    flags: list[str] = Field(default_factory=list, description="optional flags the caller may add at {flags}")
    workspace: str | None = Field(None, description="workspace name: the working tree bound into the sandbox")
    cwd: str = Field(".", description="working directory relative to the workspace")
    env: dict[str, str] = Field(
        default_factory=dict, description="fixed environment values; nothing else is set"
    )
    env_pass: list[str] = Field(
        default_factory=list, description="variable names copied from the bot's environment"
    )
    timeout_seconds: float = Field(
        60, gt=0, le=3600, description="wall clock; the whole process tree is killed"
    )
    output_cap_bytes: int = Field(
        16000, ge=256, le=10_000_000, description="bytes of stdout/stderr kept in the result (head and tail)"
    )
    network: bool = Field(False, description="allow network access (otherwise a fresh network namespace)")
    writes: bool = Field(
        False, description="needs a writable workspace (a throwaway copy, never the checkout)"
    )
    risk: Literal["read", "write"] = Field("read", description="write = the requesting user confirms first")
    environments: list[str] = Field(
        default_factory=list, description="environments where it is enabled; [] = all"
    )
    roles: list[str] = Field(default_factory=list, description="roles allowed to run it; [] = everyone")
    limits: Limits | None = Field(None, description="overrides the global limits for this entry")
    check: list[str | list[str]] | None = Field(
        None,
        min_length=1,
        description="read-only argv template (same arguments, no {flags}) answering 'did it happen?' after "
        "an interrupted run: exit 0 = happened, 1 = did not, anything else = cannot tell",
    )
