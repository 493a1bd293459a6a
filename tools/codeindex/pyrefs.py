"""A Python file's facts for the symbol graph (what they are: refs.py), read from the nodes one
tree-sitter query found (treequery.py: the "name" capture's identifiers, the "fact" capture's
`FACT_TYPES`, "called" the functions of calls) instead of a Python walk over every node.

The facts are those of a depth-first walk of the whole tree (kept as the reference in
tests/codeindex/test_pyrefs_query.py), in its order: every node the walk did not treat specially
(a block, an argument list, an expression statement, an f-string, ...) only passed its context down to
its children in file order, so the walk is run over the found nodes alone, each holding the found
nodes below it with no other found node between (a "skeleton" of the tree). Where the walk read a
field (a function's body before its parameters' annotations and defaults, an assignment's right side
before its left), the found nodes inside that field's bytes are taken, in the walk's order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tree_sitter import Node

from xihe.tools.codeindex.languages import node_text

if TYPE_CHECKING:
    from xihe.tools.codeindex.refs import FileFacts

FACT_TYPES = frozenset(
    {"attribute", "function_definition", "class_definition", "lambda", "assignment"}
    | {"augmented_assignment", "as_pattern", "global_statement", "nonlocal_statement", "except_clause"}
    | {"for_statement", "for_in_clause", "named_expression", "keyword_argument"}
    | {"import_statement", "import_from_statement"}
)
"""The node types, beside identifiers, that the walk did not just pass through."""
PATTERNS = (
    "(string (interpolation)) @fact",  # an f-string: the walk visited its interpolations last first
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


def dotted(node: Node | None) -> str:
    """`a.b.c` for a chain of names (self and super() included), else ''."""
    if node is None:
        return ""
    if node.type == "identifier":
        return node_text(node)
    if node.type == "attribute":
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


def imports_of(node: Node, facts: FileFacts, package: str) -> None:
    """Record what an import statement binds (`facts.imports`, `facts.stars`)."""
    imports = facts.imports
    if node.type == "import_statement":
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                imports[node_text(child.child_by_field_name("alias"))] = node_text(
                    child.child_by_field_name("name")
                )
            else:
                full = node_text(child)
                imports.setdefault(full.split(".", 1)[0], full.split(".", 1)[0])
        return
    mod = node.child_by_field_name("module_name")
    if mod is None:
        return
    base = absolute(mod, package) if mod.type == "relative_import" else node_text(mod)
    if any(c.type == "wildcard_import" for c in node.children):
        facts.stars.append(base)
    for child in node.children_by_field_name("name"):
        if child.type == "aliased_import":
            name = node_text(child.child_by_field_name("name"))
            imports[node_text(child.child_by_field_name("alias"))] = f"{base}.{name}" if base else name
        else:
            name = node_text(child)
            imports[name.rsplit(".", 1)[-1]] = f"{base}.{name}" if base else name


def absolute(rel: Node, package: str) -> str:
    """A `relative_import` (`..x.y`) made absolute against the file's package."""
    prefix = next((c for c in rel.children if c.type == "import_prefix"), None)
    dots = len(node_text(prefix)) if prefix is not None else 0
    base = package.split(".") if package else []
    base = base[: len(base) - (dots - 1)] if dots > 1 else base
    name = next((node_text(c) for c in rel.children if c.type == "dotted_name"), "")
    return ".".join([*base, *([name] if name else [])])


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


Frame = tuple[
    Iterator[int], str, str, str
]  # (found nodes to visit, scope, function scope or "", class or "")


_HUGE = 1 << 40  # more bytes than a file has: start * _HUGE - end sorts by start, the longer first


def extract(facts: FileFacts, package: str, caps: dict[str, list[Node]]) -> None:
    """Fill `facts` (a Python file's, `package` the file's package) from the tree's captures."""
    _Walk(facts, package, caps).run()


