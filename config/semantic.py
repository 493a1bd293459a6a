"""Checks of meaning that each file's model cannot make alone: names that must exist elsewhere, time
zones, URLs, ports, directories. Every problem names `file:line: key` and, when a known name is
close, suggests it ("did you mean 'prod'?").

Some checks are generic over every section, so a field added later is covered by its name: any key
`timezone`/`*_timezone` must be an IANA zone, any `*url`/`*_base`/`api_base`/`*url_prefix` a URL
with scheme and host (or empty), any `port`/`*_port` within 1..65535.
"""

from __future__ import annotations

import difflib
import zoneinfo
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from xihe.agent.errors import ConfigError
from xihe.config.settings import Section, Settings, problem_at

URL_SCHEMES = ("http", "https", "ws", "wss")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a known name is close, else ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(kind: str, name: str, known: Iterable[str], where: str) -> str:
    names = sorted(known)
    hint = did_you_mean(name, names) or f" ({where}: {', '.join(names) or 'none'})"
    return f"unknown {kind} {name!r}{hint}"


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(loc, value) for every scalar of a dumped section, iteratively."""
    stack = [(path, value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, dict):
            stack.extend(((*loc, k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(((*loc, i), v) for i, v in enumerate(item))
        else:
            yield loc, item


def _is_url_key(key: str) -> bool:
    return key.endswith(("url", "_base", "url_prefix")) or key == "api_base"


def _generic(file: str, section: BaseModel) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    for loc, value in _leaves(section.model_dump()):
        key = str(loc[-1]) if loc else ""
        if key == "timezone" or key.endswith("_timezone"):
            if isinstance(value, str) and value not in _zones():
                yield (
                    file,
                    loc,
                    f"unknown time zone {value!r}{did_you_mean(value, _zones())} (IANA names, e.g. Asia/Shanghai or UTC)",
                )
        elif _is_url_key(key) and loc != ("store", "url"):
            if isinstance(value, str) and value and not _is_url(value):
                yield file, loc, f"{value!r} is not a URL (need {'/'.join(URL_SCHEMES)}://host...)"
        elif (key == "port" or key.endswith("_port")) and isinstance(value, int) and not 1 <= value <= 65535:
            yield file, loc, f"port {value} is out of range (1-65535)"


def _is_url(value: str) -> bool:
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises for a port that is not a number or out of range
    except ValueError:
        return False
    return parts.scheme in URL_SCHEMES and bool(parts.hostname)


def _store_url(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None
    if parsed is None or parsed.get_backend_name() not in ("sqlite", "postgresql"):
        return (
            f"{url!r} is not a supported database URL (sqlite:///path/xihe.db or postgresql://user@host/db)"
        )
    if parsed.get_backend_name() == "postgresql" and not parsed.database:
        return f"{url!r} names no database (postgresql://user@host/DBNAME)"
    return None


def _access(settings: Settings) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    access = settings.access
    roles, envs, users = set(access.roles), set(access.environments), set(access.users)
    shell = settings.section("shell")
    if shell is not None:
        for i, entry in enumerate(shell.entries):
            for j, role in enumerate(entry.roles):
                if role not in roles:
                    yield (
                        "shell.yaml",
                        ("entries", i, "roles", j),
                        _unknown("role", role, roles, "access.yaml roles"),
                    )
            for j, env in enumerate(entry.environments):
                if env not in envs:
                    yield (
                        "shell.yaml",
                        ("entries", i, "environments", j),
                        _unknown("environment", env, envs, "access.yaml environments"),
                    )
    ui = settings.section("ui")
    if ui is not None:
        for uid in ui.users:
            if uid not in users:
                yield "ui.yaml", ("users", uid), _unknown("user", uid, users, "access.yaml users")


def _workflows(settings: Settings) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    seen: dict[str, tuple[int, str]] = {}  # casefolded name or alias → (workflow index, what)
    alerts = settings.section("alerts")
    for i, wf in enumerate(settings.workflows.workflows):
        for loc, name, what in [(("workflows", i, "name"), wf.name, "name")] + [
            (("workflows", i, "aliases", j), alias, "alias") for j, alias in enumerate(wf.aliases)
        ]:
            first = seen.get(name.casefold())
            if first is not None and first[0] != i:
                other = settings.workflows.workflows[first[0]].name
                yield (
                    "workflows.yaml",
                    loc,
                    f"{what} {name!r} is already the {first[1]} of workflow {other!r}",
                )
            seen.setdefault(name.casefold(), (i, what))
        if alerts is not None and wf.channel not in alerts.channels:
            yield (
                "workflows.yaml",
                ("workflows", i, "channel"),
                _unknown("channel", wf.channel, alerts.channels, "alerts.yaml channels"),
            )


def _features(settings: Settings) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    problem = _store_url(settings.core.store.url)
    if problem:
        yield "xihe.yaml", ("store", "url"), problem
    alerts = settings.section("alerts")
    if alerts is not None and alerts.templates_dir and not Path(alerts.templates_dir).is_dir():
        yield "alerts.yaml", ("templates_dir",), f"{alerts.templates_dir!r} is not a directory"
    code = settings.section("code")
    if code is not None:
        if code.rerank.enabled and not (code.rerank.base_url and code.rerank.model):
            yield "code.yaml", ("rerank", "enabled"), "rerank is enabled but base_url or model is empty"
        if code.embedding.kind == "openai" and not (code.embedding.base_url and code.embedding.model):
            yield "code.yaml", ("embedding", "kind"), "kind openai needs base_url and model"


def semantic_problems(settings: Settings, sections: list[Section]) -> list[ConfigError]:
    """Every problem of meaning across the loaded files, in the order of `sections`."""
    found: list[tuple[str, tuple[Any, ...], str]] = []
    for known in sections:
        section = settings.section(known.key)
        if isinstance(section, BaseModel) and known.file in settings.texts:
            found.extend(_generic(known.file, section))
    found.extend(_access(settings))
    found.extend(_workflows(settings))
    found.extend(_features(settings))
    order = {known.file: i for i, known in enumerate(sections)}
    errors = [
        (order.get(file, len(order)), problem_at(settings, file, loc, problem))
        for file, loc, problem in found
    ]
    errors.sort(key=lambda e: (e[0], e[1].line or 0))
    return [e for _, e in errors]
