"""The e-mail fallback every channel shares: the row's text to `channel.email_to` (or smtp.admins).

A row holds WeCom markdown (every channel kind renders it, render.MARKUPS); the mail carries it as a
plain part and an HTML part (`xihe.agent.email_text`), the subject made one safe header line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from xihe.agent import email_text
from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.errors import MailError

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig, Channel


class MailSender(Protocol):
    """What this notifier needs from a mailer (integrations.mailer.Mailer)."""

    def send(
        self, to: list[str], subject: str, body: str, message_id_key: str = "", *, html: str = ""
    ) -> str:
        """Send (`html`: an alternative part); raise MailError on failure; return the server reply."""
        ...


class EmailNotifier:
    """Mails a row to the channel's recipients."""

    kind = "email"
    markup = ""  # the fallback: sends the text as the channel's own notifier had it rendered

    def __init__(self, mailer: MailSender, admins: Sequence[str] = ()) -> None:
        self.mailer = mailer
        self.admins = list(admins)

    def recipients(self, channel: Channel) -> list[str]:
        """The channel's own recipients, else the admins."""
        return list(channel.email_to or self.admins)

    def ready(self, channel: Channel) -> str:
        """Someone must be there to receive it."""
        return "" if self.recipients(channel) else "no recipients configured for the e-mail fallback"

    def send(self, channel: Channel, text: str, *, subject: str = "", ref: str = "") -> Attempt:
        """One mail; `ref` (the outbox key) seeds the Message-ID."""
        try:
            reply = self.mailer.send(
                self.recipients(channel), subject, email_text.plain(text), ref, html=email_text.html(text)
            )
        except MailError as exc:
            return Attempt(False, error=str(exc), retryable=exc.retryable)
        return Attempt(True, body=reply)


def make_mail(config: AlertsConfig) -> EmailNotifier | None:
    """The fallback over smtplib, or None when no SMTP host is configured."""
    smtp = config.smtp
    if not smtp.host:
        return None
    from xihe.integrations.mailer import Mailer  # smtplib, ssl, email: only when mail can be sent

    mailer = Mailer(
        smtp.host,
        smtp.port,
        smtp.from_addr,
        starttls=smtp.starttls,
        username=smtp.username,
        password_env=smtp.password_env,
        timeout=smtp.timeout_seconds,
    )
    return EmailNotifier(mailer, smtp.admins)
