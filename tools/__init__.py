"""The shipped tools. Each module declares Args + run + SPEC; this list is the whole catalogue."""

from __future__ import annotations

from agent.registry import ToolSpec
from tools import read_artifact

ALL: tuple[ToolSpec, ...] = (read_artifact.SPEC,)
