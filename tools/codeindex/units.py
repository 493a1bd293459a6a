"""Code units: functions, methods and classes parsed with tree-sitter; line windows for other files.

The tree walk is here: which nodes are units is each grammar's rule (languages.py), and a unit's
documentation is read by doccomments.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node, Tree

from xihe.tools.codeindex import treequery
from xihe.tools.codeindex.doccomments import leading_comments, module_doc, python_docstring
from xihe.tools.codeindex.identifiers import Names
from xihe.tools.codeindex.identifiers import names as names_of
from xihe.tools.codeindex.languages import LANGS, LangSpec, Parsers, language_of, node_text, unit_kind

if TYPE_CHECKING:
    from xihe.tools.codeindex.retree import Span

SMALL_SWEEP = 192  # identifiers and calls below which `_sweep` walks: painting costs ~45 us whatever the size
MAX_IDENTIFIERS = 200
MAX_CALLS = 100


@dataclass(frozen=True)
class CodeUnit:
    """One searchable piece of a file: a function, method, class, module header or line window."""

    path: str  # relative to the repository root, '/' separated
    start: int  # 1-based, inclusive
    end: int  # 1-based, inclusive
    kind: str  # function | method | class | module | window
    name: str
    qualname: str  # Class.method, outer.inner; the file name for windows
    lang: str
    signature: str = ""
    doc: str = ""
    identifiers: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    text: str = field(default="", compare=False)  # the text searched by BM25 (not persisted twice)
    inherited_doc: str = ""  # the doc it is searched by, from the method it overrides (inherit.py)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the index persists units this way)."""
        inherited = {"inherited_doc": self.inherited_doc} if self.inherited_doc else {}
        return inherited | {
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "kind": self.kind,
            "name": self.name,
            "qualname": self.qualname,
            "lang": self.lang,
            "signature": self.signature,
            "doc": self.doc,
            "identifiers": list(self.identifiers),
            "calls": list(self.calls),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CodeUnit:
        """Inverse of to_json (the search text is not persisted)."""
        return cls(
            path=data["path"],
            start=data["start"],
            end=data["end"],
            kind=data["kind"],
            name=data["name"],
            qualname=data["qualname"],
            lang=data["lang"],
            signature=data.get("signature", ""),
            doc=data.get("doc", ""),
            identifiers=tuple(data.get("identifiers", ())),
            calls=tuple(data.get("calls", ())),
            inherited_doc=data.get("inherited_doc", ""),
        )


def _name_of(node: Node, spec: LangSpec) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return node_text(name)
    if node.type == "class":  # anonymous class expression assigned to a variable
        parent = node.parent
        if parent is not None and parent.type == "variable_declarator":
            return node_text(parent.child_by_field_name("name"))
    return ""


def _go_receiver(node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    for sub in _iter(receiver):
        if sub.type == "type_identifier":
            return node_text(sub)
    return ""


def _iter(node: Node) -> Iterator[Node]:
    """Depth-first walk with an explicit stack (deep trees would exhaust recursion)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _body(node: Node) -> Node | None:
    for fname in ("body", "value"):
        b = node.child_by_field_name(fname)
        if b is not None:
            return b
    return None


def _signature(node: Node, anchor: Node, src: bytes) -> str:
    """Declaration text up to the body: `def f(a, b) -> int`, `public void run(Job j)`."""
    if node.type == "type_spec":  # Go: `type Server struct`
        t = node.child_by_field_name("type")
        return (
            f"type {node_text(node.child_by_field_name('name'))} {t.type.replace('_type', '') if t else ''}"
        )
    start = node.start_byte
    body = _body(node)
    if node.type == "variable_declarator":
        if node.parent is not None:
            start = node.parent.start_byte  # `const f = (x) =>` rather than `f =`
        body = _body(body) if body is not None else None
    end = node.end_byte if body is None else body.start_byte
    sig = src[start:end].decode("utf-8", "replace")
    sig = " ".join(sig.split()).rstrip(":{ ")
    return sig[:300]


def _callee(call: Node) -> str:
    fn = call.child_by_field_name("function") or call.child_by_field_name("name")
    if call.type in {"object_creation_expression", "new_expression"}:
        fn = call.child_by_field_name("type") or call.child_by_field_name("constructor")
    if fn is None:
        return ""
    # a.b.c(...) -> c : the last segment is what a reader searches for
    for fname in ("attribute", "field", "property"):
        last = fn.child_by_field_name(fname)
        if last is not None:
            return node_text(last)
    text = node_text(fn)
    return text.rsplit(".", 1)[-1] if len(text) < 80 else ""


def _collect(mine: list[int], nodes: list[Node], names: Names) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Identifiers and callee names of one unit's identifier and call `nodes` (their indices `mine`,
    `_sweep`'s order; an index below the identifiers' count is an identifier, read from `names`)."""
    ids: dict[str, None] = {}
    calls: dict[str, None] = {}
    texts = names.texts
    count = len(texts)
    for i in mine:
        if i < count:
            if len(ids) < MAX_IDENTIFIERS:
                ids.setdefault(texts[i], None)
        elif len(calls) < MAX_CALLS:
            c = _callee(nodes[i])
            if c:
                calls.setdefault(c, None)
    return tuple(ids), tuple(calls)


def _candidates(found: list[Node]) -> list[Node]:
    """The nodes that may be units (`treequery`'s "unit" capture), outer before inner, else in file
    order: the order of a depth-first walk."""
    return sorted(found, key=lambda n: (n.start_byte, -n.end_byte))


def _sweep(units: list[Node], names: Names, calls: list[Node]) -> list[list[int]]:
    """Per unit node: the identifiers (`names`, index i) and `calls` (index len(names) + j) whose
    innermost unit it is (a nested unit's are its own), enclosing before enclosed, else the later
    first: the order of a depth-first walk that pops the last child first, as a walk from each unit
    that does not enter nested units met them.

    Each byte is painted with its innermost unit (outer units first), so a node's unit is its first
    byte's, or an enclosing one's when the node reaches past it; a node of no width (a MISSING
    identifier) sits between bytes, and such a file takes the walk (`_sweep_walk`), 3 ms against
    0.4 for minidom.py's 4,400 nodes; so does a file of few nodes, where numpy's calls cost more."""
    if len(names.starts) + len(calls) < SMALL_SWEEP:  # numpy's calls cost more than the walk there
        return _sweep_walk(units, names, calls)
    starts = np.asarray(names.starts + [c.start_byte for c in calls], np.int64)
    ends = np.asarray(names.ends + [c.end_byte for c in calls], np.int64)
    if not units or bool((starts >= ends).any()):
        return _sweep_walk(units, names, calls)
    u_start = np.asarray([u.start_byte for u in units], np.int64)
    u_end = np.asarray([u.end_byte for u in units], np.int64)
    owner = np.full(int(max(u_end.max(), ends.max())) + 1, -1, np.int64)
    parent = np.full(len(units), -1, np.int64)
    for i in np.lexsort(
        (np.arange(len(units)), -u_end, u_start)
    ).tolist():  # outer first; equal spans: later inside
        parent[i] = owner[u_start[i]]
        owner[u_start[i] : u_end[i]] = i
    unit = owner[starts]
    while True:  # a node past its first byte's unit belongs to an enclosing one
        out = (unit >= 0) & (ends > u_end[np.maximum(unit, 0)])
        if not out.any():
            break
        unit[out] = parent[unit[out]]
    order = np.lexsort((np.arange(len(starts)), starts, -ends))  # the walk's order
    order = order[unit[order] >= 0]
    order = order[np.argsort(unit[order], kind="stable")]
    bounds = np.searchsorted(unit[order], np.arange(len(units) + 1)).tolist()
    flat = order.tolist()
    return [flat[a:b] for a, b in pairwise(bounds)]


def _sweep_walk(units: list[Node], names: Names, calls: list[Node]) -> list[list[int]]:
    """`_sweep` as a walk over one sorted sequence of units and nodes."""
    # one sorted sequence of units (flag 0: before a node of the same span) and nodes (flag 1)
    keyed = [(-n.end_byte, n.start_byte, 0, i) for i, n in enumerate(units)]
    keyed += [(-e, s, 1, i) for i, (s, e) in enumerate(zip(names.starts, names.ends, strict=True))]
    first = len(names.starts)
    keyed += [(-n.end_byte, n.start_byte, 1, first + i) for i, n in enumerate(calls)]
    keyed.sort()
    out: list[list[int]] = [[] for _ in units]
    open_: list[tuple[int, int, int]] = []  # (start, end, unit) of the units holding the current point
    for neg_end, start, flag, i in keyed:
        end = -neg_end
        while open_ and not (open_[-1][0] <= start and end <= open_[-1][1]):
            open_.pop()
        if flag == 0:
            open_.append((start, end, i))
        elif open_:
            out[open_[-1][2]].append(i)
    return out


def parse_tree(source: str, lang: str, parsers: Parsers) -> Tree:
    """The tree-sitter tree of `source` (units and the symbol graph's facts are both read from it)."""
    return parsers.get(lang).parse(source.encode("utf-8", "replace"))


UnitKey = tuple[int, int, str, str]  # a unit's node's start and end byte, its kind and qualified name


@dataclass
class Earlier:
    """A file's units as its last parse made them (`parse_units`' `seen`), and whether its lines
    were the tree's rows (no line break but '\n': `str.splitlines` also breaks at \r, \x0c, ...)."""

    units: dict[UnitKey, CodeUnit] = field(default_factory=dict)
    aligned: bool = True
    sound: bool = True  # the tree had no syntax error: a node's inside did not depend on what is around it


def lines_of(source: str) -> tuple[list[str], bool]:
    """The lines units are cut from, and whether they are the tree's rows."""
    lines = source.splitlines()
    return lines, len(lines) == source.count("\n") + (not source.endswith("\n") and bool(source))


def _earlier_unit(
    earlier: Earlier, span: Span, aligned: bool, node: Node, anchor: Node, kind: str, qual: str, src: bytes
) -> CodeUnit | None:
    """The unit `parse_units` made of `node` last time, moved by the lines inserted or removed before
    it, when nothing it is read from changed since (`span`: the bytes changed, as now numbered): its
    whole lines, from those of the doc comments above it (from the end of the last declaration
    before them) to its last. None when it must be made again."""
    doc_anchor = anchor
    while doc_anchor.parent is not None and doc_anchor.parent.type in {
        "export_statement",
        "decorated_definition",
    }:
        doc_anchor = doc_anchor.parent
    prev = doc_anchor.prev_named_sibling
    while prev is not None and prev.type in {"comment", "block_comment", "line_comment"}:
        prev = prev.prev_named_sibling
    parent = doc_anchor.parent
    lo = prev.end_byte if prev is not None else (parent.start_byte if parent is not None else 0)
    lo = src.rfind(b"\n", 0, min(lo, anchor.start_byte)) + 1
    hi = src.find(b"\n", node.end_byte)
    hi = len(src) if hi < 0 else hi + 1
    start, end = node.start_byte, node.end_byte
    if hi <= span.start_byte:
        return earlier.units.get((start, end, kind, qual))
    shift = span.new_end_byte - span.old_end_byte
    if lo < span.new_end_byte or not (aligned and earlier.aligned):
        return None
    u = earlier.units.get((start - shift, end - shift, kind, qual))
    rows = span.new_end_point[0] - span.old_end_point[0]
    return u if u is None or rows == 0 else moved(u, rows)


def moved(u: CodeUnit, rows: int) -> CodeUnit:
    """`u` `rows` lines further."""
    return copied(u, start=u.start + rows, end=u.end + rows)


def copied(u: CodeUnit, **changes: Any) -> CodeUnit:
    """`u` with `changes`, as `dataclasses.replace` without running `__init__` again (8 us a unit)."""
    out: CodeUnit = object.__new__(CodeUnit)
    out.__dict__.update(u.__dict__, **changes)
    return out


def parse_units(
    path: str,
    source: str,
    lang: str,
    parsers: Parsers,
    tree: Tree | None = None,
    caps: treequery.Captures | None = None,
    names: Names | None = None,
    earlier: tuple[Span, Earlier] | None = None,
    seen: Earlier | None = None,
) -> list[CodeUnit]:
    """Parse `source` (file `path`, language `lang`) into units, outer ones first (from `tree`, its
    `treequery.captures` and their `identifiers.names` when given). `earlier`: the bytes changed since
    the file's last parse and the units it made, those the change did not touch taken as they were
    (`_earlier_unit`); `seen` is filled with these units for the next parse."""
    src = source.encode("utf-8", "replace")
    tree = tree if tree is not None else parsers.get(lang).parse(src)
    caps = caps if caps is not None else treequery.captures(lang, tree.root_node, facts=False)
    names = names if names is not None else names_of(caps, src)
    lines, aligned = lines_of(source)
    sound = not tree.root_node.has_error  # error recovery reads a span by what surrounds it
    if seen is not None:
        seen.aligned, seen.sound = aligned, sound
    if earlier is not None and not (sound and earlier[1].sound):
        earlier = None
    units = [u for _, u in units_in(path, lang, src, lines, aligned, caps, names, earlier, seen)]
    header = module_header(path, lang, lines, units)
    if header is not None:
        units.insert(0, header)
    return units


def units_in(
    path: str,
    lang: str,
    src: bytes,
    lines: list[str],
    aligned: bool,
    caps: treequery.Captures,
    names: Names,
    earlier: tuple[Span, Earlier] | None,
    seen: Earlier | None,
) -> list[tuple[UnitKey, CodeUnit]]:
    """The units of the nodes `caps` holds (the file's bytes `src`, its `lines`; no module header),
    each with its key, outer ones first (`parse_units`)."""
    spec = LANGS[lang]
    found: list[tuple[Node, str, str]] = []  # (node, kind, qualname)

    # the units, each with the enclosing unit's qualified name and whether that unit is a class
    enclosing: list[tuple[int, int, str, str]] = []  # (start, end, qualname, kind) of the open units
    for node in _candidates(caps.get("unit", [])):
        kind = unit_kind(node, spec)
        if kind is None:
            continue
        name = _name_of(node, spec)
        if not name:
            continue
        start, end = node.start_byte, node.end_byte
        while enclosing and not (enclosing[-1][0] <= start and end <= enclosing[-1][1]):
            enclosing.pop()
        prefix, parent_kind = enclosing[-1][2:] if enclosing else ("", None)
        if lang == "go" and node.type == "method_declaration":
            recv = _go_receiver(node)
            qual = f"{recv}.{name}" if recv else name
            ukind = "method"
        else:
            qual = f"{prefix}.{name}" if prefix else name
            ukind = "method" if kind == "function" and parent_kind == "class" else kind
        found.append((node, ukind, qual))
        enclosing.append((start, end, qual, kind))

    nodes = caps.get("name", []) + caps.get("call", [])
    found_starts = [n.start_byte for n, _, _ in found]
    inside = _sweep([n for n, _, _ in found], names, caps.get("call", []))
    units: list[tuple[UnitKey, CodeUnit]] = []
    for (node, kind, qual), mine in zip(found, inside, strict=True):
        key = (node.start_byte, node.end_byte, kind, qual)
        anchor = node
        if node.type == "variable_declarator" and node.parent is not None:
            anchor = node.parent  # `const f = () => {}`: the declaration line is the start
        if node.type == "type_spec" and node.parent is not None and len(node.parent.named_children) == 1:
            anchor = node.parent  # `type X struct` : the doc comment sits above the type_declaration
        if anchor.parent is not None and anchor.parent.type in {"decorated_definition", "export_statement"}:
            anchor = anchor.parent
        if earlier is not None:
            kept = _earlier_unit(earlier[1], earlier[0], aligned, node, anchor, kind, qual, src)
            if kept is not None:
                units.append((key, kept))
                if seen is not None:
                    seen.units[key] = kept
                continue
        start, end = anchor.start_point[0] + 1, node.end_point[0] + 1
        doc = python_docstring(node) if lang == "python" else leading_comments(anchor)
        ids, calls = _collect(mine, nodes, names)
        name = qual.rsplit(".", 1)[-1]
        if kind == "class":
            # a class is searched by its header, doc and own lines; its methods are units of their own
            own = _own_lines(node, _units_within(node, found, found_starts), lines)
        else:
            own = "\n".join(lines[start - 1 : end])
        unit = CodeUnit(
            path=path,
            start=start,
            end=end,
            kind=kind,
            name=name,
            qualname=qual,
            lang=lang,
            signature=_signature(node, anchor, src),
            doc=doc[:2000],
            identifiers=ids,
            calls=calls,
            text=own,
        )
        units.append((key, unit))
        if seen is not None:
            seen.units[key] = unit
    return units


def _units_within(node: Node, found: list[tuple[Node, str, str]], starts: list[int]) -> list[Node]:
    """Unit nodes strictly inside `node`: among those starting in its span (`found` is sorted by
    start, `starts` its start bytes)."""
    first = bisect_left(starts, node.start_byte)
    end = bisect_right(starts, node.end_byte, first)
    return [n for n, _, _ in found[first:end] if n.id != node.id and n.end_byte <= node.end_byte]


def _own_lines(node: Node, inner: list[Node], lines: list[str]) -> str:
    """The class's lines minus the bodies of nested units (their signatures stay)."""
    start, end = node.start_point[0], node.end_point[0]
    hidden: set[int] = set()
    for n in inner:
        hidden.update(range(n.start_point[0] + 1, n.end_point[0] + 1))
    return "\n".join(lines[i] for i in range(start, min(end + 1, len(lines))) if i not in hidden)


def module_header(path: str, lang: str, lines: list[str], units: list[CodeUnit]) -> CodeUnit | None:
    """The top of the file before its first unit (header comment, imports, constants) as a unit."""
    first = min((u.start for u in units), default=len(lines) + 1)
    top = lines[: max(0, first - 1)]
    if sum(1 for ln in top if ln.strip()) < 3:
        return None
    end = min(len(top), 120)
    text = "\n".join(top[:end])
    doc = module_doc(text, lang)
    name = path.rsplit("/", 1)[-1]
    return CodeUnit(path, 1, end, "module", name, name, lang, "", doc[:2000], (), (), text)


def window_units(path: str, source: str, size: int = 60, overlap: int = 15) -> list[CodeUnit]:
    """Cut a file without a grammar into overlapping line windows."""
    lines = source.splitlines()
    if not lines:
        return []
    step = max(1, size - overlap)
    name = path.rsplit("/", 1)[-1]
    lang = name.rsplit(".", 1)[-1].lower() if "." in name else "text"
    units = []
    start = 0
    while start < len(lines):
        end = min(len(lines), start + size)
        chunk = "\n".join(lines[start:end])
        if chunk.strip():
            units.append(CodeUnit(path, start + 1, end, "window", name, name, lang, "", "", (), (), chunk))
        if end >= len(lines):
            break
        start += step
    return units


def units_for_file(
    path: str, source: str, parsers: Parsers, window: int = 60, overlap: int = 15
) -> list[CodeUnit]:
    """Units of one file: grammar-parsed when its language has one, line windows otherwise."""
    lang = language_of(path)
    if lang is None:
        return window_units(path, source, window, overlap)
    units = parse_units(path, source, lang, parsers)
    # a script with no functions or classes is still searchable
    return units or window_units(path, source, window, overlap)
