"""Shared fixtures: a config directory per test, SQLite and PostgreSQL stores, the scripted LLM."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import create_engine, text

from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.integrations.fakes.llm_server import ScriptedLLM, Step

REPO = Path(__file__).resolve().parent.parent
# .ci/setup creates this role and database; XIHE_TEST_PG_URL points elsewhere.
PG_URL = os.environ.get("XIHE_TEST_PG_URL", "postgresql://xihe:xihe@127.0.0.1:5432/xihe_test")


@pytest.fixture(autouse=True)
def _isolation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No proxies, no real model, no stray database URL; effects and markers in tmp."""
    for var in (
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "XIHE_DATABASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("XIHE_FORBID_REMOTE_LLM", "1")
    monkeypatch.setenv("XIHE_TEST_EFFECTS", str(tmp_path / "effects.jsonl"))
    monkeypatch.setenv("XIHE_TEST_MARKERS", str(tmp_path))


def reset_postgres(url: str) -> None:
    """Drop every table so a test starts from an empty, unmigrated database."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each back end (PostgreSQL from XIHE_TEST_PG_URL)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'xihe.db'}"
    try:
        reset_postgres(PG_URL)
    except Exception as exc:
        pytest.fail(
            f"PostgreSQL at {PG_URL.split('@')[-1]} is not reachable ({type(exc).__name__}); run "
            "`bash .ci/setup` to install and start it, set XIHE_TEST_PG_URL, or deselect with -m 'not postgres'"
        )
    return PG_URL


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'xihe.db'}"


CORE_FILES = ("xihe.yaml", "access.yaml")


def write_config(
    directory: Path,
    *,
    llm_url: str = "",
    overrides: dict[str, Any] | None = None,
    files: tuple[str, ...] = CORE_FILES,
) -> Path:
    """Copy shipped config files and point them at the fakes; `overrides` merge into xihe.yaml."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copy(REPO / "config" / name, directory / name)
    core = yaml.safe_load((directory / "xihe.yaml").read_text())
    core["llm"].update({"base_url": llm_url, "model": "scripted", "max_wait_seconds": 0})
    core["plugins"] = ["tests.support.tools:SPECS"]
    for key, value in (overrides or {}).items():
        if isinstance(value, dict):
            core.setdefault(key, {}).update(value)
        else:
            core[key] = value
    (directory / "xihe.yaml").write_text(yaml.safe_dump(core, allow_unicode=True))
    return directory


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """An empty scripted model server; tests add steps."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


MakeApp = Callable[..., App]


@pytest.fixture
def make_app(tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sqlite_url: str) -> MakeApp:
    """Build a bot over the scripted LLM; call again with the same url to simulate a restart."""
    counter = {"n": 0}

    def make(
        script: list[Step] | None = None,
        *,
        db: str | None = None,
        with_llm: bool = True,
        overrides: dict[str, Any] | None = None,
        notify: Callable[[str, str], None] | None = None,
        files: tuple[str, ...] = CORE_FILES,
    ) -> App:
        counter["n"] += 1
        if script:
            llm.add(*script)
        cfg = write_config(
            tmp_path / f"config{counter['n']}",
            llm_url=llm.base_url if with_llm else "",
            overrides=overrides,
            files=files,
        )
        return build_app(
            cfg, clock=clock, database_url=db or sqlite_url, notify=notify, holder=f"test-{counter['n']}"
        )

    return make
