"""A parsed file's identifiers (the "name" capture of its tree-sitter query, treequery.py) read once
for both their readers, the units (units.py) and the symbol graph's Python facts (pyrefs.py): asking
each node for its bytes and text costs more than the slices of the file, and was paid twice."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node


@dataclass(frozen=True)
class Names:
    """The "name" capture's identifiers as their readers (units.py, pyrefs.py) need them, read once per
    file: byte spans and texts, in the capture's order."""

    starts: list[int]
    ends: list[int]
    texts: list[str]


def names(caps: dict[str, list[Node]], src: bytes) -> Names:
    """The identifiers of `caps` in the file whose bytes are `src` (indexed by byte offset): their
    texts sliced from the file decoded once when it is ASCII (a byte offset is then a character
    offset), else each decoded as `Node.text` would be, not copied out of the tree one node at a time."""
    nodes = caps.get("name", [])
    starts = [n.start_byte for n in nodes]
    ends = [n.end_byte for n in nodes]
    if src.isascii():
        text = src.decode("ascii")
        texts = [text[a:b] for a, b in zip(starts, ends, strict=True)]
    else:
        texts = [src[a:b].decode("utf-8", "replace") for a, b in zip(starts, ends, strict=True)]
    return Names(starts, ends, texts)
