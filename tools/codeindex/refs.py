"""A file's facts for the symbol graph, read from the tree its units were parsed from.

What a reference names is decided later (graph.py), across files; here each file says only what it
holds, so a changed file's facts replace its old ones and nothing else is re-read:

- `module`: a Python file's dotted module name (`requests/sessions.py` -> `requests.sessions`);
- `imports`: local name -> absolute dotted target (`from .models import Request as R` in
  `requests/api.py` gives `R -> requests.models.Request`), `stars` the modules `import *` reads;
- `refs`: every use of a name, `[scope, line, name, receiver, called]`: `scope` is the qualified name
  of the innermost unit around it ('' at module level), `receiver` how the name was reached (''
  bare; `.a.b` through the names `a.b`, `.self` and `.super` included; `()f` on what calling `f`
  returned; `!` on a literal; `?` through any other expression), `called` 1 when it is called;
- `locals`: the names a function binds (parameters, assignments, loop and `with` targets), which
  hide module-level ones of the same name;
- `types`: per scope, what a local name (or `self.attr`, under the class) was assigned: `()f` the
  result of calling `f`, `:T` an annotation, `=a.b` the value of that expression in the scope;
  several, newline-separated, in the order seen;
- `returns`: a function's return annotation.

Python is read whole (every name in load position). Java, Go, JavaScript and TypeScript give their
calls and `new` expressions, Java its imports and JavaScript/TypeScript theirs (jsimports.py); their scope is the innermost unit by line.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from xihe.tools.codeindex import jsimports, treequery
from xihe.tools.codeindex.languages import LANGS, node_text
from xihe.tools.codeindex.units import CodeUnit

Ref = tuple[str, int, str, str, int]  # (scope, line, name, receiver, called)


@dataclass
class FileFacts:
    """What one file holds for the graph (see the module doc)."""

    lang: str
    module: str = ""
    imports: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    refs: list[Ref] = field(default_factory=list)
    locals: dict[str, list[str]] = field(default_factory=dict)
    types: dict[str, dict[str, str]] = field(default_factory=dict)
    returns: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> list[Any]:
        """A compact JSON-ready list (graph.jsonl keeps one per file)."""
        return [
            self.lang,
            self.module,
            self.imports,
            self.stars,
            [list(r) for r in self.refs],
            self.locals,
            self.types,
            self.returns,
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> FileFacts:
        """Inverse of to_json."""
        lang, module, imports, stars, refs, local, types, returns = data
        return cls(lang, module, imports, stars, [tuple(r) for r in refs], local, types, returns)


def module_name(path: str) -> str:
    """`a/b/c.py` -> `a.b.c`; `a/b/__init__.py` -> `a.b`."""
    stem = path.rsplit(".", 1)[0]
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def extract(
    path: str, lang: str, root: Node, units: list[CodeUnit], caps: treequery.Captures | None = None
) -> FileFacts:
    """The facts of one parsed file (`root` is its tree's root, `units` its units, `caps` the tree's
    `treequery.captures` when already made)."""
    if lang == "python":
        return _Python(path).run(root)
    return _calls(path, lang, root, units, caps)


# ---- Python --------------------------------------------------------------------------------------
_BINDING_PARENTS = {
    "for_statement": "left",
    "for_in_clause": "left",
    "named_expression": "name",
    "keyword_argument": "name",
}
_SPLAT = {"list_splat_pattern": ":tuple", "dictionary_splat_pattern": ":dict"}
_SKIP = frozenset({"comment", "integer", "float", "true", "false", "none", "ellipsis"})


def _dotted(node: Node | None) -> str:
    """`a.b.c` for a chain of names (self and super() included), else ''."""
    if node is None:
        return ""
    if node.type == "identifier":
        return node_text(node)
    if node.type == "attribute":
        obj = _dotted(node.child_by_field_name("object"))
        attr = node.child_by_field_name("attribute")
        return f"{obj}.{node_text(attr)}" if obj and attr is not None else ""
    if node.type == "call":
        fn = node.child_by_field_name("function")
        if fn is not None and fn.type == "identifier" and node_text(fn) == "super":
            return "super"
    return ""


_LITERALS = frozenset(
    {"string", "concatenated_string", "integer", "float", "list", "dictionary", "set", "tuple"}
    | {"list_comprehension", "dictionary_comprehension", "set_comprehension", "binary_operator"}
)


def _receiver(obj: Node | None) -> str:
    if obj is None:
        return "?"
    if obj.type in _LITERALS:
        return "!"  # a method of a builtin value: `", ".join(...)`
    d = _dotted(obj)
    if d:
        return "." + d
    if obj.type == "call":
        fn = _dotted(obj.child_by_field_name("function"))
        if fn:
            return "()" + fn
    return "?"


def _value_type(value: Node | None) -> str:
    """What a name assigned `value` holds: `()f` for a call of a named callable, `=a.b` the value of
    a chain of names, else ''."""
    if value is not None and value.type == "call":
        fn = _dotted(value.child_by_field_name("function"))
        if fn and fn != "super":
            return "()" + fn
    if value is not None and value.type in {"identifier", "attribute"}:
        chain = _dotted(value)
        if chain and chain != "None":
            return "=" + chain
    return ""


def _targets(node: Node) -> list[Node]:
    """The identifiers a binding target (name, tuple, list pattern) binds."""
    if node.type == "identifier":
        return [node]
    if node.type in {"pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "as_pattern_target"}:
        return [i for c in node.named_children for i in _targets(c)]
    if node.type in {"list_splat_pattern", "parenthesized_expression"}:
        return [i for c in node.named_children for i in _targets(c)]
    return []


def _add_type(types: dict[str, str], name: str, kind: str) -> None:
    """Record one more thing `name` may hold (the types are newline-separated, first seen first)."""
    old = types.get(name)
    if old is None:
        types[name] = kind
    elif kind not in old.split("\n"):
        types[name] = f"{old}\n{kind}"


class _Python:
    def __init__(self, path: str) -> None:
        self.path = path
        self.facts = FileFacts("python", module_name(path))
        pkg = self.facts.module if path.endswith("__init__.py") else self.facts.module.rpartition(".")[0]
        self.package = pkg

    def _absolute(self, rel: Node) -> str:
        """A `relative_import` (`..x.y`) made absolute against this file's package."""
        prefix = next((c for c in rel.children if c.type == "import_prefix"), None)
        dots = len(node_text(prefix)) if prefix is not None else 0
        base = self.package.split(".") if self.package else []
        base = base[: len(base) - (dots - 1)] if dots > 1 else base
        name = next((node_text(c) for c in rel.children if c.type == "dotted_name"), "")
        return ".".join([*base, *([name] if name else [])])

    def _import(self, node: Node) -> None:
        imports = self.facts.imports
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
        base = self._absolute(mod) if mod.type == "relative_import" else node_text(mod)
        if any(c.type == "wildcard_import" for c in node.children):
            self.facts.stars.append(base)
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = node_text(child.child_by_field_name("name"))
                imports[node_text(child.child_by_field_name("alias"))] = f"{base}.{name}" if base else name
            else:
                name = node_text(child)
                imports[name.rsplit(".", 1)[-1]] = f"{base}.{name}" if base else name

    def _bind(self, scope: str, names: list[Node], kind: str = "") -> None:
        if not scope:
            return
        bound = self.facts.locals.setdefault(scope, [])
        for n in names:
            text = node_text(n)
            if text not in bound:
                bound.append(text)
            if kind:
                _add_type(self.facts.types.setdefault(scope, {}), text, kind)

    def run(self, root: Node) -> FileFacts:
        refs = self.facts.refs
        # (node, scope, function scope or '', enclosing class qualname or '', called)
        stack: list[tuple[Node, str, str, str, bool]] = [(root, "", "", "", False)]
        while stack:
            node, scope, fn, cls, called = stack.pop()
            t = node.type
            if t in _SKIP:
                continue
            if t == "string":  # only an f-string's interpolations hold code
                stack.extend(
                    (c, scope, fn, cls, False) for c in node.named_children if c.type == "interpolation"
                )
                continue
            if t == "identifier":
                refs.append((scope, node.start_point[0] + 1, node_text(node), "", int(called)))
                continue
            if t == "attribute":
                attr = node.child_by_field_name("attribute")
                obj = node.child_by_field_name("object")
                if attr is not None:
                    refs.append(
                        (scope, attr.start_point[0] + 1, node_text(attr), _receiver(obj), int(called))
                    )
                if obj is not None:
                    stack.append((obj, scope, fn, cls, False))
                continue
            if t in {"import_statement", "import_from_statement"}:
                self._import(node)
                continue
            if t == "call":
                func = node.child_by_field_name("function")
                args = node.child_by_field_name("arguments")
                if args is not None:
                    stack.append((args, scope, fn, cls, False))
                if func is not None:
                    stack.append((func, scope, fn, cls, True))
                continue
            if t in {"function_definition", "class_definition"}:
                self._definition(node, scope, fn, cls, stack)
                continue
            if t == "lambda":
                body = node.child_by_field_name("body")
                if body is not None:
                    stack.append((body, scope, fn, cls, False))
                continue
            if t in {"assignment", "augmented_assignment"}:
                self._assignment(node, scope, fn, cls, stack)
                continue
            if t == "as_pattern":
                alias = node.child_by_field_name("alias")
                value = node.named_children[0] if node.named_children else None
                if alias is not None:
                    targets = _targets(alias)
                    self._bind(fn, targets, _value_type(value) if len(targets) == 1 else "")
                if value is not None:
                    stack.append((value, scope, fn, cls, False))
                continue
            if t in {"global_statement", "nonlocal_statement"}:
                continue
            if t == "except_clause":
                for c in node.named_children:
                    if c.type == "as_pattern":
                        alias = c.child_by_field_name("alias")
                        self._bind(fn, _targets(alias) if alias is not None else [])
                        stack.extend((x, scope, fn, cls, False) for x in c.named_children if x is not alias)
                    else:
                        stack.append((c, scope, fn, cls, False))
                continue
            binding = _BINDING_PARENTS.get(t)
            skip = node.child_by_field_name(binding) if binding else None
            if skip is not None and t != "keyword_argument":
                self._bind(fn, _targets(skip))
            for c in reversed(node.named_children):
                if skip is None or c.id != skip.id:
                    stack.append((c, scope, fn, cls, False))
        return self.facts

    def _definition(
        self, node: Node, scope: str, fn: str, cls: str, stack: list[tuple[Node, str, str, str, bool]]
    ) -> None:
        name = node_text(node.child_by_field_name("name"))
        qual = f"{scope}.{name}" if scope else name
        self._bind(fn, [n for n in [node.child_by_field_name("name")] if n is not None])
        body = node.child_by_field_name("body")
        if node.type == "class_definition":
            supers = node.child_by_field_name("superclasses")
            if supers is not None:
                stack.append((supers, scope, fn, cls, False))
            if body is not None:
                stack.append((body, qual, "", qual, False))
            return
        params = node.child_by_field_name("parameters")
        ret = node.child_by_field_name("return_type")
        if ret is not None:
            self.facts.returns[qual] = node_text(ret)
            stack.append((ret, scope, fn, cls, False))
        own_cls = cls if scope == cls and cls else ""  # a method: `self.x = ...` types its class
        if params is not None:
            for p in params.named_children:
                ident = p if p.type == "identifier" else p.child_by_field_name("name")
                if ident is None and p.named_children:
                    ident = p.named_children[0] if p.named_children[0].type == "identifier" else None
                typ = p.child_by_field_name("type")
                kind = ":" + node_text(typ) if typ is not None else _SPLAT.get(p.type, "")
                if ident is not None:
                    self._bind(qual, [ident], kind)
                for sub in (typ, p.child_by_field_name("value")):
                    if sub is not None:
                        stack.append((sub, scope, fn, cls, False))
        if body is not None:
            stack.append((body, qual, qual, own_cls, False))

    def _assignment(
        self, node: Node, scope: str, fn: str, cls: str, stack: list[tuple[Node, str, str, str, bool]]
    ) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        typ = node.child_by_field_name("type")
        kind = ":" + node_text(typ) if typ is not None else _value_type(right)
        if left is not None:
            if left.type == "attribute":
                obj = left.child_by_field_name("object")
                if kind.startswith("=") and fn:  # `self.deps = deps`: the parameter's type, read here
                    kind = (
                        self.facts.types.get(fn, {}).get(kind[1:].split(".", 1)[0], "")
                        if "." not in kind
                        else ""
                    )
                if cls and kind and obj is not None and node_text(obj) == "self":
                    attr = node_text(left.child_by_field_name("attribute"))
                    _add_type(self.facts.types.setdefault(cls, {}), f"self.{attr}", kind)
                stack.append((left, scope, fn, cls, False))
            elif node.type == "augmented_assignment":
                stack.append((left, scope, fn, cls, False))
            elif (
                left.type == "identifier" and cls and scope == cls and kind
            ):  # `conn: Adapter` in a class body
                _add_type(self.facts.types.setdefault(cls, {}), f"self.{node_text(left)}", kind)
            else:
                targets = _targets(left)
                self._bind(fn, targets, kind if len(targets) == 1 else "")
                if not targets:
                    stack.append((left, scope, fn, cls, False))
        for sub in (typ, right):
            if sub is not None:
                stack.append((sub, scope, fn, cls, False))


