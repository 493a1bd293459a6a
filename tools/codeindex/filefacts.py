"""What one file holds for the symbol graph (the fields are described in refs.py), as kept in
graph.bin (graphstore.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
        """A compact JSON-ready list (graph.bin keeps one per file, as a tuple)."""
        return [
            self.lang,
            self.module,
            self.imports,
            self.stars,
            self.refs,  # tuples: JSON arrays, as lists would be
            self.locals,
            self.types,
            self.returns,
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> FileFacts:
        """Inverse of to_json."""
        lang, module, imports, stars, refs, local, types, returns = data
        return cls(lang, module, imports, stars, [tuple(r) for r in refs], local, types, returns)

    @classmethod
    def from_saved(cls, data: tuple[Any, ...]) -> FileFacts:
        """Inverse of to_json as graph.bin keeps it: marshal kept the refs' tuples, none is made again."""
        lang, module, imports, stars, refs, local, types, returns = data
        return cls(lang, module, imports, stars, refs, local, types, returns)
