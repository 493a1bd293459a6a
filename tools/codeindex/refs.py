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

Python is read whole (every name in load position; pyrefs.py). Java, Go, JavaScript and TypeScript give their
calls and `new` expressions, Java its imports and JavaScript/TypeScript theirs (jsimports.py); their scope is the innermost unit by line.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from tree_sitter import Node

from xihe.tools.codeindex import jsimports, pyrefs, treequery
from xihe.tools.codeindex.filefacts import FileFacts
from xihe.tools.codeindex.identifiers import Names
from xihe.tools.codeindex.languages import LANGS, node_text
from xihe.tools.codeindex.units import CodeUnit


def module_name(path: str) -> str:
    """`a/b/c.py` -> `a.b.c`; `a/b/__init__.py` -> `a.b`."""
    stem = path.rsplit(".", 1)[0]
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def extract(
    path: str,
    lang: str,
    root: Node,
    units: list[CodeUnit],
    caps: treequery.Captures | None = None,
    names: Names | None = None,
) -> FileFacts:
    """The facts of one parsed file (`root` is its tree's root, `units` its units, `caps` the tree's
    `treequery.captures` and `names` their `identifiers.names` when already made)."""
    if lang == "python":
        facts = FileFacts("python", module_name(path))
        package = facts.module if path.endswith("__init__.py") else facts.module.rpartition(".")[0]
        found = caps if caps is not None else treequery.captures(lang, root)
        pyrefs.extract(facts, package, found, root, names)
        return facts
    return _calls(path, lang, root, units, caps)


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
