"""Compiled alert templates kept between processes: Jinja's bytecode of each template in the machine's
cache (`XIHE_CACHE_DIR`, else `$XDG_CACHE_HOME/xihe`, else `~/.cache/xihe`, under `alert-templates/`).

Compiling the eleven templates cost a short command such as `xihe alerts replay` ~25 ms of its start
(issue 30); loading their bytecode costs ~2 ms. A file is keyed by the template's name and path and
holds the SHA-1 of the source it was compiled from, and its header names this format, the Renderer's
Jinja options, Jinja's and Python's bytecode versions: an edited template (an admin override
included), another option set, another Jinja or Python compiles again. A file that cannot be read or
decoded is ignored (compiled again and rewritten); writes go to a temporary file renamed into place, so
processes sharing the cache never read half a file. Without a usable directory nothing is cached.
No pickle: the header is compared as bytes, the code is `marshal` data (like `__pycache__`).
"""

from __future__ import annotations

import hashlib
import marshal
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket, BytecodeCache

from xihe.agent.cachedir import shared_cache, write_atomic

FORMAT = b"xihe-alert-templates 1"


class TemplateCache(BytecodeCache):
    """Jinja bytecode per template file in `directory` (see the module's docstring)."""

    def __init__(self, directory: Path, options: str) -> None:
        self.directory = directory
        self.header = b"|".join(
            (
                FORMAT,
                hashlib.sha1(options.encode()).hexdigest().encode(),
                jinja2.__version__.encode(),
                MAGIC_NUMBER.hex().encode(),
            )
        )

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.jinja"

    def _head(self, bucket: Bucket) -> bytes:
        return self.header + b"|" + bucket.checksum.encode() + b"\n"

    def load_bytecode(self, bucket: Bucket) -> None:
        """Fill `bucket.code` when a file compiled from this very source is there."""
        try:
            raw = self._path(bucket.key).read_bytes()
        except OSError:
            return
        head = self._head(bucket)
        if not raw.startswith(head):
            return  # another source, option set or version: compiled again
        try:
            code = marshal.loads(raw[len(head) :])
        except (EOFError, ValueError, TypeError):
            return  # cut short or damaged
        if type(code).__name__ == "code":
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        """Write the bucket's code (atomically; a directory that cannot be written is skipped)."""
        if bucket.code is None:
            return
        data = self._head(bucket) + marshal.dumps(bucket.code)
        write_atomic(self._path(bucket.key), data)


def template_cache(options: dict[str, Any]) -> TemplateCache:
    """The cache for a Renderer whose Environment has `options` (their repr is part of the key)."""
    return TemplateCache(shared_cache() / "alert-templates", repr(sorted(options.items())))
