"""The alert config of `xihe alerts replay` without pydantic or YAML: a validated snapshot in the
machine's cache (`XIHE_CACHE_DIR`, else `$XDG_CACHE_HOME/xihe`, else `~/.cache/xihe`, under
`alert-config/`).

Validating `alerts.yaml`, `workflows.yaml` and `access.yaml` means importing pydantic, PyYAML and the
config models: ~90 ms of a 10,000-event replay's ~400 (issue 30). The first replay of a config
directory validates them as always (errors reported as always) and writes what it validated to a
JSON file named by the SHA-1 of the three files' bytes (a missing file counts as missing), of the
models' and this module's source, of the installed pydantic's and PyYAML's version files, of
Python's version and of the snapshot's format. A later replay of byte-for-byte the same files reads
that file and builds plain read-only objects with the same attributes (`Plain`); any edit, another
xihe, pydantic or PyYAML, or a file that cannot be read or is damaged (it starts with the SHA-1 of
its JSON) takes the validating path and writes a new snapshot (atomically: a temporary file renamed
into place). Without a usable cache directory nothing is kept. tests/alerts/test_configsnap.py
holds every attribute of the plain objects equal to the validated models'.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from xihe.agent.cachedir import shared_cache, write_atomic

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import WorkflowsConfig

FORMAT = "xihe-alert-config 1"
FILES = ("alerts.yaml", "workflows.yaml", "access.yaml")
_HERE = Path(__file__).resolve()
# the sources whose rules decide what a validated config is (xihe/agent/alerts -> xihe/config/...)
SOURCES = (
    _HERE,
    _HERE.parents[2] / "config" / "alerts.py",
    _HERE.parents[2] / "config" / "workflows.py",
    _HERE.parents[2] / "config" / "access.py",
    _HERE.parents[2] / "config" / "yamlmodel.py",
    _HERE.parents[1] / "cron.py",
)

Loaded = tuple["AlertsConfig", "WorkflowsConfig", frozenset[str]]


class Plain:
    """Read-only attributes of one validated model, built from its JSON dump."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    if TYPE_CHECKING:  # its attributes are those of the dump it was built from

        def __getattr__(self, name: str) -> Any: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__!r})"

    def model_copy(self, update: dict[str, Any] | None = None) -> Plain:
        """A copy with `update` applied (what pydantic's model_copy does for the fields read)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__, **(update or {}))
        return new


class PlainLifecycle(Plain):
    """`Lifecycle` (config/alerts.py) with its `policy`."""

    tiers: dict[str, Plain]
    unset: Plain  # the policy of a tier not configured

    def policy(self, tier: str) -> Plain:
        """The policy of `tier` (a tier not configured: the model's default policy)."""
        found = self.tiers.get(tier)
        return found if found is not None else self.unset


class PlainWorkflows(Plain):
    """`WorkflowsConfig` (config/workflows.py) with its `biz_date_offset`."""

    workflows: list[Plain]
    default_offset: int

    def biz_date_offset(self, project: str, name: str) -> int:
        """scheduleTime = business date + this many days; unconfigured workflows use the default."""
        for wf in self.workflows:
            if wf.name == name and wf.project == project:
                return int(wf.biz_date_offset)
        return int(self.default_offset)


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _alerts(d: dict[str, Any], unset: dict[str, Any]) -> Plain:
    out = dict(d)
    for name in ("node_storm", "delivery", "smtp", "webhook", "scan"):
        out[name] = Plain(d[name])
    out["channels"] = {k: Plain(v) for k, v in d["channels"].items()}
    out["maintenance"] = [
        Plain({**m, "start": _time(m["start"]), "end": _time(m["end"]), "scope": Plain(m["scope"])})
        for m in d["maintenance"]
    ]
    life = d["lifecycle"]
    tiers = {k: Plain(v) for k, v in life["tiers"].items()}
    out["lifecycle"] = PlainLifecycle({**life, "tiers": tiers, "unset": Plain(unset)})
    return Plain(out)


def _workflows(d: dict[str, Any], default_offset: int) -> PlainWorkflows:
    wfs = [Plain(w) for w in d["workflows"]]
    return PlainWorkflows({**d, "workflows": wfs, "default_offset": default_offset})


def build(snap: dict[str, Any]) -> Loaded:
    """The plain config of a snapshot's data (KeyError/TypeError/ValueError when it is damaged)."""
    alerts = _alerts(snap["alerts"], snap["unset_tier"])
    workflows = _workflows(snap["workflows"], int(snap["default_offset"]))
    production = frozenset(str(p) for p in snap["production"])
    return cast("AlertsConfig", alerts), cast("WorkflowsConfig", workflows), production


def _validators() -> list[Path] | None:
    """The files that name the installed pydantic's and PyYAML's versions (found, not imported)."""
    from importlib.util import find_spec

    out = []
    for name, file in (("pydantic", "version.py"), ("yaml", "__init__.py")):
        spec = find_spec(name)
        if spec is None or spec.origin is None:
            return None
        out.append(Path(spec.origin).with_name(file))
    return out


def _key(raw: dict[str, bytes | None]) -> str | None:
    h = hashlib.sha1(f"{FORMAT}|{sys.version}".encode())
    validators = _validators()
    if validators is None:
        return None
    try:
        for src in (*SOURCES, *validators):
            h.update(hashlib.sha1(src.read_bytes()).digest())
    except OSError:
        return None  # the rules cannot be named: no snapshot
    for name in FILES:
        body = raw[name]
        h.update(f"\0{name}\0{'-' if body is None else len(body)}\0".encode())
        h.update(body or b"")
    return h.hexdigest()


def _text(raw: bytes) -> str:
    """The file's text as `Path.read_text(encoding="utf-8")` gives it (universal newlines)."""
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def validate(root: Path, raw: dict[str, bytes | None]) -> Loaded:
    """The three files validated by their models (a missing file means defaults); ConfigError when bad."""
    from xihe.config.access import AccessConfig
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import WorkflowsConfig
    from xihe.config.yamlmodel import load_model

    def text(name: str) -> str | None:
        body = raw[name]
        return None if body is None else _text(body)

    access_text, alerts_text, wf_text = text("access.yaml"), text("alerts.yaml"), text("workflows.yaml")
    access = (
        load_model(access_text, str(root / "access.yaml"), AccessConfig)
        if access_text is not None
        else AccessConfig()
    )
    alerts = (
        load_model(alerts_text, str(root / "alerts.yaml"), AlertsConfig)
        if alerts_text is not None
        else AlertsConfig()
    )
    workflows = (
        load_model(wf_text, str(root / "workflows.yaml"), WorkflowsConfig)
        if wf_text is not None
        else WorkflowsConfig.model_validate({})
    )
    return alerts, workflows, access.production_environments()


def snapshot(loaded: Loaded) -> dict[str, Any]:
    """The JSON-ready data `build` reads back."""
    from xihe.config.workflows import DEFAULT_BIZ_DATE_OFFSET

    alerts, workflows, production = loaded
    return {
        "alerts": alerts.model_dump(mode="json"),
        "unset_tier": alerts.lifecycle.policy("").model_dump(mode="json"),
        "workflows": workflows.model_dump(mode="json"),
        "default_offset": DEFAULT_BIZ_DATE_OFFSET,
        "production": sorted(production),
    }


def _path(key: str) -> Path:
    return shared_cache() / "alert-config" / f"{key}.json"


def _read(key: str) -> Loaded | None:
    try:
        raw = _path(key).read_bytes()
        head, _, body = raw.partition(b"\n")
        if head != hashlib.sha1(body).hexdigest().encode():
            return None  # cut short or damaged (any byte)
        snap = json.loads(body)
        if not isinstance(snap, dict) or snap.get("key") != key:
            return None
        return build(snap)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or unreadable: validated again and rewritten


def _write(key: str, loaded: Loaded) -> None:
    """`<sha1 of the JSON>\n<the JSON>`, written to a temporary file renamed into place."""
    target = _path(key)
    data = json.dumps({"key": key, **snapshot(loaded)}, ensure_ascii=False).encode("utf-8")
    body = hashlib.sha1(data).hexdigest().encode() + b"\n" + data
    write_atomic(target, body)  # an unwritable cache only costs the next replay its speed


def load(directory: str | Path) -> Loaded:
    """alerts.yaml, workflows.yaml and access.yaml's production environments from `directory` (a
    missing file means defaults): the snapshot of these very bytes, else validated (ConfigError when
    bad) and remembered."""
    root = Path(directory)
    raw: dict[str, bytes | None] = {}
    for name in FILES:
        try:
            raw[name] = (root / name).read_bytes()
        except FileNotFoundError:
            raw[name] = None
    key = _key(raw)
    found = _read(key) if key is not None else None
    if found is not None:
        return found
    loaded = validate(root, raw)
    if key is not None:
        _write(key, loaded)
    return loaded
