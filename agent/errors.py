"""The one exception tree of xihe, split by fault.

    BotError
    ├── ConfigError(file, line, key)          bad admin input; startup, reload and `xihe config check`
    ├── ToolError                             signals from inside a tool call
    │   ├── ToolRetry      bad arguments; the message tells the model how to fix them (uses retry budget)
    │   ├── ToolFailed     the tool ran and failed; the model sees the message and adapts
    │   ├── ToolDenied     the gate refused; the user sees the reason
    │   └── OutcomeUnknown a lookup cannot tell whether an interrupted write took effect
    ├── IntegrationError(service, retryable)  an outside service failed
    │   ├── LLMError(status)
    │   ├── DolphinError(code)
    │   ├── WeComError(errcode)
    │   └── MailError
    └── TaskStateError                        resume of a missing or finished task; a bad state transition

Handle by fault: a model mistake goes back to the model; an upstream failure is retried only when
`retryable` is true; anything else is our bug and is raised. Exceptions carry fields; `__init__`
never logs or sends anything. Messages never contain secrets (adapters redact before raising).

str() of an error is English (the model, the audit and the logs read it). An error people may read
also carries `text`, the same message from a catalog (`xihe.agent.i18n.Text`), which `said(lang)`
renders in their language: a tool error is built from one, an outside service's error may be given
one by the tool that saw it (`explained`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:  # annotations only: a command that raises no error never loads the catalogs
    from xihe.agent.i18n import Lang, Text


class BotError(Exception):
    """Root of every error xihe raises on purpose."""

    text: Text | None = None  # the message for people, from a catalog; None = only the English str()

    def said(self, lang: Lang) -> str:
        """The message in `lang` (the English str() when it has no catalog text)."""
        return self.text.in_(lang) if self.text is not None else str(self)

    def explained(self, text: Text) -> Self:
        """This error, told to people as `text` (its English str() is unchanged)."""
        self.text = text
        return self


class ConfigError(BotError, ValueError):
    """Admin configuration is invalid; str() reads `file:line: key: problem`."""

    def __init__(self, problem: str, file: str = "", line: int | None = None, key: str = "") -> None:
        self.file, self.line, self.key, self.problem = file, line, key, problem
        where = file + (f":{line}" if line is not None else "")
        parts = [p for p in (where, key) if p]
        super().__init__(": ".join([*parts, problem]))


class ConfigErrors(ConfigError):
    """Several configuration problems found in one pass; str() lists one per line."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        BotError.__init__(self, "\n".join(str(e) for e in errors))
        self.file, self.line, self.key, self.problem = (
            errors[0].file,
            errors[0].line,
            errors[0].key,
            errors[0].problem,
        )


class ToolError(BotError):
    """A signal raised inside a tool call; the loop decides who sees it.

    The message is a string (English only) or a catalog `Text` (English for the model, any
    language for people)."""

    def __init__(self, message: str | Text = "") -> None:
        if not isinstance(message, str):  # a catalog Text (i18n is not imported for this test)
            self.text = message
        super().__init__(str(message))


class ToolRetry(ToolError):
    """The arguments were wrong; the message says how to fix them. Costs one retry."""


class ToolFailed(ToolError):
    """The tool ran and failed for a reason the model can act on."""


class ToolDenied(ToolError):
    """The gate refused the call; `reason` is shown to the user."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class OutcomeUnknown(ToolError):
    """Raised by a tool's `lookup`: it cannot tell whether an earlier attempt took effect."""


class IntegrationError(BotError):
    """An outside service failed. `retryable` says whether trying again may help."""

    service = "integration"

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class LLMError(IntegrationError):
    """The model endpoint failed (HTTP status, timeout, connection)."""

    service = "llm"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        too_long: bool = False,
        sizes: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.status = status
        self.too_long = too_long  # the server refused the prompt as longer than its context window
        self.sizes = sizes  # (window, prompt tokens) as the server counted them, when it said
        super().__init__(message, retryable=retryable)


class DolphinError(IntegrationError):
    """DolphinScheduler answered with a non-zero `code` or failed at the transport."""

    service = "dolphinscheduler"

    def __init__(self, message: str, *, code: int | None = None, retryable: bool = False) -> None:
        self.code = code
        super().__init__(message, retryable=retryable)


class WeComError(IntegrationError):
    """WeCom answered with a non-zero `errcode` or failed at the transport."""

    service = "wecom"

    def __init__(self, message: str, *, errcode: int | None = None, retryable: bool = False) -> None:
        self.errcode = errcode
        super().__init__(message, retryable=retryable)


class MailError(IntegrationError):
    """The SMTP fallback could not deliver."""

    service = "smtp"


class TaskStateError(BotError):
    """A task or step is missing or cannot make the requested transition."""
