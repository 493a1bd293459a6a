"""Matching the tokens of a `/sh` line against one compiled argv template, with backtracking.

A failure records how many tokens matched before it, so that among all entries the deepest failure
names what went wrong (the refusal quotes its problem and argument).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xihe.agent.i18n import Text
from xihe.config.shell.entry import Entry
from xihe.tools.shell.problems import problem
from xihe.tools.shell.template import Flags, Group, Item, Lit, Slot, part_text


@dataclass(frozen=True)
class Fail:
    """Why one entry did not match a line, and how far into the tokens it got."""

    depth: int  # tokens matched before failing; a structural match that failed validation is deepest
    reason: str | Text
    argument: str | None


def _part_match(p: Lit | Slot, token: str) -> str | None:
    """The captured value when `token` fits the part ('' for a literal), else None."""
    if isinstance(p, Lit):
        return "" if token == p.text else None
    if (
        token.startswith(p.prefix)
        and token.endswith(p.suffix)
        and len(token) >= len(p.prefix) + len(p.suffix)
    ):
        return token[len(p.prefix) : len(token) - len(p.suffix)]
    return None


def _expect(p: Lit | Slot, entry: Entry) -> str:
    return repr(p.text) if isinstance(p, Lit) else f"<{p.arg}>" if p.whole else repr(part_text(p))


def walk(
    entry: Entry,
    items: Sequence[Item],
    i: int,
    tokens: list[str],
    j: int,
    captured: dict[str, str],
    flags: list[str],
) -> tuple[dict[str, str], list[str]] | Fail:
    """Backtracking match of template items[i:] against tokens[j:]; the deepest failure wins."""
    if i == len(items):
        if j == len(tokens):
            return dict(captured), list(flags)
        extra = tokens[j]
        hint = problem("allowed_flags", flags=", ".join(entry.flags)) if entry.flags else ""
        why = problem("extra", token=repr(extra[:60]), n=j, hint=hint)
        return Fail(j, why, _token_arg(extra, j))
    item = items[i]
    if isinstance(item, Flags):
        best: Fail | None = None
        # try taking 0..n allowed flags here; fewer first so later literals get their chance
        k = j
        while True:
            got = walk(entry, items, i + 1, tokens, k, captured, flags + tokens[j:k])
            if not isinstance(got, Fail):
                return got
            best = got if best is None or got.depth > best.depth else best
            if k < len(tokens) and tokens[k] in entry.flags and tokens[k] not in tokens[j:k]:
                k += 1
            else:
                # a dash token the rest of the template stumbles on right away is a disallowed flag
                if k < len(tokens) and tokens[k].startswith("-") and best.depth <= k + 1:
                    flags_text = ", ".join(entry.flags)
                    why = problem("flag_here", flag=repr(tokens[k][:60]), flags=flags_text)
                    return Fail(k + 1, why, "flags")
                return best
    if isinstance(item, Group):
        with_group = _walk_seq(entry, item.items, items, i, tokens, j, captured, flags)
        if not isinstance(with_group, Fail):
            return with_group
        without = walk(entry, items, i + 1, tokens, j, captured, flags)
        if not isinstance(without, Fail):
            return without
        return with_group if with_group.depth >= without.depth else without
    if j >= len(tokens):
        return Fail(
            j,
            problem("missing", expected=_expect(item, entry), n=j),
            item.arg if isinstance(item, Slot) else f"argv[{j}]",
        )
    value = _part_match(item, tokens[j])
    if value is None:
        return Fail(
            j,
            problem("expected", expected=_expect(item, entry), n=j, token=repr(tokens[j][:60])),
            item.arg if isinstance(item, Slot) else _token_arg(tokens[j], j),
        )
    if isinstance(item, Slot):
        return walk(entry, items, i + 1, tokens, j + 1, {**captured, item.arg: value}, flags)
    return walk(entry, items, i + 1, tokens, j + 1, captured, flags)


def _walk_seq(
    entry: Entry,
    parts: Sequence[Lit | Slot],
    items: Sequence[Item],
    i: int,
    tokens: list[str],
    j: int,
    captured: dict[str, str],
    flags: list[str],
) -> tuple[dict[str, str], list[str]] | Fail:
    """Match an optional group's parts in order, then the rest of the template."""
    new = dict(captured)
    for n, p in enumerate(parts):
        if j + n >= len(tokens):
            return Fail(
                j + n,
                problem("missing", expected=_expect(p, entry), n=j + n),
                p.arg if isinstance(p, Slot) else f"argv[{j + n}]",
            )
        value = _part_match(p, tokens[j + n])
        if value is None:
            return Fail(
                j + n,
                problem("expected", expected=_expect(p, entry), n=j + n, token=repr(tokens[j + n][:60])),
                p.arg if isinstance(p, Slot) else _token_arg(tokens[j + n], j + n),
            )
        if isinstance(p, Slot):
            new[p.arg] = value
    return walk(entry, items, i + 1, tokens, j + len(parts), new, flags)


def _token_arg(token: str, position: int) -> str:
    """How a refusal names a token that is not an argument: by its position."""
    return f"argv[{position}]"
