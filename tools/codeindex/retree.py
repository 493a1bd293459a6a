"""Re-parsing a file that an update parsed before, from its last tree (tree-sitter's incremental parse).

A file that changes once is usually being worked on and changes again: `xihe serve`'s watcher
re-indexes it at each save. tree-sitter can parse the new text from the old tree once it is told
which bytes changed, reusing every subtree outside the change; the tree it returns is the one a
fresh parse makes (a text with a syntax error is parsed afresh: recovering from the old tree's
errors can give another tree, in 12 of 3,600 random edits of real files). The changed span is what lies between the longest common prefix and suffix of
the two texts (an edit anywhere inside it is covered). On the largest standard-library file
(`xml/dom/minidom.py`, 70 kB) that is ~1 ms against ~10 ms for a fresh parse.

Only the last `SIZE` files an update parsed are kept (their source, tree and units); a full build
keeps none, so the memory is a few files' trees whatever the repository's size. The units let the
next parse take those whose lines the change did not touch as they were (`units.Earlier`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

from tree_sitter import Parser, Tree

SIZE = 8  # the files kept: those being edited now


class Kept(NamedTuple):
    lang: str
    source: bytes
    tree: Tree
    units: Any  # what the last parse of the tree left for the next one (units.parse_units' `seen`)


class RecentTrees:
    """The last trees of the files most recently re-parsed, by path."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._kept: OrderedDict[str, Kept] = OrderedDict()

    def parse(self, path: str, lang: str, source: bytes, parser: Parser) -> Tree:
        """The tree of `source` (the file at `path` in `lang`), from its kept tree when there is one."""
        return self.reparse(path, lang, source, parser)[0]

    def reparse(self, path: str, lang: str, source: bytes, parser: Parser) -> tuple[Tree, Span | None, Any]:
        """`parse`, with the bytes changed since the kept tree and what its parse kept (`keep`); None,
        None without a kept tree."""
        kept = self._kept.pop(path, None)
        span, units = None, None
        if kept is None or kept.lang != lang:
            tree = parser.parse(source)
        else:
            span, units = changed_span(kept.source, source), kept.units
            kept.tree.edit(
                start_byte=span.start_byte,
                old_end_byte=span.old_end_byte,
                new_end_byte=span.new_end_byte,
                start_point=span.start_point,
                old_end_point=span.old_end_point,
                new_end_point=span.new_end_point,
            )
            tree = parser.parse(source, kept.tree)
            if tree.root_node.has_error:  # error recovery from the old tree can differ from a fresh parse's
                tree, span, units = parser.parse(source), None, None
        self._kept[path] = Kept(lang, source, tree, None)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return tree, span, units

    def keep(self, path: str, units: Any) -> None:
        """Keep `units` with the last tree of `path`, for its next parse."""
        kept = self._kept.get(path)
        if kept is not None:
            self._kept[path] = kept._replace(units=units)

    def forget(self, path: str) -> None:
        """Drop the kept tree of `path` (the file is gone)."""
        self._kept.pop(path, None)


class Span(NamedTuple):
    """`Tree.edit`'s arguments: bytes, and (row, byte column) points."""

    start_byte: int
    old_end_byte: int
    new_end_byte: int
    start_point: tuple[int, int]
    old_end_point: tuple[int, int]
    new_end_point: tuple[int, int]


def changed_span(before: bytes, after: bytes) -> Span:
    """`Tree.edit`'s arguments for the change from `before` to `after`: the bytes between their
    common prefix and their common suffix (the suffix not overlapping the prefix), with rows and
    byte columns as tree-sitter counts them."""
    start = _common_prefix(before, after)
    limit = min(len(before), len(after)) - start
    tail = _common_suffix(before, after, limit)
    old_end, new_end = len(before) - tail, len(after) - tail
    return Span(
        start, old_end, new_end, _point(before, start), _point(before, old_end), _point(after, new_end)
    )


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix (bisection over slice comparisons: memcmp, not a loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """The length of the longest common suffix, at most `limit`."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _point(source: bytes, offset: int) -> tuple[int, int]:
    """(row, byte column) of `offset` in `source`."""
    return source.count(b"\n", 0, offset), offset - (source.rfind(b"\n", 0, offset) + 1)
