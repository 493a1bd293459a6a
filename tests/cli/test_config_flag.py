"""`--config DIR` is accepted before or after the command, for every command."""

from __future__ import annotations

import argparse

import pytest

from xihe.agent.cli.main import build_parser

COMMANDS = [
    ["chat", "--user", "alice"],
    ["serve"],
    ["tools"],
    ["task", "show", "1"],
    ["task", "resume", "1"],
    ["audit", "search"],
    ["config", "check"],
    ["alerts", "replay", "events.jsonl"],
    ["search", "where"],
    ["index"],
    ["demo"],
]


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _leaves(child, (*path, name)) or [(*path, name)]
    return found


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_config_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args([*argv, "--config", "/etc/xihe"]).config == "/etc/xihe"


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_config_before_the_command_and_default(argv: list[str]) -> None:
    assert build_parser().parse_args(["--config", "/srv/xihe", *argv]).config == "/srv/xihe"
    assert build_parser().parse_args(argv).config == "config"


def test_every_command_has_the_flag() -> None:
    parser = build_parser()
    for path in _leaves(parser):
        child: argparse.ArgumentParser = parser
        for name in path:
            sub = next(a for a in child._actions if isinstance(a, argparse._SubParsersAction))
            child = sub.choices[name]
        assert any("--config" in a.option_strings for a in child._actions), " ".join(path)
