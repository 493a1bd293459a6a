"""Config reload: a changed directory is re-read; a valid one replaces the running settings, an
invalid one keeps the last good config (and `/readyz` says why). Either way one audit row says what
happened, so "who changed the access rules at 2 am?" has an answer:

    files    the files that changed (added, removed or edited)
    keys     per file, the keys whose value changed: a diff of the old and new parsed YAML, keys only
             (`+users.erin`, `-users.bob`, `loop.max_turns`), never a value, so no secret is written
    digest   sha256 of the new files (what `xihe config reload` requested and what replicas applied)
    trigger  the `config_reload` job, SIGHUP (`systemctl reload xihe`), or a person's
             `xihe config reload` (found by the digest it requested; the row's actor is that person)

Access rules, loop bounds, the confirmation TTL, on-call rotations and mcp.yaml's servers take effect at once;
tools, plugins and feature clients are built at start, which the row notes as "restart needed".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from xihe.agent.audit import AuditEvent
from xihe.agent.errors import ConfigError
from xihe.agent.feature import Runtime, StateKey
from xihe.config.load import Settings, secrets_of

log = logging.getLogger("xihe.ops")

JOB = "config_reload job"
SIGHUP = "SIGHUP"
REQUEST = "xihe config reload"  # the CLI's request row: kind=config, outcome=reload_requested
MAX_KEYS = 40  # per file in one audit row; the rest are counted
REQUEST_FRESH = timedelta(hours=1)
LIVE_SECTIONS = (
    "ops",
    "oncall",
    "mcp",  # the MCP feature's reload hook lists the servers again
)  # read from the settings on every use: an edit counts without a restart  # an older request for the same files is not what triggered this


@dataclass
class ReloadState:
    """The directory as last applied (per-file sha256) and the fingerprint last refused."""

    files: dict[str, str]
    refused: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)  # the job and SIGHUP never overlap

    @property
    def applied(self) -> str:
        """The fingerprint of the running files."""
        return fingerprint(self.files)


RELOAD = StateKey("ops", ReloadState)  # the ops feature's state: what `reload_config` compares with


def file_digests(directory: Path) -> dict[str, str]:
    """sha256 of every YAML file of the directory (an unreadable one counts by its error)."""
    out = {}
    for path in sorted(directory.glob("*.y*ml")):
        try:
            content = path.read_bytes()
        except OSError as exc:
            content = f"unreadable: {type(exc).__name__}".encode()
        out[path.name] = hashlib.sha256(content).hexdigest()
    return out


def fingerprint(digests: Mapping[str, str]) -> str:
    """One sha256 over the files' names and digests: the directory's identity."""
    h = hashlib.sha256()
    for name in sorted(digests):
        h.update(f"{name}\0{digests[name]}\0".encode())
    return h.hexdigest()


def changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Files added, removed or edited between two digest maps."""
    return sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))


def changed_keys(old_text: str | None, new_text: str | None) -> list[str]:
    """Keys whose value differs between two versions of one YAML file: `+added`, `-removed`, `changed`;
    `(unreadable)` when a side does not parse. Values never appear."""
    try:
        before = yaml.safe_load(old_text) if old_text else {}
        after = yaml.safe_load(new_text) if new_text else {}
    except yaml.YAMLError:
        return ["(unreadable)"]
    found = _diff(before, after, "")
    return [*found[:MAX_KEYS], *([f"... and {len(found) - MAX_KEYS} more"] if len(found) > MAX_KEYS else [])]


def _named(items: Any) -> dict[str, Any] | None:
    """A list of mappings that all have a distinct `name` (shell entries), keyed `[name=x]`."""
    if not isinstance(items, list) or not all(isinstance(i, dict) and "name" in i for i in items):
        return None
    keyed = {f"[name={i['name']}]": i for i in items}
    return keyed if len(keyed) == len(items) else None


def _diff(a: Any, b: Any, path: str) -> list[str]:
    if a == b:
        return []
    named_a, named_b = _named(a), _named(b)
    if named_a is not None and named_b is not None:
        a, b = named_a, named_b
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [path or "(whole file)"]
    out: list[str] = []
    for key in sorted(set(a) | set(b), key=str):
        sub = f"{path}{key}" if str(key).startswith("[") else f"{path}.{key}" if path else str(key)
        if key not in a:
            out.append(f"+{sub}")
        elif key not in b:
            out.append(f"-{sub}")
        else:
            out += _diff(a[key], b[key], sub)
    return out


