"""The compiled-template cache (agent/alerts/tplcache.py): used when it matches the template's source,
compiled again when the template changed, ignored when damaged."""

from __future__ import annotations

from pathlib import Path

import pytest

from xihe.agent.alerts.render import OPTIONS, Renderer
from xihe.agent.alerts.tplcache import template_cache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XIHE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "alert-templates"


def override(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "tpl"
    d.mkdir(parents=True, exist_ok=True)
    (d / "ack.md.j2").write_text(text, encoding="utf-8")
    return d


def ack(r: Renderer) -> str:
    return r.render("ack.md.j2", {"short": "A1", "workflow": "wf", "instance_id": 7, "who": "lisi"})


def cached_file(cache: Path, d: Path) -> Path:
    key = template_cache(OPTIONS).get_cache_key("ack.md.j2", str(d / "ack.md.j2"))
    return cache / f"{key}.jinja"


def test_the_compiled_template_is_read_back_from_the_cache(tmp_path: Path, cache: Path) -> None:
    d = override(tmp_path, "one {{ short }}")
    assert ack(Renderer(d)) == "one A1"
    path = cached_file(cache, d)
    assert path.is_file()
    # swap in the code of another source under the same header: a hit runs what the cache holds
    other = override(tmp_path / "x", "two {{ short }}")
    Renderer(other)
    code = cached_file(cache, other).read_bytes().split(b"\n", 1)[1]
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0] + b"\n" + code)
    assert ack(Renderer(d)) == "two A1"


def test_an_edited_template_is_compiled_again(tmp_path: Path, cache: Path) -> None:
    d = override(tmp_path, "before {{ short }}")
    assert ack(Renderer(d)) == "before A1"
    before = cached_file(cache, d).read_bytes()
    override(tmp_path, "after {{ short }}")
    assert ack(Renderer(d)) == "after A1"
    assert cached_file(cache, d).read_bytes() != before  # rewritten for the new source


@pytest.mark.parametrize("damage", ["garbage", "cut", "empty"])
def test_a_damaged_cache_file_is_ignored_and_rewritten(tmp_path: Path, cache: Path, damage: str) -> None:
    d = override(tmp_path, "fine {{ short }}")
    Renderer(d)
    path = cached_file(cache, d)
    good = path.read_bytes()
    head = good.split(b"\n", 1)[0] + b"\n"
    path.write_bytes(
        {"garbage": b"\x00\xff not a cache file", "cut": good[: len(head) + 5], "empty": b""}[damage]
    )
    assert ack(Renderer(d)) == "fine A1"
    assert path.read_bytes() == good


def test_other_options_do_not_share_compiled_code() -> None:
    a = template_cache(OPTIONS).header
    b = template_cache({**OPTIONS, "trim_blocks": False}).header
    assert a != b


def test_no_usable_cache_directory_still_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XIHE_CACHE_DIR", str(blocker))
    assert ack(Renderer(override(tmp_path, "ok {{ short }}"))) == "ok A1"
