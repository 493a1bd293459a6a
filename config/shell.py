"""`config/shell.yaml`: the whitelisted shell commands (argv templates with typed arguments) and the sandbox.

The model never writes a command line: it names an entry and fills its typed arguments. An argv
template item is a literal (`log`), a whole placeholder (`{path}`), a literal with one embedded
placeholder (`--since={date}`), an optional group (a nested list, kept only when every argument in
it is given: `["-k", "{expr}"]`), or the marker `{flags}` where the allowed optional flags go.

An entry may declare `check:`, a read-only argv template over the same typed arguments that answers
"did it already happen?" after a crash interrupted the command: exit 0 = it happened (recorded as done,
not run again), exit 1 = it did not (safe to run), anything else = cannot tell (the user is asked).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xihe.agent.errors import ConfigErrors
from xihe.config.yamlmodel import config_error, load_model

PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
FLAGS_MARKER = "{flags}"
ENTRY_NAME = r"^[a-z][a-z0-9_]{0,63}$"

# Variables that change what a program loads or runs; never settable or passed through.
DANGEROUS_ENV_PREFIXES = ("LD_", "DYLD_", "GCONV_", "MALLOC_", "PYTHON", "PERL5", "PERLLIB", "RUBY", "GIT_")
DANGEROUS_ENV_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "IFS",
        "CDPATH",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "LOCALDOMAIN",
        "NLSPATH",
        "TMPDIR",
        "KUBECONFIG_EXEC",
        "SSH_ASKPASS",
        "EDITOR",
        "VISUAL",
        "PAGER",
    }
)


# Even an admin's fixed value for these would be a foot-gun: they inject code into every process.
LOADER_ENV_PREFIXES = ("LD_", "DYLD_", "GCONV_")
LOADER_ENV_NAMES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PERL5OPT",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "IFS",
    }
)


def dangerous_env(name: str) -> bool:
    """True when an environment variable name can make a program load or run other code."""
    upper = name.upper()
    return upper in DANGEROUS_ENV_NAMES or upper.startswith(DANGEROUS_ENV_PREFIXES)


def loader_env(name: str) -> bool:
    """True for the variables that inject code into every process; not even fixed values are allowed."""
    upper = name.upper()
    return upper in LOADER_ENV_NAMES or upper.startswith(LOADER_ENV_PREFIXES)


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


class Limits(BaseModel):
    """Resource limits applied to every sandboxed command."""

    model_config = ConfigDict(extra="forbid")

    cpu_seconds: int = Field(60, ge=1, le=3600, description="CPU seconds (RLIMIT_CPU) per process")
    memory_mb: int = Field(
        2048,
        ge=64,
        le=65536,
        description="memory of the whole command (cgroup memory.max) and address space of each of its "
        "processes (RLIMIT_AS), MB; without a cgroup only the per-process limit holds",
    )
    processes: int = Field(
        128,
        ge=4,
        le=4096,
        description="processes of the command (cgroup pids.max, and RLIMIT_NPROC of its own uid)",
    )
    file_size_mb: int = Field(
        64, ge=1, le=65536, description="largest file a command may write (RLIMIT_FSIZE), MB"
    )
    tmp_size_mb: int = Field(256, ge=1, le=65536, description="size of the private /tmp, MB")
    max_output_mb: int = Field(
        64, ge=1, le=4096, description="stdout+stderr after which the command is killed (kept: head and tail)"
    )


class UidRange(BaseModel):
    """The uids (and same-numbered gids) handed out to running commands, one per command."""

    model_config = ConfigDict(extra="forbid")

    first: int = Field(61000, ge=1, le=4_294_000_000, description="first uid of the range")
    count: int = Field(
        1000, ge=1, le=65536, description="how many; also the most commands that can run at once"
    )


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


class ShellConfig(BaseModel):
    """The whole shell whitelist and sandbox settings."""

    model_config = ConfigDict(extra="forbid")

    sandbox: Literal["bwrap", "docker", "none"] = Field(
        "bwrap", description="bwrap (default) | docker | none (explicit opt-out: runs unsandboxed, loudly)"
    )
    docker_image: str = Field("debian:bookworm-slim", description="image for the docker back end")
    workspaces: dict[str, str] = Field(
        default_factory=dict, description="name -> absolute path of a working tree"
    )
    ro_binds: list[str] = Field(
        default_factory=list, description="extra absolute paths bound read-only (e.g. a Python installation)"
    )
    run_as_uids: UidRange = Field(
        default_factory=lambda: UidRange.model_validate({}),
        description="each running command gets its own uid (= gid) from this range",
    )
    cgroup: Literal["auto", "required", "none"] = Field(
        "auto",
        description="auto: limit each command's total memory and processes with a cgroup when this host "
        "offers one, else fall back to per-process rlimits (reported loudly) | required: refuse to run "
        "commands without a cgroup | none: per-process rlimits only",
    )
    limits: Limits = Field(
        default_factory=lambda: Limits.model_validate({}), description="global resource limits"
    )
    artifact_cap_mb: int = Field(16, ge=1, le=1024, description="largest full-output artifact kept, MB")
    max_argv_chars: int = Field(8192, ge=64, le=131072, description="longest whole argv in characters")
    entries: list[Entry] = Field(default_factory=list)
    # Keys that were moved or replaced: present only to name the new place in a clear error.
    production_environments: None = Field(None, exclude=True, description="removed: see access.yaml")
    run_as_uid: None = Field(None, exclude=True, description="removed: see run_as_uids")
    run_as_gid: None = Field(None, exclude=True, description="removed: see run_as_uids")

    @field_validator("production_environments", mode="before")
    @classmethod
    def _production_moved(cls, value: Any) -> None:
        raise ValueError(
            "moved to access.yaml: mark an environment `production: true` under `environments:` there "
            "(one place decides production for every tool), then delete this key"
        )

    @field_validator("run_as_uid", "run_as_gid", mode="before")
    @classmethod
    def _uid_replaced(cls, value: Any) -> None:
        raise ValueError(
            "replaced by `run_as_uids: {first: N, count: M}`: each command now runs as its own uid "
            "(and gid) from that range"
        )

    @classmethod
    def load_yaml(cls, text: str, name: str) -> ShellConfig:
        """Validation plus cross-checks (what `xihe.config.load.load_dir` calls for shell.yaml)."""
        return load_shell_config(text, name)


def template_args(item: str | list[str]) -> list[str]:
    """Placeholder names in one template item (a group yields those of all its parts)."""
    parts = item if isinstance(item, list) else [item]
    return [m.group(1) for p in parts if p != FLAGS_MARKER for m in PLACEHOLDER.finditer(p)]


def _item_problem(item: str, args: dict[str, ArgSpec]) -> str | None:
    """Why one string template item is malformed, or None."""
    if item == FLAGS_MARKER:
        return None
    found = PLACEHOLDER.findall(item)
    if len(found) > 1:
        return f"item {item!r} has {len(found)} placeholders; at most one per item"
    if "{" in PLACEHOLDER.sub("", item) or "}" in PLACEHOLDER.sub("", item):
        return f"item {item!r} has a brace that is not a placeholder like {{name}}"
    if found and found[0] not in args:
        return f"placeholder {{{found[0]}}} has no entry in 'args'"
    return None


def _entry_problems(i: int, e: Entry, cfg: ShellConfig) -> list[tuple[tuple[Any, ...], str]]:
    """Cross-checks of one entry: (loc, problem) pairs."""
    out: list[tuple[tuple[Any, ...], str]] = []
    loc: tuple[Any, ...] = ("entries", i)
    first = e.argv[0]
    if not isinstance(first, str) or PLACEHOLDER.search(first) or first == FLAGS_MARKER:
        out.append(((*loc, "argv"), "argv[0] must be a literal program name"))
    used: list[str] = []
    markers = 0
    for j, item in enumerate(e.argv):
        parts = item if isinstance(item, list) else [item]
        if isinstance(item, list):
            if not item:
                out.append(((*loc, "argv", j), "an optional group must not be empty"))
            if not template_args(item):
                out.append(((*loc, "argv", j), "an optional group needs at least one placeholder"))
            if FLAGS_MARKER in item:
                out.append(((*loc, "argv", j), "{flags} cannot be inside an optional group"))
            for name in template_args(item):
                if name in e.args and e.args[name].required:
                    out.append(
                        ((*loc, "args", name), "an argument inside an optional group needs required: false")
                    )
        else:
            markers += item == FLAGS_MARKER
            for name in template_args(item):
                if name in e.args and not e.args[name].required:
                    out.append(
                        ((*loc, "args", name), "required: false is only allowed inside an optional group")
                    )
        for part in parts:
            problem = _item_problem(part, e.args)
            if problem:
                out.append(((*loc, "argv", j), problem))
        used += template_args(item)
    for name in e.args:
        if name == "flags":
            out.append(((*loc, "args", name), "'flags' is reserved for the optional flags"))
        elif used.count(name) == 0:
            out.append(((*loc, "args", name), "argument is declared but not used in argv"))
        elif used.count(name) > 1:
            out.append(((*loc, "args", name), "argument is used more than once in argv"))
    if e.flags and markers != 1:
        out.append(((*loc, "flags"), "entries with flags need exactly one {flags} item in argv"))
    if not e.flags and markers:
        out.append(((*loc, "argv"), "{flags} is used but 'flags' is empty"))
    for f in e.flags:
        if not re.fullmatch(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.=:-]*", f):
            out.append(((*loc, "flags"), f"flag {f!r} must look like -x or --name[=value]"))
    if len(set(e.flags)) != len(e.flags):
        out.append(((*loc, "flags"), "duplicate flags"))
    if e.workspace is not None and e.workspace not in cfg.workspaces:
        out.append(
            ((*loc, "workspace"), f"unknown workspace {e.workspace!r}; known: {sorted(cfg.workspaces)}")
        )
    cwd = PurePosixPath(e.cwd)
    if cwd.is_absolute() or ".." in cwd.parts:
        out.append(((*loc, "cwd"), "cwd must be relative to the workspace and must not contain '..'"))
    if e.cwd != "." and e.workspace is None:
        out.append(((*loc, "cwd"), "cwd needs a workspace"))
    for name, spec in e.args.items():
        if spec.type == "path":
            root = spec.root or e.workspace
            if root is None:
                out.append(((*loc, "args", name), "a path argument needs 'root' or an entry workspace"))
            elif root not in cfg.workspaces:
                out.append(((*loc, "args", name, "root"), f"unknown workspace {root!r}"))
    for key in e.env:
        if loader_env(key) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out.append(((*loc, "env", key), f"{key} cannot be set: it injects code into programs"))
    for key in e.env_pass:
        if dangerous_env(key) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out.append(
                ((*loc, "env_pass"), f"{key} cannot be passed through: it changes what programs load or run")
            )
    if e.writes and e.risk != "write":
        out.append(((*loc, "risk"), "an entry that writes must have risk: write"))
    if e.writes and e.workspace is None:
        out.append(((*loc, "writes"), "an entry that writes needs a workspace (it gets a throwaway copy)"))
    if e.check is not None:
        out += _check_problems(loc, e)
    return out


def _check_problems(loc: tuple[Any, ...], e: Entry) -> list[tuple[tuple[Any, ...], str]]:
    """The `check:` template: a literal program, the entry's own arguments, no {flags}."""
    assert e.check is not None
    out: list[tuple[tuple[Any, ...], str]] = []
    first = e.check[0]
    if not isinstance(first, str) or PLACEHOLDER.search(first) or first == FLAGS_MARKER:
        out.append(((*loc, "check"), "check[0] must be a literal program name"))
    for j, item in enumerate(e.check):
        parts = item if isinstance(item, list) else [item]
        if FLAGS_MARKER in parts:
            out.append(((*loc, "check", j), "{flags} cannot be used in check"))
            continue
        if isinstance(item, list) and not template_args(item):
            out.append(((*loc, "check", j), "an optional group needs at least one placeholder"))
        for part in parts:
            problem = _item_problem(part, e.args)
            if problem:
                out.append(((*loc, "check", j), problem.replace("in 'args'", "in the entry's 'args'")))
        if not isinstance(item, list):
            for name in template_args(item):
                if name in e.args and not e.args[name].required:
                    out.append(((*loc, "check", j), f"{{{name}}} is optional: put it in an optional group"))
    return out


