"""One inbound message as a channel verified it, and the language its reply is in.

Every channel builds an `Inbound` and hands it to `xihe.agent.session.Session.handle`. Command
handlers see the session as a `CommandSession`: the agent loop and its deps.
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


class CommandSession(Protocol):
    """The session as a command handler uses it (`xihe.agent.session.Session`)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def deps(self) -> Deps: ...


def reply_lang(session: CommandSession, msg: Inbound) -> Lang:
    """The language of this message, else of the user's last free-text message here, else the configured one."""
    return session.deps.lang(msg.text, msg.conversation)