def _needs_restart(old: Settings, new: Settings) -> list[str]:
    notes = []
    if old.core.tools != new.core.tools or old.core.plugins != new.core.plugins:
        notes.append("tools/plugins")
    if old.core.llm != new.core.llm or old.core.store != new.core.store:
        notes.append("llm/store")
    if old.extra.keys() != new.extra.keys() or any(
        old.extra[k] != new.extra[k] for k in old.extra if k not in LIVE_SECTIONS
    ):
        notes.append("feature sections")
    return notes


def _texts_on_disk(directory: Path, names: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = (directory / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            out[name] = None
    return out


def _requested_by(app: Runtime, digest: str, now: datetime) -> str | None:
    """The person whose `xihe config reload` asked for exactly these files lately, if one did."""
    since = now - REQUEST_FRESH
    rows = app.deps.audit.search(kind="config", outcome="reload_requested", since=since, limit=20)
    return next((r["actor"] for r in rows if r["result_digest"] == digest), None)


def reload_config(app: Runtime, trigger: str = JOB) -> str:
    """Re-read the config directory if it changed: 'unchanged', 'applied' or 'refused'."""
    state = app.get(RELOAD)
    assert state is not None, "the ops feature is installed in every app"
    with state.lock:
        return _reload(app, state, trigger)


def _reload(app: Runtime, state: ReloadState, trigger: str) -> str:
    deps = app.deps
    directory = app.settings.directory
    digests = file_digests(directory)
    current = fingerprint(digests)
    if current == state.applied and state.refused:
        # the files are back to what is running: nothing to apply, nothing wrong any more
        state.refused = ""
        deps.reload_error = None
    if current in (state.applied, state.refused):
        return "unchanged"
    now = deps.clock()
    files = changed_files(state.files, digests)
    person = _requested_by(app, current, now)
    detail: dict[str, Any] = {
        "trigger": REQUEST if person else trigger,
        "files": files,
        "digest": current,
        "replica": deps.holder,
    }
    old_texts = app.settings.texts
    try:
        new = app.load_checked(directory)
    except Exception as exc:  # any failure keeps the last good config and is reported, not only ConfigError
        reason = _relative(
            deps.redactor.text(str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"),
            directory,
        )
        state.refused = current
        deps.reload_error = reason
        log.error(
            "config reload refused; the last good config keeps running: %s",
            reason,
            extra={"config_dir": str(directory)},
            exc_info=not isinstance(exc, ConfigError),  # a bug in a plugin or in our code: keep the traceback
        )
        new_texts = _texts_on_disk(directory, files)
        detail["keys"] = {f: changed_keys(old_texts.get(f), new_texts[f]) for f in files}
        _record(app, now, "reload_refused", person, reason, detail)
        return "refused"
    for secret in secrets_of(new):
        deps.redactor.add(secret)
    restart = _needs_restart(app.settings, new)
    detail["keys"] = {f: changed_keys(old_texts.get(f), new.texts.get(f)) for f in files}
    app.settings = new
    deps.settings = new
    state.files, state.refused = digests, ""
    deps.reload_error = None
    note = "; ".join([", ".join(files), *([f"restart needed for: {', '.join(restart)}"] if restart else [])])
    log.info(
        "config reloaded", extra={"restart_needed": restart, "files": files, "trigger": detail["trigger"]}
    )
    _record(app, now, "reloaded", person, note, detail)
    for hook in app.installed.reloaded:  # e.g. end web sessions the new access rules no longer allow
        try:
            hook(app)
        except Exception:
            log.exception("a feature's reload hook failed; the new config is applied")
    return "applied"


def _relative(text: str, directory: Path) -> str:
    """File names inside the config directory without the server's path to it (audit, /ui/readyz)."""
    for form in {str(directory.resolve()), str(directory)}:
        text = re.sub(r"(?<![\w./-])" + re.escape(form.rstrip(os.sep) + os.sep), "", text)
    return text


def _record(
    app: Runtime, now: datetime, outcome: str, person: str | None, reason: str, detail: dict[str, Any]
) -> None:
    deps = app.deps
    deps.audit.record(
        AuditEvent(
            at=now,
            kind="config",
            actor=person or deps.holder,
            outcome=outcome,
            tool=detail["trigger"],
            reason=reason,
            result_digest=detail["digest"],
            detail=detail,
        )
    )


def on_sighup(app: Runtime) -> None:
    """`kill -HUP` / `systemctl reload xihe`: reload now, in a thread (a signal handler must not wait
    on the database). Installed by `xihe serve` when it runs in the main thread."""

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=_safe_reload, args=(app,), name="xihe-sighup-reload", daemon=True).start()

    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, handler)


def _safe_reload(app: Runtime) -> None:
    try:
        reload_config(app, SIGHUP)
    except Exception:
        log.exception("config reload on SIGHUP failed")
