"""A Python file's facts for the symbol graph (what they are: refs.py), read from the nodes one
tree-sitter query found (treequery.py: the "name" capture's identifiers, a "fact.<type>" capture per
type of `FACT_TYPES`, "called" the functions of calls) instead of a Python walk over every node.

The facts are those of a depth-first walk of the whole tree (kept as the reference in
tests/codeindex/test_pyrefs_query.py), in its order: every node the walk did not treat specially
(a block, an argument list, an expression statement, an f-string, ...) only passed its context down to
its children in file order, so the walk is run over the found nodes alone, each holding the found
nodes below it with no other found node between (a "skeleton" of the tree). Where the walk read a
field (a function's body before its parameters' annotations and defaults, an assignment's right side
before its left), the found nodes inside that field's bytes are taken, in the walk's order.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from xihe.tools.codeindex.filefacts import FileFacts
from xihe.tools.codeindex.identifiers import Names
from xihe.tools.codeindex.identifiers import names as names_of
from xihe.tools.codeindex.languages import node_text
from xihe.tools.codeindex.pyimports import imports_of

if TYPE_CHECKING:
    from xihe.tools.codeindex.retree import Span

FACT_TYPES = frozenset(
    {"attribute", "function_definition", "class_definition", "lambda", "assignment"}
    | {"augmented_assignment", "as_pattern", "global_statement", "nonlocal_statement", "except_clause"}
    | {"for_statement", "for_in_clause", "named_expression", "keyword_argument"}
    | {"import_statement", "import_from_statement"}
)
"""The node types, beside identifiers, that the walk did not just pass through."""
_CAPTURED = tuple(sorted(FACT_TYPES | {"string"}))  # each type's capture is "fact.<type>" (treequery.py)
PATTERNS = (
    "(string (interpolation)) @fact.string",  # an f-string: the walk visited its interpolations last first
    "(call function: [(identifier) (attribute)] @called)",
)
"""The query's patterns beside one per type (treequery.py)."""

_BINDING_PARENTS = {
    "for_statement": "left",
    "for_in_clause": "left",
    "named_expression": "name",
    "keyword_argument": "name",
}
_SPLAT = {"list_splat_pattern": ":tuple", "dictionary_splat_pattern": ":dict"}
_LITERALS = frozenset(
    {"string", "concatenated_string", "integer", "float", "list", "dictionary", "set", "tuple"}
    | {"list_comprehension", "dictionary_comprehension", "set_comprehension", "binary_operator"}
)


_CHAIN = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_NOT_NAMES = frozenset({b"True", b"False", b"None"})  # literals, not names: no chain


def dotted(node: Node | None) -> str:
    """`a.b.c` for a chain of names (self and super() included), else ''."""
    if node is None:
        return ""
    if node.type == "identifier":
        return node_text(node)
    if node.type == "attribute":
        text = node.text or b""
        if _CHAIN.fullmatch(text) and text.split(b".", 1)[0] not in _NOT_NAMES:
            return text.decode()  # `a.b.c` written plainly: the chain is its text
        obj = dotted(node.child_by_field_name("object"))
        attr = node.child_by_field_name("attribute")
        return f"{obj}.{node_text(attr)}" if obj and attr is not None else ""
    if node.type == "call":
        fn = node.child_by_field_name("function")
        if fn is not None and fn.type == "identifier" and node_text(fn) == "super":
            return "super"
    return ""


def receiver(obj: Node | None) -> str:
    """How an attribute was reached (refs.py's `receiver`) from its object node."""
    if obj is None:
        return "?"
    if obj.type in _LITERALS:
        return "!"  # a method of a builtin value: `", ".join(...)`
    d = dotted(obj)
    if d:
        return "." + d
    if obj.type == "call":
        fn = dotted(obj.child_by_field_name("function"))
        if fn:
            return "()" + fn
    return "?"


def value_type(value: Node | None) -> str:
    """What a name assigned `value` holds: `()f` for a call of a named callable, `=a.b` the value of
    a chain of names, else ''."""
    if value is not None and value.type == "call":
        fn = dotted(value.child_by_field_name("function"))
        if fn and fn != "super":
            return "()" + fn
    if value is not None and value.type in {"identifier", "attribute"}:
        chain = dotted(value)
        if chain and chain != "None":
            return "=" + chain
    return ""


