"""Doc inheritance: a method without a doc comment is searched by the doc of the method it overrides.

The javadoc tool does this: an `@Override` implementation with no comment (or only `{@inheritDoc}`)
shows the comment of the interface or superclass method it implements. The interface declaration
carries the words a question uses; the implementation is what a reader wants to open. So a Java
method with the same name and arity in a supertype, or a Python method with the same name in a base
class, lends its doc to the undocumented override for indexing (BM25 doc text, vectors, multilingual
text). The unit's own `doc` stays as written; the doc it is searched by is `inherited_doc`.

Supertypes are read from a class unit's signature (`class A extends B implements C, D<E>`,
`class A(B, metaclass=M)`) and found by simple name among the repository's class units, a few
levels up. An update re-indexes, with the changed files, every file whose inherited docs change
because of them (`stale_files`), so an edited interface doc reaches its implementations at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from xihe.tools.codeindex.languages import language_of
from xihe.tools.codeindex.units import CodeUnit

LANGS = frozenset({"java", "python"})
DEPTH = 4  # supertype levels searched
# subtracted from the fused score of a unit searched by an inherited doc: the documented declaration
# stays first when a question restates its doc (dev split: 0.1 kept every docstring MRR@10, 0.0 lost
# React Native 0.026; larger values lost hand-written questions whose answer is the implementation)
PENALTY = 0.1
_K = TypeVar("_K", bound=Hashable)
INHERIT_TAG = "{@inheritDoc}"
_JAVA_DECL = re.compile(r"\b(?:class|interface|enum|record)\s+[A-Za-z_$][\w$]*")
_JAVA_CLAUSE = re.compile(r"\b(extends|implements|permits)\b")
_WORD = re.compile(r"[\w$]+")
_OPEN = re.compile(r"([\w$]+)\s*\(")
_NOT_IMPLEMENTED = frozenset({"NotImplementedError", "UnsupportedOperationException"})


def _split_top(text: str) -> list[str]:
    """`text` split at commas outside <>, () and []."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _simple(type_text: str) -> str:
    """`java.util.List<String>` -> `List`; `six.with_metaclass(ABCMeta)` -> `` (not a class name)."""
    t = type_text.split("<", 1)[0].strip()
    if "(" in t or "=" in t or not t:
        return ""
    return t.rsplit(".", 1)[-1].strip()


def _skip_type_params(rest: str) -> str:
    """The text after a leading `<...>` (a generic class's type parameters)."""
    rest = rest.lstrip()
    if not rest.startswith("<"):
        return rest
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0:
            return rest[i + 1 :]
    return ""


def bases_of(cls: CodeUnit) -> tuple[str, ...]:
    """Simple names of the supertypes a class unit's signature names (Java and Python)."""
    sig = cls.signature
    if cls.lang == "python":
        m = re.search(r"\bclass\s+\w+\s*\((.*)\)", sig, re.S)
        names = [_simple(p) for p in _split_top(m.group(1))] if m else []
        return tuple(n for n in names if n and n != "object")
    m = _JAVA_DECL.search(sig)
    if m is None:
        return ()
    rest = _skip_type_params(sig[m.end() :])
    if rest.lstrip().startswith("("):  # a record's components
        rest = rest[rest.find(")") + 1 :]
    out: list[str] = []
    pieces = _JAVA_CLAUSE.split(rest)
    for keyword, clause in zip(pieces[1::2], pieces[2::2], strict=False):
        if keyword != "permits":
            out.extend(n for n in (_simple(p) for p in _split_top(clause)) if n)
    return tuple(out)


def arity(method: CodeUnit) -> int | None:
    """A Java method's parameter count from its signature; None when it cannot be read."""
    m = next((c for c in _OPEN.finditer(method.signature) if c.group(1) == method.name), None)
    if m is None:
        return None
    depth, start = 1, m.end()
    for i in range(start, len(method.signature)):
        ch = method.signature[i]
        depth += ch in "(<["
        depth -= ch in ")>]"
        if depth == 0:
            return len(_split_top(method.signature[start:i]))
    return None  # the signature was cut before its parameters closed


def declaration_only(m: CodeUnit) -> bool:
    """Whether a method is only declared: no body, or one that just raises "not implemented".

    Such a method (a Java interface or abstract method, a Python base class's `raise
    NotImplementedError`) has the doc but no code, so its overrides are the answers. A documented
    method with code is an answer itself: its overrides (often `super()` and a tweak) do not take
    its doc, or they would crowd it out (measured on the dev split: APScheduler's schedulers).
    """
    declared = set(_WORD.findall(m.signature)) | _NOT_IMPLEMENTED
    return set(m.identifiers) <= declared and set(m.calls) <= _NOT_IMPLEMENTED


def own_doc(u: CodeUnit) -> str:
    """The unit's own doc, empty when it is only `{@inheritDoc}`."""
    return "" if u.doc.replace(INHERIT_TAG, "").strip() == "" else u.doc


def wants_doc(u: CodeUnit) -> bool:
    """Whether a unit could inherit: an undocumented (or `{@inheritDoc}`) method of a Java/Python class."""
    if u.kind != "method" or u.lang not in LANGS or u.name.startswith("__"):
        return False
    if "." not in u.qualname or u.qualname.rsplit(".", 2)[-2] == u.name:  # a Java constructor
        return False
    return not u.doc.strip() or INHERIT_TAG in u.doc


