"""Tools as data: a typed argument model, a run function, a risk, and where it acts.

`build_registry(specs, enabled)` filters the shipped specs through the config once and fails on
names that do not exist. `Registry.parse()` is the only way from the model's raw JSON to a call:
unknown tool, non-JSON or truncated JSON, oversize arguments and schema violations all become a
`ToolRetry` whose message tells the model what to fix; nothing runs.

A tool whose calls act on something outside (a workflow instance) may `prepare` them: the target is
looked up once per walk, and every per-call function then receives `Prepared(args, target)` instead
of the bare arguments (`ParsedCall.subject`), so the gate's environment, the precheck, the
confirmation's explanation and the run all see the same read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from fnmatch import fnmatch
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from xihe.agent.errors import ConfigError, ToolRetry
from xihe.agent.i18n import Catalog, Lang, Text, text
from xihe.agent.wecom_markdown import Md, inline

if TYPE_CHECKING:
    from xihe.agent.deps import Deps
    from xihe.agent.gate import Scope

Risk = Literal["read", "write"]
A = TypeVar("A")
T = TypeVar("T")


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about its call."""

    deps: Deps
    task_id: int
    step_key: str
    user: str
    conversation: str
    now: datetime

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and resumes of the same step: `task_id:step_key`."""
        return f"{self.task_id}:{self.step_key}"


@dataclass(frozen=True)
class Prepared(Generic[A, T]):
    """A call's arguments and the target `ToolSpec.prepare` looked up for them (read once per walk)."""

    args: A
    target: T


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool. `args` field descriptions are what the model reads.

    The per-call functions (`run`, `environment_of`, `risk_of`, `scope_of`, `lookup`, `explain`,
    `precheck`) receive the call's arguments, or `Prepared(args, target)` when the tool has `prepare`.
    A `lookup` looks for an effect that may have happened after the target was read: it reads afresh.
    """

    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[Any, ToolContext], Any]
    risk: Risk = "read"
    environments: tuple[str, ...] = ()  # static places it acts on; empty = no environment
    environment_of: Callable[[Any, Deps], str] | None = None  # per-call environment (e.g. a workflow's)
    risk_of: Callable[[Any, Deps], Risk] | None = None  # per-call risk (e.g. a shell entry's); `risk` = worst
    scope_of: Callable[[Any, Deps], Scope | None] | None = None  # per-call narrowing for the gate
    # find an interrupted attempt's effect: its result, None = it did not happen, OutcomeUnknown = cannot tell
    lookup: Callable[[Any, ToolContext], Any] | None = None
    secret_args: frozenset[str] = field(default_factory=frozenset)
    # how an explicit command shows the result to people, in their language (zh/en)
    summarize: Callable[[Any, Lang], str] | None = None
    explain: Callable[[Any, Deps, Lang], str] | None = None  # what the call would do, in the asker's language
    # why this call cannot succeed right now (e.g. the run already ended), checked before asking to confirm
    precheck: Callable[[Any, Deps], str | Text | None] | None = None
    # look the call's target up (e.g. the workflow instance), once before a confirmation and once after
    prepare: Callable[[Any, Deps], Any] | None = None

    def prepared(self, args: Any, deps: Deps) -> Any:
        """What the per-call functions receive: `Prepared(args, prepare(args, deps))`, or the arguments."""
        return Prepared(args, self.prepare(args, deps)) if self.prepare is not None else args

    def schema(self) -> dict[str, Any]:
        """The function schema exactly as the model receives it."""
        params = self.args.model_json_schema()
        params.pop("title", None)
        for schema in [params, *params.get("$defs", {}).values()]:  # titles only repeat the names
            schema.pop("title", None)
            for prop in schema.get("properties", {}).values():
                prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def risk_for(self, args: Any, deps: Deps) -> Risk:
        """The risk of this call (the static `risk` unless the tool computes it per call)."""
        return self.risk_of(args, deps) if self.risk_of is not None else self.risk

    def scope(self, args: Any, deps: Deps) -> Scope | None:
        """Extra roles/environments the gate checks for this call (e.g. a shell entry's), or None."""
        return self.scope_of(args, deps) if self.scope_of is not None else None

    def environment(self, args: Any, deps: Deps) -> str:
        """Where this call acts ('' when the tool has no environment)."""
        if self.environment_of is not None:
            return self.environment_of(args, deps)
        return self.environments[0] if self.environments else ""


@dataclass(frozen=True)
class ParsedCall:
    """A validated call: the spec, the model instance and its canonical plain-data arguments."""

    spec: ToolSpec
    args: BaseModel
    data: dict[str, Any]
    prepared: Prepared[BaseModel, Any] | None = None  # set by `prepare`

    def prepare(self, deps: Deps) -> ParsedCall:
        """This call with its target looked up (`ToolSpec.prepare`); itself when the tool has none."""
        if self.spec.prepare is None:
            return self
        return replace(self, prepared=self.spec.prepared(self.args, deps))

    @property
    def subject(self) -> Any:
        """What the tool's per-call functions receive (see ToolSpec)."""
        if self.spec.prepare is None:
            return self.args
        if self.prepared is None:
            raise RuntimeError(f"{self.spec.name}: the call is used before its target was looked up")
        return self.prepared


INVALID: Catalog = {  # English for the model; a command's reply says it in the conversation's language
    "invalid": {
        "en": "Invalid arguments for {tool}: {problems}. Fix them and call again.",
        "zh": "{tool} 的参数无效：{problems}。",
    },
}


def _describe_validation(name: str, exc: ValidationError) -> Text:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"`{inline(where)}`: {inline(err['msg'])}")  # the model's keys and values, inert
    return text(INVALID, "invalid", tool=name, problems=Md("; ".join(parts)))


