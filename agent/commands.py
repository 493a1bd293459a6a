"""Explicit commands, parsed without the model: `/help`, `/confirm [id]`, `/task ID` ...

Parsing is pure: text → Command | None. Plain-word confirmations (确认执行) count as `/confirm`
only when they are the whole message, typed by the user on the channel.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A parsed command: its name and its arguments as typed."""

    name: str
    args: tuple[str, ...]
    rest: str  # the text after the command word, unsplit (for /sh and free-form arguments)


class CommandSyntaxError(ValueError):
    """The text starts like a command but cannot be split (e.g. an unclosed quote)."""


def parse(text: str, confirm_phrases: tuple[str, ...] = ("确认执行",)) -> Command | None:
    """Parse a message; None means it is free text for the model."""
    stripped = text.strip()
    if stripped in confirm_phrases:
        return Command("confirm", (), "")
    if not stripped.startswith("/") or len(stripped) < 2 or not stripped[1].isalpha():
        return None
    word, _, rest = stripped[1:].partition(" ")
    try:
        args = tuple(shlex.split(rest)) if rest.strip() else ()
    except ValueError as exc:
        raise CommandSyntaxError(f"cannot read the arguments of /{word}: {exc}") from None
    return Command(word.lower(), args, rest.strip())
