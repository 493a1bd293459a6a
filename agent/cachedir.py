"""The machine's shared cache for data derived from installed packages and shipped files (not from a
repository): the code index's unpacked model and Chinese dictionaries, compiled alert templates.

`XIHE_CACHE_DIR`, else `$XDG_CACHE_HOME/xihe`, else `~/.cache/xihe`. Files in it are keyed by their
sources' versions and written atomically, so every index directory and process can share one copy.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def shared_cache() -> Path:
    """Where shared derived files live (not created here)."""
    explicit = os.environ.get("XIHE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "xihe"


def write_atomic(target: Path, data: bytes) -> bool:
    """Write `data` to `target` through a temporary file renamed into place (a reader sees the old file
    or the new one, never half of one); False when the directory cannot be written."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True
