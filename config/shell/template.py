"""The argv template syntax of a whitelisted command, and how one template item can be malformed.

The model never writes a command line: it names an entry and fills its typed arguments. An argv
template item is a literal (`log`), a whole placeholder (`{path}`), a literal with one embedded
placeholder (`--since={date}`), an optional group (a nested list, kept only when every argument in
it is given: `["-k", "{expr}"]`), or the marker `{flags}` where the allowed optional flags go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
FLAGS_MARKER = "{flags}"


def template_args(item: str | list[str]) -> list[str]:
    """Placeholder names in one template item (a group yields those of all its parts)."""
    parts = item if isinstance(item, list) else [item]
    return [m.group(1) for p in parts if p != FLAGS_MARKER for m in PLACEHOLDER.finditer(p)]


def item_problem(item: str, args: Mapping[str, object]) -> str | None:
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
