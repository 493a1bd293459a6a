"""Parse YAML into a pydantic model and report errors as `file:line: key: problem`.

`yaml.compose` keeps the line of every node; after `model_validate` fails, each pydantic `loc`
is walked back through the node tree to the deepest node that exists, so the error points at
the offending key (or at the mapping that lacks a required key).
"""

from __future__ import annotations

from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from agent.errors import ConfigError, ConfigErrors

M = TypeVar("M", bound=BaseModel)


def _construct(node: yaml.Node | None) -> Any:
    """Build plain Python data from a composed node (safe types only)."""
    if node is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _node_at(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, bool]:
    """Return the deepest node along `loc` and whether the key node (not the value) was hit last."""
    node, on_key = root, False
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    node, on_key = value_node, False
                    break
            else:
                return node, on_key
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node, on_key
    return node, on_key


def _key_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Line (1-based) of the key that `loc` names, or of the closest enclosing node."""
    parent, _ = _node_at(root, loc[:-1]) if loc else (root, False)
    if loc and isinstance(parent, yaml.MappingNode):
        for key_node, _value in parent.value:
            if key_node.value == str(loc[-1]):
                return key_node.start_mark.line + 1
    node, _ = _node_at(root, loc)
    return node.start_mark.line + 1 if node is not None else None


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def load_model(text: str, name: str, model: type[M]) -> M:
    """Validate YAML `text` (called `name` in errors) into `model`; raise ConfigErrors on problems."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = _construct(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigErrors([ConfigError(f"invalid YAML: {problem}", name, line)]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigErrors([ConfigError("the top level must be a mapping", name, 1)])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            errors.append(ConfigError(err["msg"], name, _key_line(root, loc), _dotted(loc)))
        raise ConfigErrors(errors) from None


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Line of `loc` in YAML `text`, for cross-checks that run after validation."""
    try:
        return _key_line(yaml.compose(text, Loader=yaml.SafeLoader), loc)
    except yaml.YAMLError:
        return None
