"""Mail for terminal conversations: a late message reaches the `xihe chat` that asked, in whichever
process it was made.

A run started from `xihe chat` is followed by whichever process polls it (that chat, another user's
chat, a `xihe serve` sharing the store), and an approval is given from the approver's own terminal.
Messages for conversations no channel claims (`cli:alice`) therefore go to the store, not to the
screen of the process that made them: `post` files one under its conversation, and the `xihe chat`
of that conversation `take`s and prints it. Taking deletes the row, so of two terminals on one
conversation exactly one prints each message; a message for a chat that is not open waits until it is.
"""

from __future__ import annotations

from sqlalchemy import Engine, delete, insert, select

from xihe.agent.clock import Clock
from xihe.agent.mail_tables import chat_mail


class Mailbox:
    """The `chat_mail` table: post for a conversation, take (exactly once) what waits for one."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    def post(self, conversation: str, text: str) -> None:
        """File `text` for `conversation` (a `Deps.notify` target: the fallback for terminal chats)."""
        with self.engine.begin() as conn:
            conn.execute(
                insert(chat_mail).values(conversation=conversation, text=str(text), created_at=self.clock())
            )

    def take(self, conversation: str, limit: int = 100) -> list[str]:
        """The messages waiting for `conversation`, oldest first, removed from the store.

        Each row is deleted on its own condition; a message another terminal deleted first is not
        ours, so no message is printed twice.
        """
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(chat_mail.c.id, chat_mail.c.text)
                .where(chat_mail.c.conversation == conversation)
                .order_by(chat_mail.c.id)
                .limit(limit)
            ).all()
        taken = []
        for row in rows:
            with self.engine.begin() as conn:
                if conn.execute(delete(chat_mail).where(chat_mail.c.id == row.id)).rowcount == 1:
                    taken.append(row.text)
        return taken
