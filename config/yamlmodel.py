"""Parse YAML into a pydantic model and report errors as `file:line: key: problem`.

Composing is done once per text (`parse`): libyaml builds the node tree without Python recursion,
then one iterative walk refuses what YAML itself accepts but a config must not have — a duplicate
key (the last would silently win), nesting deeper than `MAX_DEPTH`, aliases that expand past
`MAX_NODES` — and indexes the line of every key. A pydantic `loc` is then looked up in that index
(the deepest existing prefix), so every error points at the offending key in O(depth), and list
items that have a `name` are shown as `entries[name=git_log]` rather than `entries.1`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from xihe.agent.errors import ConfigError, ConfigErrors

M = TypeVar("M", bound=BaseModel)

MAX_BYTES = 256 * 1024  # the shipped files are a few KB each; a whitelist of 500 entries is ~100 KB
MAX_DEPTH = 64  # the deepest shipped file nests 6 levels
MAX_NODES = 200_000  # after alias expansion ("billion laughs" stays small on disk)
MAX_ERRORS = 50  # per file; the rest are counted
SUGGEST_SCORE = 75.0  # how close (rapidfuzz ratio) an unknown key must be to a known one to suggest it
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml composes without recursion


@dataclass
class YamlDoc:
    """One composed document: its data and where every key is."""

    name: str
    root: yaml.Node | None
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)  # path → line of its key (1-based)
    labels: dict[tuple[str, ...], str] = field(default_factory=dict)  # sequence item path → "[name=x]"
    has_aliases: bool = False

    def line(self, loc: tuple[Any, ...]) -> int | None:
        """Line of the key `loc` names, or of the closest enclosing key that exists."""
        path = tuple(str(p) for p in loc)
        for n in range(len(path), 0, -1):
            if path[:n] in self.lines:
                return self.lines[path[:n]]
        return self.root.start_mark.line + 1 if self.root is not None else None

    def label(self, loc: tuple[Any, ...]) -> str:
        """`loc` as a dotted key; named list items read `entries[name=git_log]`."""
        out = ""
        path: tuple[str, ...] = ()
        for part in loc:
            path = (*path, str(part))
            named = self.labels.get(path)
            out += named if named else (f".{part}" if out else str(part))
        return out

    def data(self) -> Any:
        """Plain Python data (safe types only)."""
        if self.root is None:
            return None
        loader = yaml.SafeLoader("")
        try:
            return loader.construct_document(self.root)
        finally:
            loader.dispose()


def _error(name: str, problem: str, node: yaml.Node | None = None, key: str = "") -> ConfigErrors:
    line = node.start_mark.line + 1 if node is not None else None
    return ConfigErrors([ConfigError(problem, name, line, key)])


def _walk(doc: YamlDoc) -> list[ConfigError]:
    """Index keys and refuse duplicates; one pass, no recursion."""
    errors: list[ConfigError] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str, ...], str]] = []
    if doc.root is not None:
        stack.append((doc.root, (), ""))
    while stack:
        node, path, label = stack.pop()
        if id(node) in seen:
            doc.has_aliases = True  # indexed where it was anchored
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # complex keys are refused by the model
                k = key_node.value
                line = key_node.start_mark.line + 1
                key_label = f"{label}.{k}" if label else k
                if k != "<<":  # merge keys may override on purpose
                    where = first.setdefault((key_node.tag, k), line)
                    if where != line:
                        errors.append(
                            ConfigError(
                                f"duplicate key (first on line {where}; the last would silently win)",
                                doc.name,
                                line,
                                key_label,
                            )
                        )
                        continue
                doc.lines.setdefault((*path, k), line)
                stack.append((value_node, (*path, k), key_label))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                item_path = (*path, str(i))
                named = _item_name(item)
                if named:
                    doc.labels[item_path] = f"[name={named}]"
                doc.lines.setdefault(item_path, item.start_mark.line + 1)
                stack.append((item, item_path, label + (f"[name={named}]" if named else f".{i}")))
    return sorted(errors, key=lambda e: e.line or 0)


def _item_name(item: yaml.Node) -> str | None:
    if isinstance(item, yaml.MappingNode):
        for key_node, value_node in item.value:
            if key_node.value == "name" and isinstance(value_node, yaml.ScalarNode) and value_node.value:
                return str(value_node.value)
    return None


def _expanded_size(root: yaml.Node) -> int | None:
    """Node count with every alias expanded (memoized, iterative); None for a recursive alias."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        children = _children(node)
        if done:
            open_.discard(id(node))
            size[id(node)] = min(1 + sum(size[id(c)] for c in children), MAX_NODES + 1)
            continue
        if id(node) in open_:
            return None
        open_.add(id(node))
        stack.append((node, True))
        for c in children:
            if id(c) in open_:
                return None
            if id(c) not in size:
                stack.append((c, False))
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _too_deep(name: str, mark: Any) -> ConfigErrors:
    line = mark.line + 1 if mark is not None else None
    return ConfigErrors([ConfigError(f"nesting deeper than {MAX_DEPTH} levels", name, line)])