class Supertypes:
    """Class and method units by name, to find the method an undocumented one overrides. An index
    keeps one across updates (`add` a re-indexed file's units, `drop` its old ones): the same table,
    in the same order, as one made from every live unit, without reading them all on each update."""

    def __init__(self, units: Iterable[CodeUnit] = ()) -> None:
        self.classes: dict[str, list[CodeUnit]] = {}
        self.by_qual: dict[tuple[str, str], CodeUnit] = {}
        self.methods: dict[tuple[str, str], list[CodeUnit]] = {}  # (path, Class.method) -> overloads
        self._bases: dict[tuple[str, str], tuple[str, ...]] = {}
        self.add(units)

    def add(self, units: Iterable[CodeUnit]) -> None:
        """Put `units` in, after those already there (the order supertypes are tried in)."""
        for u in units:
            if u.lang not in LANGS:
                continue
            if u.kind == "class":
                self.classes.setdefault(u.name, []).append(u)
                self.by_qual[(u.path, u.qualname)] = u
            elif u.kind == "method":
                self.methods.setdefault((u.path, u.qualname), []).append(u)

    def drop(self, units: Iterable[CodeUnit]) -> None:
        """Take out `units` (every unit of a file, as `add` put them in)."""
        for u in units:
            if u.lang not in LANGS:
                continue
            if u.kind == "class":
                _remove(self.classes, u.name, u)
                if self.by_qual.get((u.path, u.qualname)) is u:
                    del self.by_qual[(u.path, u.qualname)]
            elif u.kind == "method":
                _remove(self.methods, (u.path, u.qualname), u)

    def bases(self, cls: CodeUnit) -> tuple[str, ...]:
        """`bases_of(cls)`, read once per class and resolution (`resolve`)."""
        key = (cls.path, cls.qualname)
        if key not in self._bases:
            self._bases[key] = bases_of(cls)
        return self._bases[key]

    def forget_bases(self) -> None:
        """Read the classes' bases again on the next resolution, as a table made for it would."""
        self._bases = {}

    def _matches(self, method: CodeUnit, candidates: Sequence[CodeUnit]) -> str:
        """The doc of the first declaration-only candidate with `method`'s arity (Java), or ''."""
        n = arity(method) if method.lang == "java" and candidates else None
        for m in candidates:
            if own_doc(m) and declaration_only(m) and (n is None or arity(m) in {n, None}):
                return own_doc(m)
        return ""

    def overridden_doc(self, method: CodeUnit) -> str:
        """The doc of the nearest documented declaration `method` overrides or implements, or ''."""
        owner = self.by_qual.get((method.path, method.qualname.rsplit(".", 1)[0]))
        if owner is None:
            return ""
        seen = {(owner.path, owner.qualname)}
        level = [owner]
        for _ in range(DEPTH):
            nxt: list[CodeUnit] = []
            for cls in level:
                for base in self.bases(cls):
                    for sup in self.classes.get(base, ()):
                        key = (sup.path, sup.qualname)
                        if key in seen or sup.lang != method.lang:
                            continue
                        seen.add(key)
                        doc = self._matches(
                            method, self.methods.get((sup.path, f"{sup.qualname}.{method.name}"), [])
                        )
                        if doc:
                            return doc
                        nxt.append(sup)
            level = nxt
            if not level:
                break
        return ""

    def inherited(self, u: CodeUnit) -> str:
        """What `u` is searched by instead of its own doc, or '' when it inherits nothing."""
        if not wants_doc(u):
            return ""
        doc = self.overridden_doc(u)
        if not doc:
            return ""
        return u.doc.replace(INHERIT_TAG, doc) if INHERIT_TAG in u.doc else doc


def resolve(units: Sequence[CodeUnit], supertypes: Callable[[], Supertypes]) -> list[CodeUnit]:
    """`units` with `inherited_doc` set from supertypes among `units` and the rest of the index (the
    table `supertypes()` gives, asked for only when a unit may inherit, and left as it was)."""
    if not any(wants_doc(u) for u in units):
        return list(units)
    table = supertypes()
    table.forget_bases()
    table.add(units)
    try:
        out = []
        for u in units:
            doc = table.inherited(u) if wants_doc(u) else u.inherited_doc
            out.append(
                u if doc == u.inherited_doc else replace(u, inherited_doc=doc)
            )  # most stay as they are
        return out
    finally:
        table.drop(units)


def _remove(table: dict[_K, list[CodeUnit]], key: _K, unit: CodeUnit) -> None:
    """`unit` out of `table[key]` (the key gone with its last unit)."""
    same = table.get(key)
    if same is not None:
        kept = [u for u in same if u is not unit]
        if kept:
            table[key] = kept
        else:
            del table[key]


def stale_files(live: Sequence[CodeUnit], new: Sequence[CodeUnit], changed: set[str]) -> set[str]:
    """Files outside `changed` holding a unit whose inherited doc differs once `new` replaces `changed`."""
    if not any(language_of(p) in LANGS for p in changed):
        return set()
    table = Supertypes([*live, *new])
    return {
        u.path
        for u in live
        if u.path not in changed and wants_doc(u) and table.inherited(u) != u.inherited_doc
    }


def shape(units: Iterable[CodeUnit]) -> list[tuple[str, str, str, str, bool]]:
    """What of a file's units other files' inherited docs are read from (`Supertypes`): its classes'
    names and signatures (bases), its methods' names, signatures, own docs and whether each only
    declares. An update whose files keep their shape changes no other file's inherited doc."""
    return sorted(
        (u.kind, u.qualname, u.signature, own_doc(u), u.kind == "method" and declaration_only(u))
        for u in units
        if u.lang in LANGS and u.kind in {"class", "method"}
    )


def searched(u: CodeUnit) -> CodeUnit:
    """The unit as search sees it: its inherited doc in place of its own, when it has one."""
    return replace(u, doc=u.inherited_doc) if u.inherited_doc else u