class Registry:
    """The enabled tools, by name."""

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        found: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in found:
                raise ValueError(f"tool {spec.name!r} registered twice")
            found[spec.name] = spec
        self._lock = threading.Lock()
        self._specs = found
        # each tool's schema, built once (pydantic's JSON schema is costly; the model gets it every turn)
        self._schemas = {name: spec.schema() for name, spec in found.items()}

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        """The tools by name: a snapshot that a concurrent `replace`, `add_tool` or `remove_tool` never
        changes under the reader."""
        return self._specs

    def replace(self, spec: ToolSpec) -> bool:
        """Swap in a new version of an enabled tool (e.g. after a reload); False when it is not enabled."""
        with self._lock:
            if spec.name not in self._specs:
                return False
            self._schemas = {**self._schemas, spec.name: spec.schema()}
            self._specs = {**self._specs, spec.name: spec}
            return True

    def add_tool(self, spec: ToolSpec) -> bool:
        """Add a tool that was not enabled yet (e.g. one an MCP server listed after start); False when
        the name is taken. Readers keep the snapshot they hold, as with `replace`."""
        with self._lock:
            if spec.name in self._specs:
                return False
            self._schemas = {**self._schemas, spec.name: spec.schema()}
            self._specs = {**self._specs, spec.name: spec}
            return True

    def remove_tool(self, name: str) -> bool:
        """Take a tool out (e.g. its MCP server left mcp.yaml); False when it is not enabled."""
        with self._lock:
            if name not in self._specs:
                return False
            self._schemas = {k: v for k, v in self._schemas.items() if k != name}
            self._specs = {k: v for k, v in self._specs.items() if k != name}
            return True

    def __contains__(self, name: str) -> bool:
        return name in self.specs

    def get(self, name: str) -> ToolSpec:
        return self.specs[name]

    def names(self) -> list[str]:
        return sorted(self.specs)

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Function schemas for the model, in name order (built once per tool version; do not modify)."""
        chosen = sorted(names) if names is not None else self.names()
        built = self._schemas
        return [built[n] for n in chosen if n in built]

    def parse(self, name: str, raw: str | None, *, max_bytes: int = 65536) -> ParsedCall:
        """Validate a model's call; raise ToolRetry with an instruction when it is not executable."""
        if name not in self.specs:
            raise ToolRetry(f"Unknown tool {name!r}; available tools: {', '.join(self.names())}.")
        raw = raw if raw is not None else ""
        size = len(raw.encode())
        if size > max_bytes:
            raise ToolRetry(
                f"Arguments for {name} are {size} bytes, over the {max_bytes}-byte limit; "
                "they were not executed. Send smaller arguments."
            )
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolRetry(
                f"Arguments for {name} are not valid JSON ({exc.msg} at character {exc.pos}); "
                "they may have been cut off. Send the complete JSON object again."
            ) from None
        if not isinstance(data, dict):
            raise ToolRetry(f"Arguments for {name} must be a JSON object, not {type(data).__name__}.")
        spec = self.specs[name]
        try:
            model = spec.args.model_validate(data)
        except ValidationError as exc:
            raise ToolRetry(_describe_validation(name, exc)) from None
        return ParsedCall(spec, model, model.model_dump(mode="json"))


def build_registry(
    specs: Iterable[ToolSpec], enabled: Iterable[str] = ("*",), *, source: str = "xihe.yaml"
) -> Registry:
    """Keep the specs the config enables; a plain name that matches no tool is a ConfigError."""
    specs = list(specs)
    patterns = list(enabled)
    names = {s.name for s in specs}
    for i, pattern in enumerate(patterns):
        if not any(ch in pattern for ch in "*?[") and pattern not in names:
            raise ConfigError(
                f"unknown tool {pattern!r} (known: {', '.join(sorted(names))})", source, None, f"tools.{i}"
            )
    return Registry(s for s in specs if any(fnmatch(s.name, p) for p in patterns))
