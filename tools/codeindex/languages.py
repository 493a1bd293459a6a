"""The grammars: which file a tree-sitter language reads, and which nodes of its tree are units.

Each language is a `LangSpec` (its class, function, call and identifier node types); `EXTENSIONS`
maps file suffixes to them, and `Parsers` creates each language's parser on first use. A file
whose suffix has no grammar is cut into line windows instead (units.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Language, Node, Parser


@dataclass(frozen=True)
class LangSpec:
    """How one language's tree is read: which nodes are units, calls and identifiers."""

    name: str
    load: Callable[[], Any]
    classes: frozenset[str]
    functions: frozenset[str]
    calls: frozenset[str]
    identifiers: frozenset[str]


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


def node_text(node: Node | None) -> str:
    """A node's source text ('' for no node)."""
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def unit_kind(node: Node, spec: LangSpec) -> str | None:
    """'class' / 'function' when the node is a unit, else None."""
    typ = node.type  # read once: each read makes a new string
    if typ in spec.classes:
        if typ == "type_spec":  # Go: only struct and interface types are worth a unit
            t = node.child_by_field_name("type")
            return "class" if t is not None and t.type in {"struct_type", "interface_type"} else None
        return "class"
    if typ in spec.functions:
        return "function"
    if typ == "variable_declarator" and spec.name in {"javascript", "typescript", "tsx"}:
        value = node.child_by_field_name("value")
        if value is not None and value.type in _JS_FUNCTION_VALUES:
            return "function"
    return None
