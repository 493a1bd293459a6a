"""The machine's shared cache for data derived from installed packages and shipped files (not from a
repository): the code index's unpacked model and Chinese dictionaries, compiled alert templates.

`XIHE_CACHE_DIR`, else `$XDG_CACHE_HOME/xihe`, else `~/.cache/xihe`. Files in it are keyed by their
sources' versions and written atomically, so every index directory and process can share one copy.
"""

from __future__ import annotations

import os
from pathlib import Path


def shared_cache() -> Path:
    """Where shared derived files live (not created here)."""
    explicit = os.environ.get("XIHE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "xihe"
