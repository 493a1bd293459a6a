"""Code units: functions, methods and classes parsed with tree-sitter; line windows for other files."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Language, Node, Parser

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


@dataclass(frozen=True)
class LangSpec:
    """How one language's tree is read: which nodes are units, calls, identifiers and doc comments."""

    name: str
    load: Callable[[], Any]
    classes: frozenset[str]
    functions: frozenset[str]
    calls: frozenset[str]
    identifiers: frozenset[str]
    body_fields: tuple[str, ...] = ("body",)


def _py() -> Any:
    import tree_sitter_python

    return tree_sitter_python.language()


def _java() -> Any:
    import tree_sitter_java

    return tree_sitter_java.language()


def _go() -> Any:
    import tree_sitter_go

    return tree_sitter_go.language()


def _js() -> Any:
    import tree_sitter_javascript

    return tree_sitter_javascript.language()


def _ts() -> Any:
    import tree_sitter_typescript

    return tree_sitter_typescript.language_typescript()


def _tsx() -> Any:
    import tree_sitter_typescript

    return tree_sitter_typescript.language_tsx()


_JS_CLASSES = frozenset({"class_declaration", "class", "abstract_class_declaration", "interface_declaration"})
_JS_FUNCS = frozenset(
    {"function_declaration", "generator_function_declaration", "method_definition", "function_signature"}
)
_JS_IDS = frozenset({"identifier", "property_identifier", "type_identifier", "shorthand_property_identifier"})

LANGS: dict[str, LangSpec] = {
    "python": LangSpec(
        "python",
        _py,
        frozenset({"class_definition"}),
        frozenset({"function_definition"}),
        frozenset({"call"}),
        frozenset({"identifier"}),
    ),
    "java": LangSpec(
        "java",
        _java,
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
            }
        ),
        frozenset({"method_declaration", "constructor_declaration"}),
        frozenset({"method_invocation", "object_creation_expression"}),
        frozenset({"identifier", "type_identifier"}),
    ),
    "go": LangSpec(
        "go",
        _go,
        frozenset({"type_spec"}),
        frozenset({"function_declaration", "method_declaration"}),
        frozenset({"call_expression"}),
        frozenset({"identifier", "field_identifier", "type_identifier", "package_identifier"}),
    ),
    "javascript": LangSpec(
        "javascript", _js, _JS_CLASSES, _JS_FUNCS, frozenset({"call_expression", "new_expression"}), _JS_IDS
    ),
    "typescript": LangSpec(
        "typescript", _ts, _JS_CLASSES, _JS_FUNCS, frozenset({"call_expression", "new_expression"}), _JS_IDS
    ),
    "tsx": LangSpec(
        "tsx", _tsx, _JS_CLASSES, _JS_FUNCS, frozenset({"call_expression", "new_expression"}), _JS_IDS
    ),
}

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".java": "java",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
}

# JS/TS `const handler = (req) => {...}` and `foo = function () {}` are functions too
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})


def language_of(path: str) -> str | None:
    """The grammar name for a path, or None when the file is windowed."""
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


class Parsers:
    """Tree-sitter parsers per language, created on first use (grammars come from the per-language wheels)."""

    def __init__(self) -> None:
        self._parsers: dict[str, Parser] = {}

    def get(self, lang: str) -> Parser:
        """The parser for `lang` (a key of LANGS)."""
        parser = self._parsers.get(lang)
        if parser is None:
            parser = Parser(Language(LANGS[lang].load()))
            self._parsers[lang] = parser
        return parser


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _clean_comment(raw: str) -> str:
    """Strip comment markers from a doc comment block."""
    lines = []
    for line in raw.splitlines():
        s = line.strip()
        s = re.sub(r"^(/\*\*?|\*/|\*|//+|#)", "", s).strip()
        s = re.sub(r"\*/$", "", s).strip()
        if s:
            lines.append(s)
    return "\n".join(lines)


def _clean_docstring(raw: str) -> str:
    s = raw.strip()
    s = re.sub(r"^[rRbBuUfF]*('''|\"\"\"|'|\")", "", s)
    s = re.sub(r"('''|\"\"\"|'|\")$", "", s)
    lines = [ln.strip() for ln in s.strip().splitlines()]
    return "\n".join(lines).strip()


def _leading_comments(node: Node) -> str:
    """Doc comments directly above a declaration (Java/JS /** */, Go // blocks)."""
    anchor = node
    # the comment sits above `export ...` / annotations, not above the inner declaration
    while anchor.parent is not None and anchor.parent.type in {"export_statement", "decorated_definition"}:
        anchor = anchor.parent
    comments: list[str] = []
    prev = anchor.prev_named_sibling
    line = anchor.start_point[0]
    while prev is not None and prev.type in {"comment", "block_comment", "line_comment"}:
        if prev.end_point[0] < line - 1:  # a blank line separates it: not this declaration's doc
            break
        comments.append(_text(prev))
        line = prev.start_point[0]
        prev = prev.prev_named_sibling
    return _clean_comment("\n".join(reversed(comments)))


def _name_of(node: Node, spec: LangSpec) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(name)
    if node.type == "class":  # anonymous class expression assigned to a variable
        parent = node.parent
        if parent is not None and parent.type == "variable_declarator":
            return _text(parent.child_by_field_name("name"))
    return ""


