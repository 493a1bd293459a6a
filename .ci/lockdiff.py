"""Name the packages whose installed version differs from constraints.txt (the lock CI tested).

    python .ci/lockdiff.py constraints.txt FREEZE   # FREEZE: `pip freeze` of an unconstrained install

Prints one line per package, `name: locked 6.0.3 -> installed 6.0.4` (or `new dependency`), and
exits 1 when there is any, 0 when the install is exactly the lock. Names compare as PEP 503 does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def pins(text: str) -> dict[str, str]:
    """`name==version` lines as {normalized name: version}; comments, blanks and -e lines skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-") or "==" not in line:
            continue
        name, version = line.split("==", 1)
        out[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return out


def differences(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """What moved, one line each, sorted by name."""
    lines = []
    for name in sorted(set(locked) | set(installed)):
        was, now = locked.get(name), installed.get(name)
        if was == now:
            continue
        if was is None:
            lines.append(f"{name}: new dependency {now}")
        elif now is None:
            lines.append(f"{name}: locked {was}, no longer installed")
        else:
            lines.append(f"{name}: locked {was} -> installed {now}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    locked, installed = (pins(Path(a).read_text(encoding="utf-8")) for a in argv)
    moved = differences(locked, installed)
    print("\n".join(moved))
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
