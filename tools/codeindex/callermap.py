"""Which slots hold a unit of a name, and which slots' units call a name: the graph field's rows of a
one-file update read the units its changes concern, not every unit of the index.

Slots are only appended between compactions, so each list stays ascending (the order a scan of the
slots would meet them) by appending; a dropped slot stays listed and is skipped (its unit is None)
until a compaction, after which the map is built again from the units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from xihe.tools.codeindex.fields import MAX_CALLERS
from xihe.tools.codeindex.units import CodeUnit

CALLER_KINDS = frozenset({"function", "method", "class"})  # the units a caller row counts


class CallerMap:
    """Name -> ascending slots of the units of that name, and of the units calling it."""

    def __init__(self) -> None:
        self.named: dict[str, list[int]] = {}
        self.calling: dict[str, list[int]] = {}

    @classmethod
    def of(cls, units: Sequence[CodeUnit | None]) -> CallerMap:
        """The map of every live slot of `units`."""
        out = cls()
        out.add(0, units)
        return out

    def add(self, base: int, units: Iterable[CodeUnit | None]) -> None:
        """List `units`, the slots from `base` on (None: a dead slot, not listed)."""
        named, calling = self.named, self.calling
        for slot, u in enumerate(units, base):
            if u is None:
                continue
            named.setdefault(u.name, []).append(slot)
            if u.kind in CALLER_KINDS:
                for c in u.calls:
                    calling.setdefault(c, []).append(slot)

    def callers(
        self, units: Sequence[CodeUnit | None], new: Sequence[CodeUnit], wanted: Iterable[str]
    ) -> dict[str, list[str]]:
        """What a scan of the live `units` followed by `new` (not yet in a slot) gives for
        the `wanted` names: the same qualified names in the same order."""
        out: dict[str, dict[str, None]] = {}
        for name in wanted:
            names: dict[str, None] = {}
            for s in self.calling.get(name, ()):
                u = units[s]
                if u is not None:
                    names[u.qualname] = None
                    if len(names) >= MAX_CALLERS:
                        break
            if names:
                out[name] = names
        want = set(wanted) if not isinstance(wanted, set | frozenset | dict) else wanted
        for u in new:
            if u.kind in CALLER_KINDS:
                for c in u.calls:
                    if c in want:
                        names = out.setdefault(c, {})
                        if len(names) < MAX_CALLERS:
                            names[u.qualname] = None
        return {k: list(v) for k, v in out.items()}

    def slots_named(self, units: Sequence[CodeUnit | None], names: Iterable[str]) -> list[int]:
        """The live slots whose unit has one of `names`, ascending."""
        return sorted(s for n in names for s in self.named.get(n, ()) if units[s] is not None)

    def crowded(self, units: Sequence[CodeUnit | None], name: str, extra: int) -> bool:
        """Whether `name` may have `MAX_CALLERS` callers or more: its live calling slots and `extra`."""
        n = extra
        for s in self.calling.get(name, ()):
            if n >= MAX_CALLERS:
                break
            n += units[s] is not None
        return n >= MAX_CALLERS

    def kept_before(
        self, units: Sequence[CodeUnit | None], name: str, dropped: Mapping[int, str]
    ) -> set[str]:
        """The qualified names `callers` gave `name` before this update dropped the slots of `dropped`
        (slot -> its unit's qualified name): the live and the dropped callers, in slot order."""
        names: dict[str, None] = {}
        for s in self.calling.get(name, ()):
            u = units[s]
            q = u.qualname if u is not None else dropped.get(s)
            if q is not None:
                names[q] = None
                if len(names) >= MAX_CALLERS:
                    break
        return set(names)