def cross_check(cfg: ShellConfig) -> list[tuple[tuple[Any, ...], str]]:
    """Checks across fields that pydantic cannot express: (loc, problem) pairs."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for name, path in cfg.workspaces.items():
        if not Path(path).is_absolute():
            out.append((("workspaces", name), "a workspace path must be absolute"))
    for j, path in enumerate(cfg.ro_binds):
        if not Path(path).is_absolute():
            out.append((("ro_binds", j), "a bind path must be absolute"))
    seen: dict[str, int] = {}
    for i, e in enumerate(cfg.entries):
        if e.name in seen:
            out.append(
                (("entries", i, "name"), f"duplicate entry name {e.name!r} (first at entries.{seen[e.name]})")
            )
        seen.setdefault(e.name, i)
        out += _entry_problems(i, e, cfg)
    return out


def load_shell_config(text: str, name: str = "config/shell.yaml") -> ShellConfig:
    """Validate shell whitelist YAML; raise ConfigErrors reading `file:line: key: problem`."""
    cfg = load_model(text, name, ShellConfig)
    problems = cross_check(cfg)
    if problems:
        raise ConfigErrors([config_error(text, name, loc, p) for loc, p in problems])
    return cfg


def load_shell_file(path: str | Path) -> ShellConfig:
    """Read and validate a shell whitelist file."""
    p = Path(path)
    return load_shell_config(p.read_text(encoding="utf-8"), str(p))
