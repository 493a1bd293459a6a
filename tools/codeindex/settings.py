"""The code config of a `xihe search` without importing pydantic: a validated snapshot beside the index.

Validating `code.yaml` means importing pydantic and building the config models (~0.15 s, a third of a
search). `xihe index` and `xihe search` validate it as usual and then write what they validated to
`<index_dir>/<repo-key>.config.json` together with the sha1 of the YAML text. A later search whose
`code.yaml` is byte-for-byte the same reads that snapshot instead; any other text (or no snapshot)
takes the validating path, which reports errors as always and writes a new snapshot. A snapshot also
records the sha1 of `config/code.py` (the models it was validated by): after an upgrade that adds a
setting, the old snapshot lacks it and is not used.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from xihe.tools.codeindex.searchsock import index_dir_named

if TYPE_CHECKING:
    from xihe.config.code import CodeConfig

SUFFIX = ".config.json"
# xihe/tools/codeindex/settings.py -> xihe/config/code.py (installed, or the repository's config/code.py)
MODELS = Path(__file__).resolve().parents[2] / "config" / "code.py"


def _schema() -> str:
    """The sha1 of the config models' source (empty when it cannot be read: no snapshot then)."""
    try:
        return hashlib.sha1(MODELS.read_bytes()).hexdigest()
    except OSError:
        return ""


class Settings:
    """Read-only attribute access over a validated config dump (what the index code reads of CodeConfig)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._data[name]
        except KeyError:
            raise AttributeError(name) from None
        return Settings(value) if isinstance(value, dict) else value

    def model_dump(self) -> dict[str, Any]:
        """The plain data, as pydantic's model_dump gives it."""
        return json.loads(json.dumps(self._data))


def _yaml(config_dir: str | Path) -> tuple[str, str] | None:
    """(sha1 of code.yaml's bytes, the index_dir it seems to name), read without a YAML parser."""
    try:
        raw = (Path(config_dir) / "code.yaml").read_bytes()
    except OSError:
        return None
    # only a guess of where the snapshot is: the snapshot found there must record this very index_dir
    # and the YAML's sha1, so a wrong guess just means no snapshot
    value = index_dir_named(raw)
    return None if value is None else (hashlib.sha1(raw).hexdigest(), value)


def repo_key(root: Path) -> str:
    """Directory name of a repository's index: its folder name plus a hash of its absolute path."""
    resolved = Path(root).resolve()
    return f"{resolved.name or 'root'}-{hashlib.sha1(str(resolved).encode()).hexdigest()[:10]}"


def _snapshot(index_dir: str, repo: Path) -> Path:
    return Path(index_dir) / f"{repo_key(repo)}{SUFFIX}"


def cached(config_dir: str | Path, repo: Path) -> CodeConfig | None:
    """The config validated when `code.yaml` had exactly its current text, or None."""
    found = _yaml(config_dir)
    if found is None:
        return None
    sha, index_dir = found
    try:
        snap = json.loads(_snapshot(index_dir, repo).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(snap, dict) or snap.get("sha1") != sha or not isinstance(snap.get("config"), dict):
        return None
    if not snap.get("schema") or snap.get("schema") != _schema():
        return None
    if snap["config"].get("index_dir") != index_dir:
        return None
    # the duck type holds every field CodeConfig has, so the index code reads it the same way
    return cast("CodeConfig", Settings(snap["config"]))


def remember(config_dir: str | Path, repo: Path, cfg: CodeConfig) -> None:
    """Write the snapshot of the validated `cfg` for the current `code.yaml` (best effort)."""
    found = _yaml(config_dir)
    if found is None or found[1] != cfg.index_dir:
        return
    target = _snapshot(cfg.index_dir, repo)
    body = json.dumps({"sha1": found[0], "schema": _schema(), "config": cfg.model_dump(mode="json")})
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and target.read_text(encoding="utf-8") == body:
            return
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        tmp.write_text(body, encoding="utf-8")
        tmp.replace(target)
    except OSError:
        pass  # an unwritable index dir only costs the next search its speed