def _go_receiver(node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    for sub in _iter(receiver):
        if sub.type == "type_identifier":
            return _text(sub)
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
        return f"type {_text(node.child_by_field_name('name'))} {t.type.replace('_type', '') if t else ''}"
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


def _python_docstring(node: Node) -> str:
    body = node.child_by_field_name("body")
    if body is None or not body.named_children:
        return ""
    first = body.named_children[0]
    if (
        first.type == "expression_statement"
        and first.named_children
        and first.named_children[0].type == "string"
    ):
        return _clean_docstring(_text(first.named_children[0]))
    return ""


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
            return _text(last)
    text = _text(fn)
    return text.rsplit(".", 1)[-1] if len(text) < 80 else ""


def _collect(node: Node, spec: LangSpec, skip: set[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Identifiers and callee names inside `node`, not descending into nested units (ids in `skip`)."""
    ids: dict[str, None] = {}
    calls: dict[str, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n.id in skip and n is not node:
            continue
        if n.type in spec.identifiers and len(ids) < MAX_IDENTIFIERS:
            ids.setdefault(_text(n), None)
        elif n.type in spec.calls and len(calls) < MAX_CALLS:
            c = _callee(n)
            if c:
                calls.setdefault(c, None)
        stack.extend(n.children)
    return tuple(ids), tuple(calls)


def _unit_node(node: Node, spec: LangSpec) -> str | None:
    """'class' / 'function' when the node is a unit, else None."""
    if node.type in spec.classes:
        if node.type == "type_spec":  # Go: only struct and interface types are worth a unit
            t = node.child_by_field_name("type")
            return "class" if t is not None and t.type in {"struct_type", "interface_type"} else None
        return "class"
    if node.type in spec.functions:
        return "function"
    if node.type == "variable_declarator" and spec.name in {"javascript", "typescript", "tsx"}:
        value = node.child_by_field_name("value")
        if value is not None and value.type in _JS_FUNCTION_VALUES:
            return "function"
    return None


def parse_units(path: str, source: str, lang: str, parsers: Parsers) -> list[CodeUnit]:
    """Parse `source` (file `path`, language `lang`) into units, outer ones first."""
    spec = LANGS[lang]
    src = source.encode("utf-8", "replace")
    tree = parsers.get(lang).parse(src)
    lines = source.splitlines()
    found: list[tuple[Node, str, str]] = []  # (node, kind, qualname)

    # walk with the enclosing qualified name and whether the parent unit is a class
    stack: list[tuple[Node, str, str | None]] = [(tree.root_node, "", None)]
    while stack:
        node, prefix, parent_kind = stack.pop()
        kind = _unit_node(node, spec)
        child_prefix, child_parent = prefix, parent_kind
        if kind is not None:
            name = _name_of(node, spec)
            if name:
                if lang == "go" and node.type == "method_declaration":
                    recv = _go_receiver(node)
                    qual = f"{recv}.{name}" if recv else name
                    ukind = "method"
                else:
                    qual = f"{prefix}.{name}" if prefix else name
                    ukind = "method" if kind == "function" and parent_kind == "class" else kind
                found.append((node, ukind, qual))
                child_prefix, child_parent = qual, kind
        for child in reversed(node.children):
            stack.append((child, child_prefix, child_parent))

    unit_ids = {n.id for n, _, _ in found}
    units: list[CodeUnit] = []
    for node, kind, qual in found:
        anchor = node
        if node.type == "variable_declarator" and node.parent is not None:
            anchor = node.parent  # `const f = () => {}`: the declaration line is the start
        if node.type == "type_spec" and node.parent is not None and len(node.parent.named_children) == 1:
            anchor = node.parent  # `type X struct` : the doc comment sits above the type_declaration
        if anchor.parent is not None and anchor.parent.type in {"decorated_definition", "export_statement"}:
            anchor = anchor.parent
        start, end = anchor.start_point[0] + 1, node.end_point[0] + 1
        doc = _python_docstring(node) if lang == "python" else _leading_comments(anchor)
        ids, calls = _collect(node, spec, unit_ids)
        name = qual.rsplit(".", 1)[-1]
        if kind == "class":
            # a class is searched by its header, doc and own lines; its methods are units of their own
            own = _own_lines(node, [n for n in unit_ids_within(node, found)], lines)
        else:
            own = "\n".join(lines[start - 1 : end])
        units.append(
            CodeUnit(
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
        )
    header = _module_header(path, lang, lines, units)
    if header is not None:
        units.insert(0, header)
    return units


def unit_ids_within(node: Node, found: list[tuple[Node, str, str]]) -> list[Node]:
    """Unit nodes strictly inside `node`."""
    return [
        n
        for n, _, _ in found
        if n.id != node.id and n.start_byte >= node.start_byte and n.end_byte <= node.end_byte
    ]


def _own_lines(node: Node, inner: list[Node], lines: list[str]) -> str:
    """The class's lines minus the bodies of nested units (their signatures stay)."""
    start, end = node.start_point[0], node.end_point[0]
    hidden: set[int] = set()
    for n in inner:
        hidden.update(range(n.start_point[0] + 1, n.end_point[0] + 1))
    return "\n".join(lines[i] for i in range(start, min(end + 1, len(lines))) if i not in hidden)


def _module_header(path: str, lang: str, lines: list[str], units: list[CodeUnit]) -> CodeUnit | None:
    """The top of the file before its first unit (header comment, imports, constants) as a unit."""
    first = min((u.start for u in units), default=len(lines) + 1)
    top = lines[: max(0, first - 1)]
    if sum(1 for ln in top if ln.strip()) < 3:
        return None
    end = min(len(top), 120)
    text = "\n".join(top[:end])
    doc = ""
    if lang == "python":
        m = re.match(r'\s*(?:#[^\n]*\n\s*)*[rRuU]?("""|\'\'\')(.*?)\1', text, re.S)
        doc = m.group(2).strip() if m else ""
    else:
        m = re.match(r"\s*(/\*.*?\*/|(?://[^\n]*\n\s*)+)", text, re.S)
        doc = _clean_comment(m.group(1)) if m else ""
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
