"""An entry's argv template compiled into items, its human form, and filling it with values.

Items are literals, placeholders (possibly embedded in a literal), optional groups, and the place
where the allowed flags go (config/shell/template.py describes the YAML form).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xihe.config.shell.entry import Entry
from xihe.config.shell.template import FLAGS_MARKER, PLACEHOLDER


@dataclass(frozen=True)
class Lit:
    """A literal template item."""

    text: str


@dataclass(frozen=True)
class Slot:
    """A placeholder, possibly embedded between a literal prefix and suffix."""

    arg: str
    prefix: str = ""
    suffix: str = ""

    @property
    def whole(self) -> bool:
        """True when the placeholder is the whole argv item (then it must not look like an option)."""
        return not self.prefix and not self.suffix


@dataclass(frozen=True)
class Group:
    """An optional run of items, kept only when every argument in it is given."""

    items: tuple[Lit | Slot, ...]


@dataclass(frozen=True)
class Flags:
    """Where the allowed optional flags go."""


Item = Lit | Slot | Group | Flags


def _compile_part(text: str) -> Lit | Slot:
    m = PLACEHOLDER.search(text)
    if not m:
        return Lit(text)
    return Slot(m.group(1), text[: m.start()], text[m.end() :])


def compile_template(entry: Entry) -> tuple[Item, ...]:
    """The entry's argv template as items (the config loader has already cross-checked it)."""
    items: list[Item] = []
    for raw in entry.argv:
        if isinstance(raw, list):
            items.append(Group(tuple(_compile_part(p) for p in raw)))
        elif raw == FLAGS_MARKER:
            items.append(Flags())
        else:
            items.append(_compile_part(raw))
    return tuple(items)


def template_text(entry: Entry) -> str:
    """A human form of the template, e.g. `git log -n <count> -- <path>`."""
    out: list[str] = []
    for item in compile_template(entry):
        if isinstance(item, Group):
            out.append("[" + " ".join(part_text(p) for p in item.items) + "]")
        elif isinstance(item, Flags):
            out.append("[" + "|".join(entry.flags) + "]...")
        else:
            out.append(part_text(item))
    return " ".join(out)


def part_text(p: Lit | Slot) -> str:
    """One literal or placeholder item as people read it: `--since=<date>`."""
    return p.text if isinstance(p, Lit) else f"{p.prefix}<{p.arg}>{p.suffix}"


def render_values(entry: Entry, values: Mapping[str, str], flags: Sequence[str]) -> tuple[str, ...]:
    """Fill the entry's template with already-validated values (also used to render redacted argv)."""
    argv: list[str] = []

    def part(p: Lit | Slot) -> str:
        return p.text if isinstance(p, Lit) else p.prefix + values[p.arg] + p.suffix

    for item in compile_template(entry):
        if isinstance(item, Group):
            if all(p.arg in values for p in item.items if isinstance(p, Slot)):
                argv += [part(p) for p in item.items]
        elif isinstance(item, Flags):
            argv += flags
        else:
            argv.append(part(item))
    return tuple(argv)
