"""README's first command works on a fresh machine, and the READMEs stay honest: README.md is a front
door under 10 KB, every link in every README.md resolves inside the repository (anchors to headings),
nothing names the workplace's `../shared`, every README reaches from README.md, and every `xihe`
command in a bash block is one the CLI's parser accepts."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.conftest import REPO
from xihe.agent.cli.main import build_parser

FRONT_DOOR_BYTES = 10_240
PRUNED = {"var", "build", "dist", "node_modules", "test-artifacts", "__pycache__"}


def first_command(readme: str) -> str:
    """The first line of the first bash block, without its trailing comment."""
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert block, "README has no ```bash block"
    return block.group(1).splitlines()[0].split("  #", 1)[0].strip()


def test_first_command_is_the_venv_install_and_demo() -> None:
    command = first_command((REPO / "README.md").read_text(encoding="utf-8"))
    assert command.startswith("python3 -m venv .venv") and command.endswith("xihe demo")


@pytest.mark.slow
def test_first_command_runs_in_a_fresh_copy(tmp_path: Path) -> None:
    command = first_command((REPO / "README.md").read_text(encoding="utf-8"))
    copy = tmp_path / "xihe"
    shutil.copytree(
        REPO,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "var", "__pycache__", "*.egg-info", ".*_cache", "build"
        ),
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_USER")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    result = subprocess.run(
        ["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=1200
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "Every reply above came through the real loop" in out, out[-4000:]
    assert (copy / ".venv" / "bin" / "xihe").exists()  # installed into the new environment, not the system


def readmes() -> list[Path]:
    """Every README.md of the project: tracked or new (git), else a walk without build and cache folders."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "README.md", "*/README.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode == 0 and listed.stdout.strip():  # git lists no file inside a nested repository
        found = {REPO / line for line in listed.stdout.splitlines()}
    else:
        found = {p for p in REPO.rglob("README.md") if ours(p)}
    return sorted(p for p in found if p.exists())


def ours(path: Path) -> bool:
    """Not under a build, cache or hidden folder, nor in a nested repository (a kept demo's xihe-src)."""
    folders = path.relative_to(REPO).parents
    return not any(
        f.name.startswith(".")
        or f.name in PRUNED
        or f.name.endswith(".egg-info")
        or (REPO / f / ".git").exists()
        for f in folders
        if f != Path(".")
    )


def prose(text: str) -> str:
    """The Markdown outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def links(text: str) -> list[str]:
    """Link targets outside code (fenced blocks and inline code spans are not links)."""
    outside = re.sub(r"`[^`\n]*`", "", prose(text))
    return re.findall(r"\]\(([^)\s]+)\)", outside)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", prose(text), flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("readme", readmes(), ids=rel)
def test_every_link_resolves_inside_the_repository(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    for target in links(text):
        where = f"{rel(readme)}: ({target})"
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I), f"{where} points outside the repository"
        path_part, _, anchor = target.partition("#")
        path = (readme.parent / unquote(path_part)).resolve() if path_part else readme
        assert path.is_relative_to(REPO), f"{where} leaves the repository"
        assert path.exists(), f"{where}: no such file"
        if anchor:
            assert path.suffix == ".md", f"{where}: an anchor into a file that is not Markdown"
            assert anchor in anchors(path.read_text(encoding="utf-8")), f"{where}: no heading #{anchor}"


@pytest.mark.parametrize("readme", readmes(), ids=rel)
def test_no_readme_names_the_workplace_shared_folder(readme: Path) -> None:
    # a clone has no ../shared: what the product needs from it is stated in the repository
    assert "../shared" not in readme.read_text(encoding="utf-8"), rel(readme)


def test_readme_is_a_front_door_under_10_kb() -> None:
    size = (REPO / "README.md").stat().st_size
    assert size <= FRONT_DOOR_BYTES, f"README.md is {size} bytes; move detail to the README of its folder"


def test_every_readme_is_reachable_from_the_front_door() -> None:
    reached, todo = set(), [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in links(page.read_text(encoding="utf-8")):
            path = (page.parent / unquote(target.partition("#")[0])).resolve()
            if path.name == "README.md" and path.exists():
                todo.append(path)
    assert [rel(p) for p in readmes() if p.resolve() not in reached] == []


def xihe_commands(text: str) -> list[list[str]]:
    """Each `xihe ...` invocation in the ```bash blocks, as argv after `xihe`, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if "xihe " not in line:
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            segment: list[str] = []
            for word in [*lexer, ";"]:  # the last segment ends with the line
                if word not in {"&&", "||", ";", "|", "&"}:
                    segment.append(word)
                    continue
                if segment[:1] == ["xihe"]:
                    commands.append(segment[1:])
                segment = []
    return commands


def test_front_door_shows_the_tour_commands() -> None:
    shown = {argv[0] for argv in xihe_commands((REPO / "README.md").read_text(encoding="utf-8"))}
    assert {"demo", "chat", "serve"} <= shown


@pytest.mark.parametrize("readme", readmes(), ids=rel)
def test_every_xihe_command_in_a_bash_block_is_accepted_by_the_cli(readme: Path) -> None:
    parser = build_parser()
    for argv in xihe_commands(readme.read_text(encoding="utf-8")):
        try:
            args = parser.parse_args(argv)
        except SystemExit:  # argparse has printed why
            pytest.fail(f"{rel(readme)}: `xihe {shlex.join(argv)}` is not a command the CLI accepts")
        assert callable(args.func), argv
