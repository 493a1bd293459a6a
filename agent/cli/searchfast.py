"""`xihe search` answered by a running `xihe serve` before the command line's parser is even imported.

A search that a serve answers spends most of its time starting the interpreter; what this process does
on top must cost next to nothing. So `main()` hands the arguments of `xihe [--config DIR] search ...`
here first, and this module, using only what the interpreter has loaded at start-up plus the socket
client (`tools/codeindex/searchsock.py`), reads the common forms itself:

    [--config DIR] [--repo PATH] [--json] [-k N] QUERY WORDS... (the options also after the words)

Anything else (`--local`, `-h`, an abbreviated or unknown option, a value that starts with `-`, words
split by an option, no `code.yaml`, no serve, a refusal) returns None, and the full path runs as
before: argparse reads the same arguments (and reports their errors), the serve is asked again or the
index is searched in this process. Both print the same bytes: the serve renders the hits with the
function the local path prints with (`tools/codeindex/hitstext.py`).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # (typing itself costs a millisecond to import)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

_VALUED = ("--config", "--repo", "-k")


def read_args(argv: Sequence[str]) -> tuple[str, str, bool, int, str] | None:
    """(config dir, repo, --json, k, query) when `argv` is of the common form, else None."""
    values = {"--config": "config", "--repo": ".", "-k": "10"}
    as_json, after_words = False, False
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg in _VALUED or (eq and name in ("--config", "--repo")):
            if not eq:
                if i + 1 == len(argv):
                    return None
                i, value = i + 1, argv[i + 1]
            if not value or value.startswith("-"):
                return None
            values[name] = value
            after_words = bool(words)
        elif arg == "--json":
            as_json, after_words = True, bool(words)
        elif arg.startswith("-") or (words and after_words):
            return None  # an option argparse reads (or refuses), or words split by an option
        else:
            words.append(arg)
        i += 1
    k = values["-k"]
    if not words or not (k.isascii() and k.isdigit()):
        return None
    return values["--config"], values["--repo"], as_json, int(k), " ".join(words)


def served_output(config_dir: str, repo: str, query: str, k: int, as_json: bool) -> str | None:
    """What `xihe search` prints, from a serve that searches with the same code.yaml, or None."""
    from xihe.tools.codeindex import searchsock

    try:
        with open(os.path.join(config_dir, "code.yaml"), "rb") as f:
            raw = f.read(searchsock.MAX_REQUEST + 1)
        code_yaml = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):  # the local path reads (or reports) it
        return None
    index_dir = searchsock.index_dir_named(raw)
    if index_dir is None or not os.path.isdir(repo):
        return None
    request = searchsock.request_line(os.path.realpath(repo), query, k, as_json, index_dir, code_yaml)
    answer = searchsock.ask(index_dir, request) if request is not None else None
    if answer is None:
        return None
    try:
        return answer.decode("utf-8")
    except UnicodeDecodeError:
        return None


def answered(argv: Sequence[str]) -> int | None:
    """Exit code 0 after printing the serve's answer to `search` arguments, or None: take the full path."""
    args = read_args(argv)
    if args is None or sys.stdout is None:  # (no stdout: print() there does nothing; the full path)
        return None
    config_dir, repo, as_json, k, query = args
    out = served_output(config_dir, repo, query, k, as_json)
    if out is None:
        return None
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


def leave(code: int) -> NoReturn:
    """End this process at once after a served answer (called only as the console script): the output
    is written and flushed and nothing else is pending, while the interpreter's finalization, tearing
    down every loaded module, cost 3-8 ms here, a tenth of the whole command."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
