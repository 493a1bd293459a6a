"""Hot reload of shell.yaml that keeps the last good whitelist when a new version is invalid."""

from __future__ import annotations

import logging
from pathlib import Path

from xihe.agent.errors import ConfigError
from xihe.config.shell.file import load_shell_file
from xihe.tools.shell.whitelist import Whitelist

log = logging.getLogger(__name__)


class ReloadingWhitelist:
    """Holds the current Whitelist; `reload()` swaps it only when the file validates."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.current = Whitelist(load_shell_file(self.path))  # start-up: a bad file is fatal
        self.last_error: ConfigError | None = None

    def reload(self) -> ConfigError | None:
        """Re-read the file; on error keep the running whitelist, log why and return the error."""
        try:
            self.current = Whitelist(load_shell_file(self.path))
        except ConfigError as exc:
            self.last_error = exc
            log.error("shell.yaml reload failed; keeping the last good whitelist: %s", exc)
            return exc
        self.last_error = None
        return None
