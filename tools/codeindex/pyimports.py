"""A Python file's imports for the symbol graph (refs.FileFacts.imports and .stars): local name ->
absolute dotted target, relative imports made absolute against the file's package (pyrefs.py reads
them from the import statements the tree-sitter query found)."""

from __future__ import annotations

from tree_sitter import Node

from xihe.tools.codeindex.filefacts import FileFacts
from xihe.tools.codeindex.languages import node_text


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
