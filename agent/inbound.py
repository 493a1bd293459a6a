"""One inbound message as a channel verified it, and the language its reply is in.

Every channel builds an `Inbound` and hands it to `xihe.agent.session.Session.handle`, which derives
the message's language once and carries it on the message (`lang`): the handlers, the task the
message starts and its walk all read that one derivation. Command handlers see the session as a
`CommandSession`: the agent loop and its deps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from xihe.agent.i18n import Lang

if TYPE_CHECKING:
    from xihe.agent.deps import Deps
    from xihe.agent.loop import Agent


@dataclass(frozen=True)
class Inbound:
    """One message as a channel verified it."""

    user: str
    conversation: str
    text: str
    channel: str = "cli"
    lang: Lang | None = None  # the reply's language, once the session derived it (`reply_lang`)


class CommandSession(Protocol):
    """The session as a command handler uses it (`xihe.agent.session.Session`)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def deps(self) -> Deps: ...


def reply_lang(session: CommandSession, msg: Inbound) -> Lang:
    """The language of this message, else of the user's last free-text message here, else the configured
    one: one store read at most (`Deps.lang`), which `Session.handle` makes once and carries (`Inbound.lang`)."""
    return msg.lang if msg.lang is not None else session.deps.lang(msg.text, msg.conversation)
