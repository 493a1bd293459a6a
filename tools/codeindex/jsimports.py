"""JavaScript and TypeScript imports for the symbol graph: `require` and `import`, and where they lead.

A file's facts map each local name an import binds to `module#member` (refs.FileFacts.imports):
`module` is the imported path made relative to the repository root (`lib/common` for
`require('./common')` in `lib/loader.js`), or `ext:name` for a package from outside it; `member` is
the exported name (`{ A }`, `require(...).A`), `default` (`import X from`), or `*` (the whole module:
`const x = require(...)`, `import * as x`). graph.py finds the file (`.js`, `.ts`, ... or `index.*`)
and the member in it: a top-level definition of that name (for `*`/`default`, of the local name, as
`module.exports = YAMLException` is usually imported under the name it was defined with).
"""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from xihe.tools.codeindex.languages import node_text

JS_LANGS = frozenset({"javascript", "typescript", "tsx"})
EXTENSIONS = (".js", ".ts", ".tsx", ".mjs", ".cjs", ".jsx", ".mts", ".cts")
EXTERNAL = "ext:"


def module_of(path: str, spec: str) -> str:
    """The module a specifier in file `path` names: repository-relative, or `ext:spec`."""
    if not spec.startswith("."):
        return EXTERNAL + spec
    return posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))


def candidates(module: str) -> list[str]:
    """The files a module may be, in the order Node.js tries them."""
    return [module, *(module + e for e in EXTENSIONS), *(f"{module}/index{e}" for e in EXTENSIONS)]


def _string(node: Node | None) -> str | None:
    if node is None or node.type != "string":
        return None
    return "".join(node_text(c) for c in node.named_children if c.type == "string_fragment")


def _required(node: Node | None) -> str | None:
    """The specifier of `require('x')`, else None."""
    if node is None or node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    if fn is None or node_text(fn) != "require" or args is None or len(args.named_children) != 1:
        return None
    return _string(args.named_children[0])


def declarator(path: str, node: Node, imports: dict[str, str]) -> None:
    """`const x = require(...)`, `const { a, b: c } = require(...)`, `const y = require(...).y`."""
    name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
    if name is None or value is None:
        return
    member = "*"
    if value.type == "member_expression":
        prop = value.child_by_field_name("property")
        member = node_text(prop) if prop is not None else ""
        value = value.child_by_field_name("object")
    spec = _required(value)
    if spec is None or not member:
        return
    module = module_of(path, spec)
    if name.type == "identifier":
        imports[node_text(name)] = f"{module}#{member}"
    elif name.type == "object_pattern" and member == "*":
        for p in name.named_children:
            if p.type == "shorthand_property_identifier_pattern":
                imports[node_text(p)] = f"{module}#{node_text(p)}"
            elif p.type == "pair_pattern":
                key, local = p.child_by_field_name("key"), p.child_by_field_name("value")
                if key is not None and local is not None and local.type == "identifier":
                    imports[node_text(local)] = f"{module}#{node_text(key)}"


def statement(path: str, node: Node, imports: dict[str, str]) -> None:
    """`import d, { a as b } from '...'`, `import * as ns from '...'`."""
    spec = _string(node.child_by_field_name("source"))
    if spec is None:
        return
    module = module_of(path, spec)
    for clause in (c for c in node.named_children if c.type == "import_clause"):
        for c in clause.named_children:
            if c.type == "identifier":
                imports[node_text(c)] = f"{module}#default"
            elif c.type == "namespace_import":
                ids = [x for x in c.named_children if x.type == "identifier"]
                if ids:
                    imports[node_text(ids[-1])] = f"{module}#*"
            elif c.type == "named_imports":
                for s in c.named_children:
                    if s.type != "import_specifier":
                        continue
                    name, alias = s.child_by_field_name("name"), s.child_by_field_name("alias")
                    if name is not None:
                        local = alias if alias is not None else name
                        imports[node_text(local)] = f"{module}#{node_text(name)}"
