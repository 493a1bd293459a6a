"""The shipped tools of the spine (features bring theirs through agent/toolset.py).

`ALL` is resolved on first use, so importing a submodule (e.g. `xihe.tools.codeindex` for `xihe search`)
does not load the registry and every tool module with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xihe.agent.registry import ToolSpec

    ALL: tuple[ToolSpec, ...]


def __getattr__(name: str) -> Any:
    if name == "ALL":
        from xihe.tools import read_artifact

        return (read_artifact.SPEC,)
    raise AttributeError(f"module 'tools' has no attribute {name!r}")
