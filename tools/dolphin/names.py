"""What people call a workflow → the DolphinScheduler definition: exact name, alias, then fuzzy match.

`resolve()` is pure and answers one of:
    Resolved(entry)            one online definition
    Offline(entry)             exactly one match, but it is not ONLINE (DS would answer 50004)
    Ambiguous(candidates)      several plausible definitions; ask the user to pick
    Unknown(query, closest)    nothing plausible; show the closest names

`sync_catalog()` is what the name-sync job runs: it reads every definition's code and release state
from DolphinScheduler; the DolphinScheduler feature persists the result through a `CatalogStore`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from rapidfuzz import fuzz, process

from xihe.agent.errors import DolphinError
from xihe.config.workflows import Workflow, WorkflowsConfig
from xihe.integrations.dolphinscheduler.client import DolphinClient

FUZZY_ACCEPT = 85.0  # a fuzzy score this high may resolve on its own
FUZZY_MARGIN = 8.0  # ... when it beats the runner-up by this much
FUZZY_SUGGEST = 50.0  # closest names shown for an unknown query


@dataclass(frozen=True)
class CatalogEntry:
    """One workflow definition known to DolphinScheduler."""

    project: str
    name: str
    code: int
    release_state: str  # ONLINE | OFFLINE
    project_code: int = 0

    @property
    def online(self) -> bool:
        """Whether DS will start it."""
        return self.release_state == "ONLINE"


@dataclass(frozen=True)
class Alias:
    """A chat name for a workflow, from config/workflows.yaml."""

    alias: str
    name: str
    project: str = ""


@dataclass(frozen=True)
class Resolved:
    """The query names exactly one online workflow."""

    entry: CatalogEntry
    via: str  # exact | alias | fuzzy


@dataclass(frozen=True)
class Offline:
    """The query names one workflow, but it is offline and cannot be started."""

    entry: CatalogEntry


@dataclass(frozen=True)
class Ambiguous:
    """Several workflows fit; the user should pick one."""

    query: str
    candidates: tuple[CatalogEntry, ...]


@dataclass(frozen=True)
class Unknown:
    """No workflow fits; `closest` are the nearest names (maybe empty)."""

    query: str
    closest: tuple[CatalogEntry, ...]


Resolution = Resolved | Offline | Ambiguous | Unknown

_NOISE = re.compile(r"(的?(?:工作流|任务|流程|作业|workflow|job|task)|的)$")


def normalise(name: str) -> str:
    """Fold case, width, separators and trailing words like 任务/workflow for comparison."""
    s = unicodedata.normalize("NFKC", name).strip().lower()
    s = re.sub(r"^(the)\s+", "", s)
    for _ in range(2):
        s = _NOISE.sub("", s).strip(" _-.")
    return re.sub(r"[\s_\-.]+", "_", s)


def aliases_from_config(config: WorkflowsConfig) -> list[Alias]:
    """The aliases admins configured (and each configured name as an alias of itself)."""
    out: list[Alias] = []
    for wf in config.workflows:
        out.extend(Alias(a, wf.name, wf.project) for a in wf.aliases)
    return out


def names_of(query: str, config: WorkflowsConfig | None, catalog: Iterable[CatalogEntry] = ()) -> set[str]:
    """Every name the workflow `query` means goes by: its DolphinScheduler name, its aliases and its
    code, when `query` is any of them (compared as `normalise` does); otherwise just `query`.

    What a search by workflow matches, since a call records the name as the user typed it."""
    key = normalise(query)
    workflows = config.workflows if config is not None else []
    entries = list(catalog)

    def configured(wf: Workflow) -> list[str]:
        return [wf.name, *wf.aliases, *([str(wf.code)] if wf.code is not None else [])]

    meant = {wf.name for wf in workflows if key in {normalise(n) for n in configured(wf)}}
    meant |= {e.name for e in entries if key in (normalise(e.name), str(e.code))}
    found = {query.strip()}
    for wf in workflows:
        if wf.name in meant:
            found.update(configured(wf))
    found.update(n for e in entries if e.name in meant for n in (e.name, str(e.code)))
    return {n for n in found if n}


def _pick(entries: Sequence[CatalogEntry], query: str, via: str, require_online: bool) -> Resolution:
    if len(entries) > 1:
        return Ambiguous(query, tuple(entries))
    entry = entries[0]
    if require_online and not entry.online:
        return Offline(entry)
    return Resolved(entry, via)


def resolve(
    query: str,
    catalog: Sequence[CatalogEntry],
    aliases: Iterable[Alias] = (),
    *,
    project: str | None = None,
    require_online: bool = True,
    limit: int = 5,
) -> Resolution:
    """Map a chat name to one catalog entry, or say why not (ambiguous, unknown, offline)."""
    entries = [e for e in catalog if project is None or e.project == project]
    key = normalise(query)
    if not key:
        return Unknown(query, ())
    exact = [e for e in entries if normalise(e.name) == key]
    if exact:
        return _pick(exact, query, "exact", require_online)
    alias_list = list(aliases)
    targets = {(a.name, a.project) for a in alias_list if normalise(a.alias) == key}
    by_alias = [e for e in entries if any(e.name == n and (not p or e.project == p) for n, p in targets)]
    if by_alias:
        return _pick(by_alias, query, "alias", require_online)
    # fuzzy: over names and aliases, best score per catalog entry
    choices: dict[str, list[CatalogEntry]] = {}
    for e in entries:
        choices.setdefault(normalise(e.name), []).append(e)
    for a in alias_list:
        for e in entries:
            if e.name == a.name and (not a.project or e.project == a.project):
                choices.setdefault(normalise(a.alias), []).append(e)
    scored: dict[CatalogEntry, float] = {}
    for text, score, _ in process.extract(key, list(choices), scorer=fuzz.WRatio, limit=None):
        for e in choices[text]:
            scored[e] = max(scored.get(e, 0.0), float(score))
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0].project, kv[0].name))
    strong = [(e, s) for e, s in ranked if s >= FUZZY_ACCEPT]
    if strong:
        best, best_score = strong[0]
        runner_up = strong[1][1] if len(strong) > 1 else 0.0
        if best_score - runner_up >= FUZZY_MARGIN:
            return _pick([best], query, "fuzzy", require_online)
        return Ambiguous(query, tuple(e for e, s in strong[:limit] if best_score - s < FUZZY_MARGIN))
    return Unknown(query, tuple(e for e, s in ranked[:3] if s >= FUZZY_SUGGEST))


# ---- the sync job ----------------------------------------------------------------------------


class CatalogStore(Protocol):
    """Where the synced name → code catalog lives (a table in production)."""

    def replace(self, entries: Sequence[CatalogEntry], synced_at: datetime) -> None:
        """Replace the catalog of the projects present in `entries` with them."""

    def entries(self) -> list[CatalogEntry]:
        """The whole catalog."""

    def synced_at(self) -> datetime | None:
        """When the last sync finished, or None."""


class InMemoryCatalogStore:
    """CatalogStore kept in a dict; for tests and single-process demos."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], CatalogEntry] = {}
        self._synced_at: datetime | None = None

    def replace(self, entries: Sequence[CatalogEntry], synced_at: datetime) -> None:
        """Replace the catalog of the projects present in `entries`."""
        projects = {e.project for e in entries}
        self._entries = {k: v for k, v in self._entries.items() if k[0] not in projects}
        self._entries.update({(e.project, e.name): e for e in entries})
        self._synced_at = synced_at

    def entries(self) -> list[CatalogEntry]:
        """The whole catalog, sorted by project and name."""
        return sorted(self._entries.values(), key=lambda e: (e.project, e.name))

    def synced_at(self) -> datetime | None:
        """When the last sync finished."""
        return self._synced_at


def sync_catalog(client: DolphinClient, projects: Sequence[str] = ()) -> list[CatalogEntry]:
    """Read name, code and release state of every definition in `projects` (all projects when empty)."""
    known = client.list_projects()
    wanted = [p for p in known if not projects or p.name in projects]
    missing = sorted(set(projects) - {p.name for p in known})
    if missing:
        raise DolphinError(f"project(s) not found in DolphinScheduler: {', '.join(missing)}", code=10018)
    out: list[CatalogEntry] = []
    for p in wanted:
        out.extend(
            CatalogEntry(p.name, d.name, d.code, d.release_state, p.code)
            for d in client.list_definitions(p.code)
        )
    return out


def by_project(entries: Iterable[CatalogEntry]) -> Mapping[str, list[CatalogEntry]]:
    """Group catalog entries by project name."""
    out: dict[str, list[CatalogEntry]] = {}
    for e in entries:
        out.setdefault(e.project, []).append(e)
    return out
