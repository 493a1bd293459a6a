"""E-mail fallback over the standard library's smtplib (STARTTLS optional, password from the environment).

The subject is always made one safe header line here (`email_text.subject`); the caller gives the
body parts already encoded (`email_text.plain` / `email_text.html`).
"""

from __future__ import annotations

import os
import smtplib
import ssl
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from xihe.agent.email_text import subject as subject_line
from xihe.agent.errors import MailError
from xihe.agent.redact import excerpt


class Mailer:
    """Sends plain-text mail (with an HTML alternative when given); raises MailError (retryable for
    transport trouble and 4xx replies)."""

    def __init__(
        self,
        host: str,
        port: int = 25,
        from_addr: str = "xihe@localhost",
        *,
        starttls: bool = False,
        username: str = "",
        password_env: str = "",
        timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port, self.from_addr = host, port, from_addr
        self.starttls, self.username, self.password_env = starttls, username, password_env
        self.timeout = timeout
        self._env = env if env is not None else os.environ
        self._ssl = ssl_context

    def send(
        self, to: Sequence[str], subject: str, body: str, message_id_key: str = "", *, html: str = ""
    ) -> str:
        """Send one mail; returns the server's reply to DATA (for the audit)."""
        if not to:
            raise MailError("no recipients configured for the e-mail fallback")
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = self.from_addr, ", ".join(to), subject_line(subject)
        msg["Date"] = formatdate(localtime=False)
        msg["Message-ID"] = make_msgid(idstring=message_id_key[:40] or None, domain="xihe")
        msg.set_content(body)
        if html:
            msg.add_alternative(html, subtype="html")
        password = self._env.get(self.password_env, "") if self.password_env else ""
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                smtp.ehlo()
                if self.starttls:
                    smtp.starttls(context=self._ssl or ssl.create_default_context())
                    smtp.ehlo()
                if self.username:
                    smtp.login(self.username, password)
                refused = smtp.send_message(msg)
                if refused:
                    raise MailError(f"recipients refused: {', '.join(sorted(refused))}")
                code, reply = smtp.noop()
                text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
                return f"{code} {text}"
        except smtplib.SMTPResponseException as exc:
            # 4xx is transient by RFC 5321; 5xx is permanent. A reply echoing the password is masked.
            err = exc.smtp_error
            detail = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
            raise MailError(
                f"SMTP {exc.smtp_code}: {excerpt(detail, password)}",
                retryable=400 <= exc.smtp_code < 500,
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            problem = excerpt(str(exc), password)
            raise MailError(f"SMTP failed: {type(exc).__name__}: {problem}", retryable=True) from None
