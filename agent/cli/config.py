"""`xihe config check` and `xihe config reload`.

xihe config check [DIR] [--offline]     validate the files (and, unless --offline, this host:
                                        workspaces and repositories exist); exit 1 with
                                        file:line: key: problem
xihe config reload [DIR] [--user NAME]  the same check, then a `reload_requested` audit row with
                                        your name and the files' digest: each replica's
                                        config_reload job applies the files and its audit row
                                        names you as the one who asked
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xihe.agent.errors import ConfigError, ConfigErrors

if TYPE_CHECKING:  # `xihe --help` imports no pydantic
    from xihe.config.load import Settings


def register(sub: Any) -> None:
    """Add the `config` command group to the xihe sub-parsers."""
    config = sub.add_parser("config", help="configuration").add_subparsers(
        dest="config_command", required=True
    )
    offline = "the files only, not this host (skip: workspaces and repositories exist here), e.g. in CI"
    check = config.add_parser("check", help="validate a config directory")
    check.add_argument("dir", nargs="?", help="directory (default: --config)")
    check.add_argument("--offline", action="store_true", help=offline)
    check.set_defaults(func=cmd_config_check)
    reload = config.add_parser("reload", help="validate, then ask the running replicas to apply it")
    reload.add_argument("dir", nargs="?", help="directory (default: --config)")
    reload.add_argument("--offline", action="store_true", help=offline)
    reload.add_argument("--user", help="who asks, as the audit shows it (default: your login name)")
    reload.set_defaults(func=cmd_config_reload)


def _checked(directory: str, offline: bool) -> Settings | None:
    """The validated settings, or None after printing every problem to stderr."""
    from xihe.agent.app import check_config, sections
    from xihe.config.load import host_problems

    try:
        settings, _registry = check_config(directory)
        problems = [] if offline else host_problems(settings, sections())
        if problems:
            raise ConfigErrors(problems)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return None
    except Exception as exc:  # e.g. a plugin that fails to import: say so, without a traceback
        print(f"{directory}: the check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return settings


def cmd_config_check(args: argparse.Namespace) -> int:
    """Validate; print OK, the web cookie notes and the shell sandbox's warnings."""
    directory = args.dir or args.config
    settings = _checked(directory, args.offline)
    if settings is None:
        return 1
    from xihe.config.dolphin import DOLPHIN_SECTION, token_notes

    dolphin = settings.get(DOLPHIN_SECTION)
    notes: list[str] = []
    if dolphin is not None and dolphin.user_tokens is not None:
        try:
            notes = token_notes(dolphin, settings.access.users)
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    print(f"{directory}: OK ({len(settings.texts)} file(s) checked)")
    for note in notes:
        print(f"NOTE dolphin.yaml: {note}")
    from xihe.config.shell.file import SHELL_SECTION
    from xihe.config.ui import UI_SECTION

    ui = settings.get(UI_SECTION)
    if ui is not None:
        from xihe.config.ui import config_notes

        for note in config_notes(ui):
            print(f"NOTE ui.yaml: {note}")
    shell = settings.get(SHELL_SECTION)
    if shell is not None:
        from xihe.tools.shell.sandbox import sandbox_warnings

        for warning in sandbox_warnings(shell):
            print(f"WARNING shell.yaml: {warning}")
    return 0


def cmd_config_reload(args: argparse.Namespace) -> int:
    """Validate, then record who asks for which files; the replicas' reload job does the rest."""
    from xihe.agent.audit import AuditEvent, SqlAuditSink
    from xihe.agent.clock import utc_now
    from xihe.agent.db import open_store_engine
    from xihe.agent.ops.reload import REQUEST, file_digests, fingerprint
    from xihe.config.ops import OPS_SECTION, OpsConfig

    directory = args.dir or args.config
    settings = _checked(directory, args.offline)
    if settings is None:
        print("Nothing was requested: the running config stays as it is.", file=sys.stderr)
        return 1
    digests = file_digests(Path(directory))
    digest = fingerprint(digests)
    who = args.user or getpass.getuser()
    engine = open_store_engine(settings.core.store.url)
    SqlAuditSink(engine).record(
        AuditEvent(
            at=utc_now(),
            kind="config",
            actor=who,
            outcome="reload_requested",
            tool=REQUEST,
            reason=f"{len(digests)} file(s) in {directory}",
            result_digest=digest,
            detail={"files": sorted(digests), "digest": digest, "directory": str(Path(directory).resolve())},
        )
    )
    engine.dispose()
    ops = settings.get(OPS_SECTION)
    cfg = (ops or OpsConfig.model_validate({})).config_reload
    print(f"{directory}: OK; reload requested by {who} (sha256 {digest[:12]}).")
    if cfg.enabled:
        print(
            f"Each replica applies it within {cfg.interval_seconds:g} s (its config_reload job); "
            "`xihe audit search --kind config` shows what each applied."
        )
    else:
        print(
            "config_reload is off in ops.yaml: replicas apply it on SIGHUP (systemctl reload) or a restart."
        )
    return 0