def check_depth(text: str, name: str, loader: type[Any] = _COMPOSER) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the event stream (an iterative parser).

    Two behaviours give the same `file:line: nesting deeper than 64 levels`: our own count of the
    events, and the limit libyaml itself enforces since 0.2.6 (PyYAML 6.0.4's wheels: a ScannerError
    "exceeded maximum nesting depth" at flow level 1000, raised while scanning ahead, before the
    events that our count needs have arrived).
    """
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(name, event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem):
            raise _too_deep(name, exc.problem_mark) from None
        raise


@lru_cache(maxsize=32)
def parse(text: str, name: str) -> YamlDoc:
    """Compose and check `text`; raise ConfigErrors reading `file:line: problem`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise _error(name, f"file is {size:,} bytes; config files are limited to {MAX_BYTES:,} bytes")
    try:
        check_depth(text, name)  # before composing: libyaml's composer recurses in C
        root = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, name) from None
    doc = YamlDoc(name, root)
    errors = _walk(doc)
    if errors:
        raise ConfigErrors(_capped(errors, name))
    if root is not None and doc.has_aliases:
        expanded = _expanded_size(root)
        if expanded is None:
            raise _error(name, "invalid YAML: an alias refers to the node that contains it")
        if expanded > MAX_NODES:
            raise _error(name, f"the document expands to more than {MAX_NODES:,} values (aliases?)")
    return doc


def _yaml_error(exc: yaml.YAMLError, text: str, name: str) -> ConfigErrors:
    """`file:line: invalid YAML: problem` for a parser, reader or constructor error."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    if isinstance(exc, yaml.reader.ReaderError):
        line = text[: exc.position].count("\n") + 1
        char = exc.character
        problem = f"{exc.reason} (character #x{char:04x})" if isinstance(char, int) else str(exc.reason)
    else:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return ConfigErrors([ConfigError(f"invalid YAML: {problem}", name, line)])


def _capped(errors: list[ConfigError], name: str) -> list[ConfigError]:
    if len(errors) <= MAX_ERRORS:
        return errors
    more = len(errors) - MAX_ERRORS
    return [*errors[:MAX_ERRORS], ConfigError(f"... and {more} more problem(s) not shown", name)]


def load_model(text: str, name: str, model: type[M]) -> M:
    """Validate YAML `text` (called `name` in errors) into `model`; raise ConfigErrors on problems."""
    doc = parse(text, name)
    try:
        data = doc.data()
    except yaml.YAMLError as exc:  # e.g. an unhashable key, an unknown tag, bad !!binary
        raise _yaml_error(exc, text, name) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigErrors([ConfigError("the top level must be a mapping", name, 1)])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors(include_url=False, include_input=False)[:MAX_ERRORS]:
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            problem = err["msg"]
            if err["type"] == "extra_forbidden" and loc:
                problem += did_you_mean(str(loc[-1]), known_keys(model, loc[:-1]))
            errors.append(ConfigError(problem, name, doc.line(loc), doc.label(loc)))
        if exc.error_count() > MAX_ERRORS:
            errors.append(
                ConfigError(f"... and {exc.error_count() - MAX_ERRORS} more problem(s) not shown", name)
            )
        raise ConfigErrors(errors) from None


# ---- "did you mean": the keys a model accepts at a place ----------------------------------------


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`; did you mean `max_turns`?` for a misspelt key, or '' when no known key is close."""
    from rapidfuzz import fuzz, process  # only when a key is unknown

    best = process.extractOne(key, sorted(known), scorer=fuzz.ratio, score_cutoff=SUGGEST_SCORE)
    return f"; did you mean `{best[0]}`?" if best else ""


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> set[str]:
    """The keys the mapping at `loc` accepts: the fields (and aliases) of the model found there by
    following `model`'s annotations through nested models, lists, dicts and unions."""
    types: list[Any] = [model]
    for part in loc:
        types = [step for t in types for step in _step(t, part)]
    names: set[str] = set()
    for t in types:
        for m in _members(t):
            if isinstance(m, type) and issubclass(m, BaseModel):
                names.update(f.alias or n for n, f in m.model_fields.items())
    return names


def _members(tp: Any) -> list[Any]:
    """`tp` without Annotated/Optional/Union wrapping: the types a value there may have."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin in (Union, UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _step(tp: Any, part: Any) -> list[Any]:
    """The types found at `part` (a field, a list index, a dict key, a union member's name) inside `tp`."""
    out: list[Any] = []
    for m in _members(tp):
        origin, args = get_origin(m), get_args(m)
        if isinstance(m, type) and issubclass(m, BaseModel):
            if part == m.__name__:
                out.append(m)  # pydantic names the union member it tried
            fields = {f.alias or n: f for n, f in m.model_fields.items()}
            if str(part) in fields:
                out.append(fields[str(part)].annotation)
        elif origin in (list, tuple, set, frozenset, Sequence) and args:
            out.append(args[0])
        elif origin in (dict, Mapping) and len(args) == 2:
            out.append(args[1])
    return out


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Line of `loc` in YAML `text`, for cross-checks that run after validation."""
    try:
        return parse(text, "").line(loc)
    except ConfigError:
        return None


def key_of(text: str, loc: tuple[Any, ...]) -> str:
    """`loc` as shown in errors (named list items as `entries[name=x]`)."""
    try:
        return parse(text, "").label(loc)
    except ConfigError:
        return ".".join(str(p) for p in loc)


def config_error(text: str, name: str, loc: tuple[Any, ...], problem: str) -> ConfigError:
    """A cross-check error about `loc` in the file `name` whose text is `text`."""
    return ConfigError(problem, name, line_of(text, loc), key_of(text, loc))
