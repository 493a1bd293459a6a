"""A Python file an update parsed before, read again one top-level statement at a time.

A statement whose whole lines the change did not touch (`retree.changed_span`) is taken from the
file's last parse as it was, units and facts, moved by the lines inserted or removed before it; the
tree-sitter query, the units (`units.units_in`, which still takes unchanged units inside a changed
statement) and the facts (`pyrefs.extract`) are made for the others alone. Appending a function to
`xml/dom/minidom.py` (70 kB, 245 units) then queries one statement, not the file: the query over the
whole tree was 6 ms of a ~40 ms update. A statement is its own world for both: a unit's qualified
name, kind, doc (a Python docstring is inside it) and lines, and the walk's scopes, start afresh at
module level. A file with a syntax error (`units.Earlier.sound`) or line breaks other than '\\n'
before a moved statement (`units.Earlier.aligned`) is read whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xihe.tools.codeindex import identifiers, pyrefs, treequery
from xihe.tools.codeindex.filefacts import FileFacts
from xihe.tools.codeindex.refs import module_name
from xihe.tools.codeindex.units import CodeUnit, Earlier, UnitKey, lines_of, module_header, moved, units_in

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

    from xihe.tools.codeindex.retree import Span

StatementKey = tuple[int, int, str]  # a top-level statement's start and end byte and node type


@dataclass
class Kept:
    """What a parse of a Python file keeps for the next: its units by key (`units.Earlier`), each
    top-level statement's facts (`pyrefs.Statements`) and each statement's units."""

    units: Earlier = field(default_factory=Earlier)
    facts: pyrefs.Statements = field(default_factory=pyrefs.Statements)
    parts: dict[StatementKey, list[tuple[UnitKey, CodeUnit]]] = field(default_factory=dict)


def parse(
    path: str, text: str, src: bytes, tree: Tree, span: Span | None, kept: Kept | None
) -> tuple[list[CodeUnit], FileFacts, Kept]:
    """The units and facts of the Python file `path` (`text`, its bytes `src`, its `tree`), taking
    the statements `span` (the bytes changed since the parse that left `kept`) did not touch; and
    what this parse keeps for the next."""
    root = tree.root_node
    lines, aligned = lines_of(text)
    seen = Kept(Earlier(aligned=aligned, sound=not root.has_error))
    if not seen.units.sound:  # error recovery can leave nodes (of no width) outside every statement
        caps = treequery.captures("python", root)
        names = identifiers.names(caps, src)
        found = [u for _, u in units_in(path, "python", src, lines, aligned, caps, names, None, None)]
        header = module_header(path, "python", lines, found)
        return [header, *found] if header is not None else found, _whole_facts(path, src, root), seen
    earlier = (span, kept) if span is not None and kept is not None and kept.units.sound else None
    units: list[CodeUnit] = []
    again: treequery.Captures = {}  # the query's nodes of the statements read again
    for child in root.children:
        key = (child.start_byte, child.end_byte, child.type)
        taken = _taken(key, *earlier, src, aligned) if earlier is not None else None
        if taken is None:
            mine = treequery.captures("python", child)
            for name, nodes in mine.items():
                again.setdefault(name, []).extend(nodes)
            before = (earlier[0], earlier[1].units) if earlier is not None else None
            taken = units_in(
                path, "python", src, lines, aligned, mine, identifiers.names(mine, src), before, seen.units
            )
        seen.parts[key] = taken
        for unit_key, unit in taken:
            seen.units.units[unit_key] = unit
            units.append(unit)
    header = module_header(path, "python", lines, units)
    if header is not None:
        units.insert(0, header)
    facts = FileFacts("python", module_name(path))
    before_facts = (earlier[0], earlier[1].facts) if earlier is not None else None
    if not pyrefs.extract(
        facts,
        _package(path, facts),
        again,
        root,
        identifiers.names(again, src),
        before_facts,
        seen.facts,
        False,
    ):
        facts = _whole_facts(path, src, root)  # a name in two statements: the file walked whole
    return units, facts, seen


def _package(path: str, facts: FileFacts) -> str:
    return facts.module if path.endswith("__init__.py") else facts.module.rpartition(".")[0]


def _whole_facts(path: str, src: bytes, root: Node) -> FileFacts:
    """The facts of the whole file, walked at once (`pyrefs.extract`)."""
    caps = treequery.captures("python", root)
    facts = FileFacts("python", module_name(path))
    pyrefs.extract(facts, _package(path, facts), caps, root, identifiers.names(caps, src))
    return facts


def _taken(
    key: StatementKey, span: Span, kept: Kept, src: bytes, aligned: bool
) -> list[tuple[UnitKey, CodeUnit]] | None:
    """The units of the statement at `key` as the last parse made them, moved, when the change left
    its whole lines alone and that parse kept its facts too; None when it must be read again."""
    start, end, kind = key
    lo = src.rfind(b"\n", 0, start) + 1
    hi = src.find(b"\n", end)
    hi = len(src) if hi < 0 else hi + 1
    if hi <= span.start_byte:
        shift, rows = 0, 0
    elif lo >= span.new_end_byte and aligned and kept.units.aligned:
        shift = span.new_end_byte - span.old_end_byte
        rows = span.new_end_point[0] - span.old_end_point[0]
    else:
        return None
    old = (start - shift, end - shift, kind)
    part = kept.parts.get(old)
    if part is None or old not in kept.facts.facts:
        return None
    if shift == 0 and rows == 0:
        return part
    out: list[tuple[UnitKey, CodeUnit]] = []
    for (a, b, k, q), u in part:
        out.append(((a + shift, b + shift, k, q), moved(u, rows) if rows else u))
    return out