class _Walk:
    def __init__(self, facts: FileFacts, package: str, caps: dict[str, list[Node]]) -> None:
        self.facts, self.package = facts, package
        idents = [n for n in caps.get("name", ()) if n.type == "identifier"]
        special = caps.get("fact", [])
        found = idents + special
        kinds: list[str | None] = [None] * len(idents) + [n.type for n in special]  # None: an identifier
        starts = [n.start_byte for n in found]
        ends = [n.end_byte for n in found]
        keys = [s * _HUGE - e for s, e in zip(starts, ends, strict=True)]
        order = sorted(range(len(found)), key=keys.__getitem__)  # an enclosing node before those inside
        self.nodes = [found[j] for j in order]
        self.kinds = kinds = [kinds[j] for j in order]
        self.starts = [starts[j] for j in order]
        self.ends = ends = [ends[j] for j in order]
        self.called_names: set[int] = set()  # the start of each called identifier
        self.called_attrs: set[int] = set()  # the end of each called attribute
        for n in caps.get("called", ()):
            if n.type == "identifier":
                self.called_names.add(n.start_byte)
            else:
                self.called_attrs.add(n.end_byte)
        # the skeleton: the nearest found nodes below each found node (identifiers have none)
        self.root: list[int] = []
        self.kids: list[list[int] | None] = [None] * len(found)
        open_: list[list[int]] = []
        open_ends: list[int] = []
        for i, end in enumerate(ends):
            while open_ends and open_ends[-1] < end:
                open_ends.pop()
                open_.pop()
            (open_[-1] if open_ else self.root).append(i)
            if kinds[i] is not None:
                mine: list[int] = []
                self.kids[i] = mine
                open_.append(mine)
                open_ends.append(end)

    def region(self, i: int, node: Node | None) -> list[int]:
        """The found nodes below node `i` inside `node` (one of its fields), in file order."""
        kids = self.kids[i]
        if node is None or not kids:
            return []
        starts, ends = self.starts, self.ends
        a, b = node.start_byte, node.end_byte
        out = []
        for k in kids[bisect_left(kids, a, key=starts.__getitem__) :]:
            if starts[k] > b or (starts[k] == b and b > a):
                break
            if ends[k] <= b:
                out.append(k)
        return out

    def push(self, stack: list[Frame], i: int, node: Node | None, scope: str, fn: str, cls: str) -> None:
        """Visit the found nodes inside `node` (a field of node `i`) next, in file order."""
        found = self.region(i, node)
        if found:
            stack.append((iter(found), scope, fn, cls))

    def run(self) -> None:
        facts, nodes, kinds, starts, ends = self.facts, self.nodes, self.kinds, self.starts, self.ends
        called_names, called_attrs = self.called_names, self.called_attrs
        add = facts.refs.append
        stack: list[Frame] = [(iter(self.root), "", "", "")]
        while stack:
            found, scope, fn, cls = stack[-1]
            depth = len(stack)
            for i in found:
                t = kinds[i]
                node = nodes[i]
                if t is None:  # an identifier
                    text = node.text.decode("utf-8", "replace") if node.text is not None else ""
                    add((scope, node.start_point[0] + 1, text, "", int(starts[i] in called_names)))
                    continue
                if t == "attribute":
                    attr = node.child_by_field_name("attribute")
                    obj = node.child_by_field_name("object")
                    if attr is not None:
                        line = attr.start_point[0] + 1
                        add((scope, line, node_text(attr), receiver(obj), int(ends[i] in called_attrs)))
                    if obj is not None:
                        end = obj.end_byte
                        inside = [k for k in self.kids[i] or () if ends[k] <= end]
                        if inside:
                            stack.append((iter(inside), scope, fn, cls))
                            break
                    continue
                self._special(i, t, node, scope, fn, cls, stack)
                if len(stack) > depth:
                    break  # visit what was pushed first, then the rest of `found`
            else:
                stack.pop()

    def _special(self, i: int, t: str, node: Node, scope: str, fn: str, cls: str, stack: list[Frame]) -> None:
        """Visit a found node other than a name or an attribute, as the walk did."""
        facts = self.facts
        if t in {"import_statement", "import_from_statement"}:
            imports_of(node, facts, self.package)
        elif t == "function_definition":
            self._function(i, node, scope, fn, cls, stack)
        elif t == "class_definition":
            name = node.child_by_field_name("name")
            qual = f"{scope}.{node_text(name)}" if scope else node_text(name)
            bind(facts, fn, [name] if name is not None else [])
            self.push(stack, i, node.child_by_field_name("superclasses"), scope, fn, cls)
            self.push(stack, i, node.child_by_field_name("body"), qual, "", qual)
        elif t == "lambda":
            self.push(stack, i, node.child_by_field_name("body"), scope, fn, cls)
        elif t in {"assignment", "augmented_assignment"}:
            self._assignment(i, node, scope, fn, cls, stack)
        elif t == "as_pattern":
            alias = node.child_by_field_name("alias")
            value = node.named_children[0] if node.named_children else None
            if alias is not None:
                names = targets(alias)
                bind(facts, fn, names, value_type(value) if len(names) == 1 else "")
            self.push(stack, i, value, scope, fn, cls)
        elif t == "except_clause":
            for c in node.named_children:
                if c.type == "as_pattern":
                    alias = c.child_by_field_name("alias")
                    bind(facts, fn, targets(alias) if alias is not None else [])
                    (j,) = self.region(i, c)  # the walk visited all its children, the alias too
                    for x in c.named_children:
                        self.push(stack, j, x, scope, fn, cls)
                else:
                    self.push(stack, i, c, scope, fn, cls)
        elif t == "string":  # an f-string: the walk visited its interpolations last first
            for c in node.named_children:
                if c.type == "interpolation":
                    self.push(stack, i, c, scope, fn, cls)
        elif t in _BINDING_PARENTS:  # a for loop or clause, a walrus, a keyword argument: all but the name
            skip = node.child_by_field_name(_BINDING_PARENTS[t])
            kids = self.kids[i] or []
            if skip is not None:
                if t != "keyword_argument":
                    bind(facts, fn, targets(skip))
                dropped = set(self.region(i, skip))
                kids = [k for k in kids if k not in dropped]
            if kids:
                stack.append((iter(kids), scope, fn, cls))
        # global and nonlocal statements: nothing

    def _function(self, i: int, node: Node, scope: str, fn: str, cls: str, stack: list[Frame]) -> None:
        facts = self.facts
        name = node.child_by_field_name("name")
        qual = f"{scope}.{node_text(name)}" if scope else node_text(name)
        bind(facts, fn, [name] if name is not None else [])
        params = node.child_by_field_name("parameters")
        ret = node.child_by_field_name("return_type")
        if ret is not None:
            facts.returns[qual] = node_text(ret)
            self.push(stack, i, ret, scope, fn, cls)
        own_cls = cls if scope == cls and cls else ""  # a method: `self.x = ...` types its class
        if params is not None:
            for p in params.named_children:
                ident = p if p.type == "identifier" else p.child_by_field_name("name")
                if ident is None and p.named_children:
                    ident = p.named_children[0] if p.named_children[0].type == "identifier" else None
                typ = p.child_by_field_name("type")
                kind = ":" + node_text(typ) if typ is not None else _SPLAT.get(p.type, "")
                if ident is not None:
                    bind(facts, qual, [ident], kind)
                self.push(stack, i, typ, scope, fn, cls)
                self.push(stack, i, p.child_by_field_name("value"), scope, fn, cls)
        self.push(stack, i, node.child_by_field_name("body"), qual, qual, own_cls)

    def _assignment(self, i: int, node: Node, scope: str, fn: str, cls: str, stack: list[Frame]) -> None:
        facts = self.facts
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
                self.push(stack, i, left, scope, fn, cls)
            elif node.type == "augmented_assignment":
                self.push(stack, i, left, scope, fn, cls)
            elif (
                left.type == "identifier" and cls and scope == cls and kind
            ):  # `conn: Adapter` in a class body
                add_type(facts.types.setdefault(cls, {}), f"self.{node_text(left)}", kind)
            else:
                names = targets(left)
                bind(facts, fn, names, kind if len(names) == 1 else "")
                if not names:
                    self.push(stack, i, left, scope, fn, cls)
        self.push(stack, i, typ, scope, fn, cls)
        self.push(stack, i, right, scope, fn, cls)
