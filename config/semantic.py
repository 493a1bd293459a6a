"""Checks of meaning that each file's model cannot make alone: names that must exist elsewhere, time
zones, URLs, ports, directories. Every problem names `file:line: key` and, when a known name is
close, suggests it ("did you mean 'prod'?").

Some checks are generic over every section, so a field added later is covered by its name: any key
`timezone`/`*_timezone` must be an IANA zone, any `*url`/`*_base`/`api_base`/`*url_prefix` a URL
with scheme and host (or empty), any `port`/`*_port` within 1..65535. A feature's own checks live
beside its model (`Section.checks`) and run here, after these.
"""

from __future__ import annotations

import difflib
import zoneinfo
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from xihe.agent.errors import ConfigError
from xihe.config.settings import Problem, Section, Settings, problem_at

URL_SCHEMES = ("http", "https", "ws", "wss")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a known name is close, else ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(kind: str, name: str, known: Iterable[str], where: str) -> str:
    """'unknown <kind> <name>' with the closest known name, or the known names and `where` they are."""
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


def _generic(file: str, section: BaseModel) -> Iterator[Problem]:
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


def _workflows(settings: Settings) -> Iterator[Problem]:
    seen: dict[str, tuple[int, str]] = {}  # casefolded name or alias → (workflow index, what)
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


def semantic_problems(settings: Settings, sections: list[Section[Any]]) -> list[ConfigError]:
    """Every problem of meaning across the loaded files, in the order of `sections`."""
    found: list[Problem] = []
    for known in sections:
        section = settings.get(known)
        if section is not None and known.file in settings.texts:
            found.extend(_generic(known.file, section))
    found.extend(_workflows(settings))
    problem = _store_url(settings.core.store.url)
    if problem:
        found.append(("xihe.yaml", ("store", "url"), problem))
    for known in sections:
        value = settings.get(known)
        if known.checks is not None and value is not None:
            found.extend(known.checks(settings, value))
    order = {known.file: i for i, known in enumerate(sections)}
    errors = [
        (order.get(file, len(order)), problem_at(settings, file, loc, problem))
        for file, loc, problem in found
    ]
    errors.sort(key=lambda e: (e[0], e[1].line or 0))
    return [e for _, e in errors]