# ---- other languages: calls only -----------------------------------------------------------------
_OBJECT_FIELDS = ("object", "operand")
_NAME_FIELDS = ("property", "field", "name")


def _generic_receiver(obj: Node | None) -> str:
    if obj is None:
        return ""
    text = node_text(obj)
    if obj.type in {"this", "super"}:
        return ".self" if obj.type == "this" else ".super"
    if obj.type in {
        "identifier",
        "field_access",
        "member_expression",
        "selector_expression",
        "scoped_identifier",
    }:
        parts = text.replace("this.", "self.").split(".")
        if all(p.isidentifier() for p in parts) and len(text) < 120:
            return "." + ".".join(parts)
    if obj.type in {"method_invocation", "call_expression"}:
        return "?"
    return "?"


def _first_field(node: Node, fields: Sequence[str]) -> Node | None:
    """The first of `fields` that `node` has (each looked up once)."""
    for f in fields:
        child = node.child_by_field_name(f)
        if child:
            return child
    return None


def _calls(
    path: str, lang: str, root: Node, units: list[CodeUnit], caps: treequery.Captures | None
) -> FileFacts:
    facts = FileFacts(lang)
    spans = sorted(((u.start, -u.end, u.qualname) for u in units if u.kind != "module"), key=lambda s: s[:2])
    starts = [s[0] for s in spans]
    calls = LANGS[lang].calls

    def scope_of(line: int) -> str:
        # units nest: of those starting at or before the line, the last that still holds it is innermost
        for j in range(bisect.bisect_right(starts, line) - 1, -1, -1):
            _start, neg_end, qual = spans[j]
            if -neg_end >= line:
                return qual
        return ""

    java, js = lang == "java", lang in jsimports.JS_LANGS
    for node in _visited(lang, root, caps):
        t = node.type
        if java and t == "import_declaration":
            imported = next((node_text(c) for c in node.named_children if c.type == "scoped_identifier"), "")
            if imported and not any(c.type == "asterisk" for c in node.children):
                facts.imports[imported.rsplit(".", 1)[-1]] = imported
            continue
        if js:
            if t == "import_statement":
                jsimports.statement(path, node, facts.imports)
                continue
            if t == "variable_declarator":
                jsimports.declarator(path, node, facts.imports)
        if t in calls:
            line = node.start_point[0] + 1
            if t in {"object_creation_expression", "new_expression"}:
                typ = node.child_by_field_name("type") or node.child_by_field_name("constructor")
                name = node_text(typ).split("<", 1)[0].rsplit(".", 1)[-1]
                if name.isidentifier():
                    facts.refs.append((scope_of(line), line, name, "", 1))
            else:
                fn = node.child_by_field_name("function")
                target = fn if fn is not None else node
                obj = _first_field(target, _OBJECT_FIELDS)
                name_node = _first_field(target, _NAME_FIELDS)
                if fn is not None and fn.type == "identifier":
                    name_node, obj = fn, None
                name = node_text(name_node)
                if name.isidentifier():
                    facts.refs.append((scope_of(line), line, name, _generic_receiver(obj), 1))
    return facts


def _visited(lang: str, root: Node, caps: treequery.Captures | None = None) -> list[Node]:
    """The nodes `_calls` reads (calls; imports and JS declarators), found by a tree-sitter query in C
    (`treequery.py`, the "fact" capture) instead of a Python walk over every node, in the order of a
    depth-first walk that pops the last child first (an enclosing node before the nodes inside it,
    else the later node first), without the nodes inside an import."""
    caps = caps if caps is not None else treequery.captures(lang, root)
    found = sorted(caps.get("fact", []), key=lambda n: (-n.end_byte, n.start_byte))
    out: list[Node] = []
    start, end = -1, -1  # the span of the last import seen: the nodes inside it are not walked
    for node in found:
        if node.start_byte >= start and node.end_byte <= end:
            continue  # sorted: a node inside an import comes after it
        out.append(node)
        if node.type in _IMPORTS:
            start, end = node.start_byte, node.end_byte
    return out


_IMPORTS = frozenset({"import_declaration", "import_statement"})