def targets(node: Node) -> list[Node]:
    """The identifiers a binding target (name, tuple, list pattern) binds."""
    if node.type == "identifier":
        return [node]
    if node.type in {"pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "as_pattern_target"}:
        return [i for c in node.named_children for i in targets(c)]
    if node.type in {"list_splat_pattern", "parenthesized_expression"}:
        return [i for c in node.named_children for i in targets(c)]
    return []


def add_type(types: dict[str, str], name: str, kind: str) -> None:
    """Record one more thing `name` may hold (the types are newline-separated, first seen first)."""
    old = types.get(name)
    if old is None:
        types[name] = kind
    elif kind not in old.split("\n"):
        types[name] = f"{old}\n{kind}"


def bind(facts: FileFacts, scope: str, names: list[Node], kind: str = "") -> None:
    """Record the names a function `scope` binds ('' : not in a function, nothing recorded)."""
    if not scope:
        return
    bound = facts.locals.setdefault(scope, [])
    for n in names:
        text = node_text(n)
        if text not in bound:
            bound.append(text)
        if kind:
            add_type(facts.types.setdefault(scope, {}), text, kind)


Frame = tuple[int, int, str, str, str]  # (first position, end position, scope, function scope, class)


_WIDE = 1 << 32  # more bytes than a file has: start * _WIDE - end sorts by start, the longer first


@dataclass
class Statements:
    """A file's facts per top-level statement, by its node's start and end byte and type, as a parse
    made them (`extract`'s `seen`), for the next parse of the file to take those the change did not touch."""

    facts: dict[tuple[int, int, str], tuple[int, FileFacts]] = field(
        default_factory=dict
    )  # (positions, facts)


def extract(
    facts: FileFacts,
    package: str,
    caps: dict[str, list[Node]],
    root: Node,
    names: Names | None = None,
    earlier: tuple[Span, Statements] | None = None,
    seen: Statements | None = None,
    whole: bool = True,
) -> bool:
    """Fill `facts` (a Python file's, `package` the file's package) from the captures of the tree
    whose root is `root` (and their identifiers' `identifiers.names` when already read).

    With `seen`, the walk goes one top-level statement at a time (each starts at module level, as the
    whole walk is there between statements), keeping each one's facts in `seen`; with `earlier` (the
    bytes changed since the last parse, and what it kept) a statement outside them is taken from it,
    its lines moved. The statements' facts are joined in order; when a name is in two statements'
    (two `def f`, an import made twice), where the walk would have read or overwritten the first,
    the file is walked whole. `whole`: `caps` hold the whole file's nodes; else only those of the
    statements not taken from `earlier` (`statements.py`), and False is returned, `facts` left empty,
    where the file must be walked whole."""
    walk = _Walk(facts, package, caps, root, names)
    if seen is None:
        walk.run(0, len(walk.order))
        return True
    parts, inside = [], 0
    for child in root.children:
        key = (child.start_byte, child.end_byte, child.type)
        lo, hi = walk.inside(0, len(walk.order), child.start_byte, child.end_byte)
        inside += hi - lo
        got = _earlier_part(earlier, key) if earlier is not None else None
        if got is None:
            got = (hi - lo, walk.part(lo, hi))
        seen.facts[key] = got
        parts.append(got[1])
    if inside == len(walk.order) and _joined(facts, parts):  # every node in a statement, no name twice
        return True
    facts.imports, facts.stars, facts.refs = {}, [], []
    facts.locals, facts.types, facts.returns = {}, {}, {}
    if whole:
        walk.run(0, len(walk.order))
    return whole


def _earlier_part(
    earlier: tuple[Span, Statements], key: tuple[int, int, str]
) -> tuple[int, FileFacts] | None:
    """The facts the last parse kept for the statement at `key` when the change (`span`) left its
    bytes alone: as they were before it, with their lines moved after it."""
    span, kept = earlier
    start, end, kind = key
    if end <= span.start_byte:
        return kept.facts.get(key)
    if start < span.new_end_byte:
        return None
    shift = span.new_end_byte - span.old_end_byte
    got = kept.facts.get((start - shift, end - shift, kind))
    rows = span.new_end_point[0] - span.old_end_point[0]
    if got is None or rows == 0:
        return got
    moved = copy.copy(got[1])
    moved.refs = [(scope, line + rows, name, how, called) for scope, line, name, how, called in got[1].refs]
    return got[0], moved


def _joined(facts: FileFacts, parts: list[FileFacts]) -> bool:
    """`parts` added to `facts` in order, as one walk would have made them; False when a name is in
    two parts' locals, types or returns, or imported as two things (the walk's result then depends
    on both; the same import in two functions is common, `from xml.dom import expatbuilder`)."""
    owners: list[dict[str, object]] = [{}, {}, {}]
    for part in parts:
        named: tuple[Mapping[str, object], ...] = (part.locals, part.types, part.returns)
        for owner, got in zip(owners, named, strict=True):
            for key in got:
                if owner.setdefault(key, part) is not part:
                    return False
        imports = facts.imports
        if any(imports.get(name, target) != target for name, target in part.imports.items()):
            return False
        imports.update(part.imports)
        facts.stars += part.stars
        facts.refs += part.refs
        facts.locals.update(part.locals)
        facts.types.update(part.types)
        facts.returns.update(part.returns)
    return True


class _Walk:
    """The found nodes in file order, an enclosing node before those inside ("positions"): the nodes
    inside a node, or inside one of its fields, are the positions from it to the first that starts
    at or after its end (found by bisection), so a field's nodes are a range of positions.

    What an identifier's ref needs (its line, text and whether it is called) is read for all of them
    at once, the lines by bisecting the file's newlines in numpy, the texts sliced from the decoded
    file when it is ASCII; a fact node's type is its capture's (treequery.py), not asked of the node."""

    def __init__(
        self, facts: FileFacts, package: str, caps: dict[str, list[Node]], root: Node, names: Names | None
    ) -> None:
        self.facts, self.package = facts, package
        # the file's bytes, indexed by byte offset (the root may start after leading blank lines)
        head, body = root.start_byte, root.text or b""
        self.src = src = bytes(head) + body if head else body
        idents = caps.get("name", [])
        names = names if names is not None else names_of(caps, src)
        special: list[Node] = []
        self.types: list[str] = []  # the type of special[i]: its capture's
        types = self.types
        for t in _CAPTURED:
            got = caps.get(f"fact.{t}")
            if got:
                special += got
                types += [t] * len(got)
        self.idents = n = len(idents)  # found node j < idents: an identifier, else special[j - idents]
        self.nodes = idents + special
        self.starts = starts = names.starts + [node.start_byte for node in special]
        self.ends = ends = names.ends + [node.end_byte for node in special]
        first, last = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        order = np.argsort(first * _WIDE - last, kind="stable")  # position -> found node
        self.order = order.tolist()
        self.at = first[order].tolist()  # position -> its node's start
        self.called_attrs: set[int] = set()  # the end of each called attribute
        called_names: set[int] = set()  # the start of each called identifier
        for node in caps.get("called", ()):
            if node.type == "identifier":
                called_names.add(node.start_byte)
            else:
                self.called_attrs.add(node.end_byte)
        # per identifier (j < idents): its line (tree-sitter counts rows by '\n'), text, and whether called
        newlines = np.flatnonzero(np.frombuffer(body, np.uint8) == 10) + head
        self.lines = (np.searchsorted(newlines, first[:n]) + (root.start_point[0] + 1)).tolist()
        self.texts = names.texts
        self.called = [1 if x in called_names else 0 for x in names.starts]

    def inside(self, lo: int, hi: int, a: int, b: int) -> tuple[int, int]:
        """The positions in [lo, hi) of the nodes inside the bytes [a, b): (first, end); a node of no
        width at `b` counts as inside, as the tree's nesting puts it there."""
        at, order, ends = self.at, self.order, self.ends
        x = bisect_left(at, a, lo, hi)
        y = bisect_left(at, b, x, hi)
        while y < hi and at[y] == b and ends[order[y]] == b:
            y += 1
        return x, y

    def push(
        self, stack: list[Frame], lo: int, hi: int, node: Node | None, scope: str, fn: str, cls: str
    ) -> None:
        """Visit the found nodes inside `node` (a field of the node whose inside is [lo, hi)) next."""
        if node is not None:
            a, b = node.start_byte, node.end_byte
            x, y = (
                self.inside(lo, hi, a, b)
                if b > a
                else (bisect_left(self.at, a, lo, hi), bisect_right(self.at, b, lo, hi))
            )
            if x < y:
                stack.append((x, y, scope, fn, cls))

    def part(self, lo: int, hi: int) -> FileFacts:
        """The facts of positions [lo, hi) walked from module level, apart from the file's."""
        whole, self.facts = self.facts, FileFacts(self.facts.lang, self.facts.module)
        try:
            self.run(lo, hi)
            return self.facts
        finally:
            self.facts = whole

    def run(self, first: int, end: int) -> None:
        facts, nodes, order, at, starts, ends = (
            self.facts,
            self.nodes,
            self.order,
            self.at,
            self.starts,
            self.ends,
        )
        idents, types, src, called_attrs = self.idents, self.types, self.src, self.called_attrs
        lines, texts, called, add = self.lines, self.texts, self.called, facts.refs.append
        stack: list[Frame] = [(first, end, "", "", "")]
        while stack:
            p, q, scope, fn, cls = stack.pop()
            while p < q:
                j = order[p]
                if j < idents:
                    add((scope, lines[j], texts[j], "", called[j]))
                    p += 1
                    continue
                end = ends[j]
                sub = bisect_left(at, end, p + 1, q)  # the first position after the node's inside
                while sub < q and at[sub] == end and ends[order[sub]] == end:
                    sub += 1
                t = types[j - idents]
                if t == "attribute":
                    if sub == p + 3:  # `name.attr`: its two identifiers, read without asking the tree
                        o, a = order[p + 1], order[p + 2]
                        if (
                            o < idents
                            and a < idents
                            and starts[o] == starts[j]
                            and ends[a] == end
                            and src[ends[o]] == 46  # a '.' right after the name: it is the object
                        ):
                            add((scope, lines[a], texts[a], "." + texts[o], 1 if end in called_attrs else 0))
                            add((scope, lines[o], texts[o], "", 0))
                            p = sub
                            continue
                    node = nodes[j]
                    attr_node = node.child_by_field_name("attribute")
                    obj_node = node.child_by_field_name("object")
                    if attr_node is not None:
                        line = attr_node.start_point[0] + 1
                        add(
                            (
                                scope,
                                line,
                                node_text(attr_node),
                                receiver(obj_node),
                                1 if end in called_attrs else 0,
                            )
                        )
                    if obj_node is not None:
                        x, y = self.inside(p + 1, sub, obj_node.start_byte, obj_node.end_byte)
                        if x < y:
                            stack.append((sub, q, scope, fn, cls))
                            stack.append((x, y, scope, fn, cls))
                            break
                    p = sub
                    continue
                depth = len(stack)
                self._special(p + 1, sub, t, j, scope, fn, cls, stack)
                if len(stack) > depth:  # visit what was pushed, then the rest
                    stack.insert(depth, (sub, q, scope, fn, cls))
                    break
                p = sub

    def _special(
        self, lo: int, hi: int, t: str, j: int, scope: str, fn: str, cls: str, stack: list[Frame]
    ) -> None:
        """Visit a found node (`nodes[j]`) other than a name or an attribute, as the walk did ([lo, hi):
        inside it)."""
        facts, node = self.facts, self.nodes[j]
        if t in {"assignment", "augmented_assignment"}:
            self._assignment(lo, hi, t, j, scope, fn, cls, stack)
        elif t == "function_definition":
            self._function(lo, hi, node, scope, fn, cls, stack)
        elif t in {"import_statement", "import_from_statement"}:
            imports_of(node, facts, self.package)
        elif t == "class_definition":
            name = node.child_by_field_name("name")
            qual = f"{scope}.{node_text(name)}" if scope else node_text(name)
            bind(facts, fn, [name] if name is not None else [])
            self.push(stack, lo, hi, node.child_by_field_name("superclasses"), scope, fn, cls)
            self.push(stack, lo, hi, node.child_by_field_name("body"), qual, "", qual)
        elif t == "lambda":
            self.push(stack, lo, hi, node.child_by_field_name("body"), scope, fn, cls)
        elif t == "as_pattern":
            alias = node.child_by_field_name("alias")
            value = node.named_children[0] if node.named_children else None
            if alias is not None:
                names = targets(alias)
                bind(facts, fn, names, value_type(value) if len(names) == 1 else "")
            self.push(stack, lo, hi, value, scope, fn, cls)
        elif t == "except_clause":
            for c in node.named_children:
                if c.type == "as_pattern":
                    alias = c.child_by_field_name("alias")
                    bind(facts, fn, targets(alias) if alias is not None else [])
                    below = bisect_left(self.at, c.start_byte, lo, hi) + 1  # inside the as_pattern
                    for x in c.named_children:  # the walk visited all its children, the alias too
                        self.push(stack, below, hi, x, scope, fn, cls)
                else:
                    self.push(stack, lo, hi, c, scope, fn, cls)
        elif t == "string":  # an f-string: the walk visited its interpolations last first
            for c in node.named_children:
                if c.type == "interpolation":
                    self.push(stack, lo, hi, c, scope, fn, cls)
        elif t in _BINDING_PARENTS:  # a for loop or clause, a walrus, a keyword argument: all but the name
            skip = node.child_by_field_name(_BINDING_PARENTS[t])
            if skip is None:
                stack.append((lo, hi, scope, fn, cls))
                return
            if t != "keyword_argument":
                bind(facts, fn, targets(skip))
            before, after = self.inside(lo, hi, skip.start_byte, skip.end_byte)
            for first, end in ((after, hi), (lo, before)):  # the nodes after the name are visited last
                if first < end:
                    stack.append((first, end, scope, fn, cls))
        # global and nonlocal statements: nothing

    def _function(
        self, lo: int, hi: int, node: Node, scope: str, fn: str, cls: str, stack: list[Frame]
    ) -> None:
        facts = self.facts
        name = node.child_by_field_name("name")
        qual = f"{scope}.{node_text(name)}" if scope else node_text(name)
        bind(facts, fn, [name] if name is not None else [])
        params = node.child_by_field_name("parameters")
        ret = node.child_by_field_name("return_type")
        if ret is not None:
            facts.returns[qual] = node_text(ret)
            self.push(stack, lo, hi, ret, scope, fn, cls)
        own_cls = cls if scope == cls and cls else ""  # a method: `self.x = ...` types its class
        if params is not None:
            for p in params.named_children:
                if p.type == "identifier":
                    bind(facts, qual, [p])
                    continue
                ident = p.child_by_field_name("name")
                if ident is None and p.named_children:
                    ident = p.named_children[0] if p.named_children[0].type == "identifier" else None
                typ = p.child_by_field_name("type")
                kind = ":" + node_text(typ) if typ is not None else _SPLAT.get(p.type, "")
                if ident is not None:
                    bind(facts, qual, [ident], kind)
                self.push(stack, lo, hi, typ, scope, fn, cls)
                self.push(stack, lo, hi, p.child_by_field_name("value"), scope, fn, cls)
        self.push(stack, lo, hi, node.child_by_field_name("body"), qual, qual, own_cls)

    def _assignment(
        self, lo: int, hi: int, t: str, j: int, scope: str, fn: str, cls: str, stack: list[Frame]
    ) -> None:
        facts, node, starts, ends = self.facts, self.nodes[j], self.starts, self.ends
        first = self.order[lo] if lo < hi else self.idents
        if t == "assignment" and first < self.idents and starts[first] == starts[j]:
            after = ends[first]
            if (
                self.src[after : after + 3] == b" = "
            ):  # `name = value`, the common case, asked less of the tree
                right = node.child_by_field_name("right")
                kind = value_type(right)
                name = self.texts[first]
                if cls and scope == cls and kind:  # `handler = Handler()` in a class body
                    add_type(facts.types.setdefault(cls, {}), f"self.{name}", kind)
                elif fn:
                    bound = facts.locals.setdefault(fn, [])
                    if name not in bound:
                        bound.append(name)
                    if kind:
                        add_type(facts.types.setdefault(fn, {}), name, kind)
                if right is not None and right.end_byte == ends[j]:  # the rest of the assignment is `value`
                    if lo + 1 < hi:
                        stack.append((lo + 1, hi, scope, fn, cls))
                else:
                    self.push(stack, lo + 1, hi, right, scope, fn, cls)
                return
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        typ = node.child_by_field_name("type")
        kind = ":" + node_text(typ) if typ is not None else value_type(right)
        if left is not None:
            if left.type == "attribute":
                obj = left.child_by_field_name("object")
                if kind.startswith("=") and fn:  # `self.deps = deps`: the parameter's type, read here
                    kind = (
                        facts.types.get(fn, {}).get(kind[1:].split(".", 1)[0], "") if "." not in kind else ""
                    )
                if cls and kind and obj is not None and node_text(obj) == "self":
                    attr = node_text(left.child_by_field_name("attribute"))
                    add_type(facts.types.setdefault(cls, {}), f"self.{attr}", kind)
                self.push(stack, lo, hi, left, scope, fn, cls)
            elif node.type == "augmented_assignment":
                self.push(stack, lo, hi, left, scope, fn, cls)
            elif (
                left.type == "identifier" and cls and scope == cls and kind
            ):  # `conn: Adapter` in a class body
                add_type(facts.types.setdefault(cls, {}), f"self.{node_text(left)}", kind)
            else:
                names = targets(left)
                bind(facts, fn, names, kind if len(names) == 1 else "")
                if not names:
                    self.push(stack, lo, hi, left, scope, fn, cls)
        self.push(stack, lo, hi, typ, scope, fn, cls)
        self.push(stack, lo, hi, right, scope, fn, cls)
