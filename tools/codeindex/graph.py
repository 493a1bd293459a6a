"""The symbol graph: which definition a name in the code means, and the callers, callees and call
chains that follow.

Definitions are the index's units (functions, methods, classes) under their qualified names. Each
file's facts (refs.py) say which names it uses and how they were reached; a name is resolved when
asked, through the file's imports (re-exports and `import *` followed), `self.`/`this.` and `super()`
with the class hierarchy, names a function binds (a local hides a global; `x = Session()` and
`x: Session` type it; a call's return annotation types its result), and same-module names.

Every edge says how sure it is:
- `resolved`: the language's rules name this definition;
- `dynamic`: an override in a subclass of the class the name resolved in; which one runs is decided
  at run time (dynamic dispatch);
- `name`: nothing resolved the receiver (a parameter without a type, a value from a dict, reflection),
  so every method of that name is a candidate, with confidence 1/candidates.

Resolution happens per query and is cached, so an index update only replaces the changed files'
facts (graphstore.py) and nothing is recomputed for the rest.
"""

from __future__ import annotations

import builtins
import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xihe.tools.codeindex.filefacts import FileFacts, Ref
from xihe.tools.codeindex.inherit import _split_top, bases_of
from xihe.tools.codeindex.jsimports import EXTERNAL, JS_LANGS
from xihe.tools.codeindex.jsimports import candidates as js_candidates
from xihe.tools.codeindex.units import CodeUnit

RESOLVED, DYNAMIC, NAME = "resolved", "dynamic", "name"
COST = {RESOLVED: 1.0, DYNAMIC: 1.5, NAME: 3.0}  # a chain prefers resolved hops
MAX_NAME_CANDIDATES = 4  # more methods of one name than this: too uncertain to link by name
MAX_HOPS = 8
MAX_VISITS = 20000
_BUILTINS = frozenset(dir(builtins))
_ANNOTATION_NOISE = frozenset({"None", "Optional", "Union", "typing", "t", "Any", "Self"})
_PY_CLASS = re.compile(r"\bclass\s+\w+\s*\((.*)\)", re.S)

Key = tuple[str, str]  # (path, qualname)


@dataclass(frozen=True)
class Def:
    """A definition: a function, method or class unit."""

    path: str
    qualname: str
    kind: str
    start: int
    end: int
    lang: str
    name: str

    @property
    def key(self) -> Key:
        return (self.path, self.qualname)


@dataclass(frozen=True)
class Use:
    """A use of a definition: where it is, the definition around it, how sure the link is."""

    path: str
    line: int
    scope: str  # qualified name of the unit around the use ('' at module level)
    called: bool
    certainty: str
    confidence: float
    name: str = ""  # the name as written there (an import alias may differ from the definition's)


@dataclass(frozen=True)
class Hop:
    """One step of a chain: the call's line in the caller and how sure it is."""

    line: int
    certainty: str

    @property
    def certain(self) -> bool:
        return self.certainty == RESOLVED


@dataclass(frozen=True)
class Chain:
    """A call chain: `nodes[i]` calls `nodes[i+1]` at `hops[i]`."""

    nodes: list[Def]
    hops: list[Hop]


# a resolved expression: a module (by path), a definition, or an instance of a class definition
Value = tuple[str, str | Key]


class SymbolGraph:
    """Definitions from units, uses from each file's facts; resolution on demand, cached."""

    def __init__(self, units: Iterable[CodeUnit], facts: Mapping[str, FileFacts]) -> None:
        self.facts = facts
        self.defs: dict[Key, Def] = {}
        self.signatures: dict[Key, str] = {}
        self.by_name: dict[str, list[Key]] = {}
        for u in units:
            if u.kind not in {"function", "method", "class"}:
                continue
            d = Def(u.path, u.qualname, u.kind, u.start, u.end, u.lang, u.name)
            old = self.defs.get(d.key)
            if old is None:
                self.by_name.setdefault(u.name, []).append(d.key)
            elif old.end - old.start >= d.end - d.start:
                continue  # `@overload` stubs and the implementation: the longest is the definition
            self.defs[d.key] = d
            self.signatures[d.key] = u.signature
        self.modules: dict[str, str] = {}
        self.suffixes: dict[str, list[str]] = {}
        for path, f in facts.items():
            if f.lang == "python":
                self.modules[f.module] = path
                parts = f.module.split(".")
                for i in range(1, len(parts)):
                    self.suffixes.setdefault(".".join(parts[i:]), []).append(f.module)
        self._bases: dict[Key, list[Key]] = {}
        self._subclasses: dict[Key, list[Key]] | None = None
        self._resolved: dict[tuple[str, int], list[tuple[Key, str, float]]] = {}
        self._by_ref_name: dict[str, list[tuple[str, int]]] | None = None
        self._by_scope: dict[Key, list[int]] | None = None

    # ---- names and modules ---------------------------------------------------------------------
    def module_path(self, dotted: str) -> str | None:
        """The file of a Python module by its dotted name, a unique dotted suffix of it (`src/pkg/m.py`
        imported as `pkg.m`), or the name less leading packages the checkout lays out elsewhere
        (`xihe.agent.deps` installed from `agent/deps.py`; at least two names are left)."""
        parts = dotted.split(".")
        for i in range(0, max(1, len(parts) - 1)):
            name = ".".join(parts[i:])
            if name in self.modules:
                return self.modules[name]
            found = self.suffixes.get(name, [])
            if len(found) == 1:
                return self.modules[found[0]]
        return None

    def resolve_dotted(self, dotted: str, depth: int = 0) -> Value | None:
        """`requests.sessions.Session.send` -> that method (the longest module prefix, then members)."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            path = self.module_path(".".join(parts[:i]))
            if path is not None:
                value: Value | None = ("module", path)
                for name in parts[i:]:
                    value = self.member(value, name, depth + 1) if value is not None else None
                return value
        return None

    def js_import(self, target: str, local: str, depth: int = 0) -> Value | None:
        """What a JS/TS import (`module#member`, jsimports.py) bound to `local` means: a definition, a
        module, or None (a package from outside the repository, a file not indexed)."""
        module, _, member = target.rpartition("#")
        if module.startswith(EXTERNAL) or depth > 12:
            return None
        path = next((p for p in js_candidates(module) if p in self.facts), None)
        if path is None:
            return None
        whole = member in {"*", "default"}
        name = local if whole else member
        if (path, name) in self.defs:
            return ("def", (path, name))
        if whole:
            return ("module", path)
        return self.member(("module", path), name, depth + 1)  # re-exported from another file

    def member(self, value: Value, name: str, depth: int = 0) -> Value | None:
        """`name` looked up in a module, a class or an instance."""
        if depth > 12:
            return None
        kind, what = value
        if kind == "module":
            assert isinstance(what, str)
            path = what
            if (path, name) in self.defs:
                return ("def", (path, name))
            f = self.facts.get(path)
            if f is not None:
                if name in f.imports and f.lang in JS_LANGS:
                    return self.js_import(f.imports[name], name, depth + 1)
                if name in f.imports:
                    return self.resolve_dotted(f.imports[name], depth + 1)
                sub = self.modules.get(f"{f.module}.{name}")
                if sub is not None:
                    return ("module", sub)
                for star in f.stars:
                    mod = self.module_path(star)
                    if mod is not None and mod != path:
                        found = self.member(("module", mod), name, depth + 1)
                        if found is not None:
                            return found
            return None
        assert isinstance(what, tuple)
        d = self.defs.get(what)
        if d is None or d.kind != "class":
            return None
        found_key = self.lookup(what, name)
        if found_key is not None:
            return ("def", found_key)
        attr = self._attribute_type(what, name)
        return ("instance", attr) if attr is not None else None

    def enclosing_class(self, path: str, scope: str) -> Key | None:
        """The class whose method (or body) `scope` is in."""
        parts = scope.split(".") if scope else []
        for i in range(len(parts), 0, -1):
            d = self.defs.get((path, ".".join(parts[:i])))
            if d is not None and d.kind == "class":
                return d.key
        return None

    # ---- classes -------------------------------------------------------------------------------
    def bases(self, cls: Key) -> list[Key]:
        """The class definitions `cls` extends, resolved in its file (imports first, then by name)."""
        if cls in self._bases:
            return self._bases[cls]
        self._bases[cls] = []  # a cycle ends here
        d = self.defs[cls]
        sig = self.signatures.get(cls, "")
        if d.lang == "python":
            m = _PY_CLASS.search(sig)
            names = [p for p in _split_top(m.group(1)) if "=" not in p] if m else []
        else:
            names = list(bases_of(CodeUnit(d.path, d.start, d.end, d.kind, d.name, d.qualname, d.lang, sig)))
        out: list[Key] = []
        parent = d.qualname.rpartition(".")[0]
        for name in names:
            name = name.split("[", 1)[0].split("<", 1)[0].strip()
            if not name or name == "object":
                continue
            value = self.evaluate(d.path, parent, name) if d.lang == "python" else None
            key = value[1] if value is not None and value[0] == "def" else None
            if key is None:
                key = self._class_by_name(name.rsplit(".", 1)[-1], d)
            if isinstance(key, tuple) and key != cls and self.defs[key].kind == "class":
                out.append(key)
        self._bases[cls] = out
        return out

    def _class_by_name(self, simple: str, near: Def) -> Key | None:
        """A class by simple name: in the same file, else imported (Java), else the only one."""
        cands = [k for k in self.by_name.get(simple, []) if self.defs[k].kind == "class"]
        same = [k for k in cands if k[0] == near.path]
        if same:
            return same[0]
        f = self.facts.get(near.path)
        target = f.imports.get(simple) if f is not None else None
        if target:
            want = target.replace(".", "/")
            hit = [k for k in cands if k[0].rsplit(".", 1)[0].endswith(want)]
            if hit:
                return hit[0]
        return cands[0] if len(cands) == 1 else None

    def mro(self, cls: Key) -> list[Key]:
        """`cls` and its supertypes, nearest first (breadth-first, each once)."""
        out, seen, level = [], {cls}, [cls]
        while level:
            out.extend(level)
            nxt = []
            for c in level:
                for b in self.bases(c):
                    if b not in seen:
                        seen.add(b)
                        nxt.append(b)
            level = nxt
        return out

    def subclasses(self, cls: Key) -> list[Key]:
        """Every class that extends `cls`, directly or not."""
        if self._subclasses is None:
            table: dict[Key, list[Key]] = {}
            for key, d in self.defs.items():
                if d.kind == "class":
                    for b in self.bases(key):
                        table.setdefault(b, []).append(key)
            self._subclasses = table
        out: list[Key] = []
        todo = list(self._subclasses.get(cls, []))
        while todo:
            c = todo.pop()
            if c not in out and c != cls:
                out.append(c)
                todo.extend(self._subclasses.get(c, []))
        return out

    def lookup(self, cls: Key, name: str) -> Key | None:
        """The method (or nested class) `name` of `cls`, searched up its supertypes."""
        for c in self.mro(cls):
            key = (c[0], f"{c[1]}.{name}")
            if key in self.defs:
                return key
        return None

    def _attribute_type(self, cls: Key, attr: str) -> Key | None:
        """The class of `self.attr`, from an assignment or annotation in the class or its bases."""
        for c in self.mro(cls):
            f = self.facts.get(c[0])
            t = f.types.get(c[1], {}).get(f"self.{attr}") if f is not None else None
            if t:
                return self.type_of(c[0], c[1], t)
        return None

    # ---- expressions ---------------------------------------------------------------------------
    def type_of(self, path: str, scope: str, t: str, depth: int = 0) -> Key | None:
        """The class of a recorded type: `()f` what calling f returns, `:T` an annotation (of
        several, newline-separated, the first that names a class of the repository)."""
        if depth > 6:
            return None
        if "\n" in t:
            for one in t.split("\n"):
                found = self.type_of(path, scope, one, depth + 1)
                if found is not None:
                    return found
            return None
        if t.startswith("="):
            value = self.evaluate(path, scope, t[1:], depth + 1)
            value = self._property(value, depth) if value is not None else None
            return value[1] if value is not None and value[0] == "instance" else None  # type: ignore[return-value]
        if t.startswith("()"):
            value = self.evaluate(path, scope, t[2:], depth + 1)
            if value is None or value[0] != "def":
                return None
            assert isinstance(value[1], tuple)
            d = self.defs[value[1]]
            if d.kind == "class":
                return d.key
            f = self.facts.get(d.path)
            ret = f.returns.get(d.qualname) if f is not None else None
            if not ret:
                return None
            return self.type_of(d.path, d.qualname.rpartition(".")[0], ":" + ret, depth + 1)
        name = _annotation_name(t[1:])
        if not name:
            return None
        value = self.evaluate(path, scope, name, depth + 1)
        if value is not None and value[0] == "def":
            assert isinstance(value[1], tuple)
            if self.defs[value[1]].kind == "class":
                return value[1]
        return None

    def evaluate(self, path: str, scope: str, dotted: str, depth: int = 0) -> Value | None:
        """What the dotted expression `dotted` means in `scope` of `path` (None when not known)."""
        if depth > 12:
            return None
        head, *rest = dotted.split(".")
        value = self._head(path, scope, head, depth)
        for name in rest:
            if value is None:
                return None
            value = self.member(self._property(value, depth), name, depth + 1)
        return value

    def _property(self, value: Value, depth: int) -> Value:
        """A method read as an attribute (`session.deps.x`, a property): an instance of its return
        annotation's class; anything else as it is."""
        if value[0] != "def":
            return value
        assert isinstance(value[1], tuple)
        d = self.defs[value[1]]
        if d.kind != "method":
            return value
        f = self.facts.get(d.path)
        ret = f.returns.get(d.qualname) if f is not None else None
        cls = self.type_of(d.path, d.qualname.rpartition(".")[0], ":" + ret, depth + 1) if ret else None
        return ("instance", cls) if cls is not None else value

    def _head(self, path: str, scope: str, head: str, depth: int) -> Value | None:
        f = self.facts.get(path)
        if head in {"self", "cls"}:
            cls = self.enclosing_class(path, scope)
            return ("instance", cls) if cls is not None else None
        if head == "super":
            return None  # handled by the caller with the enclosing class's bases
        parts = scope.split(".") if scope else []
        for i in range(len(parts), 0, -1):  # enclosing function scopes, innermost first
            s = ".".join(parts[:i])
            d = self.defs.get((path, s))
            if d is not None and d.kind == "class" and i != len(parts):
                continue  # a method does not see its class body's names
            nested = (path, f"{s}.{head}")
            if nested in self.defs:
                return ("def", nested)
            if f is not None:
                t = f.types.get(s, {}).get(head)
                if t and d is not None and d.kind != "class":
                    cls = self.type_of(path, s, t, depth + 1)
                    return ("instance", cls) if cls is not None else None
                if head in f.locals.get(s, ()):
                    return None  # a local without a known type hides the module's name
        if (path, head) in self.defs:
            return ("def", (path, head))
        if f is None:
            return None
        if head in f.imports and f.lang == "python":
            return self.resolve_dotted(f.imports[head], depth + 1)
        if head in f.imports and f.lang in JS_LANGS:
            return self.js_import(f.imports[head], head, depth + 1)
        for star in f.stars:
            mod = self.module_path(star)
            if mod is not None and mod != path:
                found = self.member(("module", mod), head, depth + 1)
                if found is not None:
                    return found
        if f.lang == "python":
            return None
        cls = self.enclosing_class(path, scope)  # Java/JS: a bare call is a method of the class
        if cls is not None:
            key = self.lookup(cls, head)
            if key is not None:
                return ("def", key)
        key = self._class_by_name(head, self.defs[cls]) if cls is not None else None
        return ("def", key) if key is not None else None

    # ---- references ----------------------------------------------------------------------------
    def resolve(self, path: str, i: int) -> list[tuple[Key, str, float]]:
        """The definitions ref `i` of `path` may mean: (key, certainty, confidence)."""
        cached = self._resolved.get((path, i))
        if cached is not None:
            return cached
        scope, _line, name, recv, _called = self.facts[path].refs[i]
        out = self._resolve(path, scope, name, recv)
        self._resolved[(path, i)] = out
        return out

    def _resolve(self, path: str, scope: str, name: str, recv: str) -> list[tuple[Key, str, float]]:
        lang = self.facts[path].lang
        if recv == "":
            value = self._head(path, scope, name, 0)
            if value is not None and value[0] == "def":
                assert isinstance(value[1], tuple)
                return [(value[1], RESOLVED, 1.0)]
            if lang == "python" or name in _BUILTINS:
                return []
            return self._by_name(name, functions=True)
        if recv == ".super":
            cls = self.enclosing_class(path, scope)
            if cls is None:
                return []
            for b in self.bases(cls):
                key = self.lookup(b, name)
                if key is not None:
                    return [(key, RESOLVED, 1.0)]
            return []
        obj: Value | None = None
        if recv.startswith("."):
            obj = self.evaluate(path, scope, recv[1:])
            if obj is None and self._external(path, scope, recv[1:]):
                return []  # a module or name from outside the repository: not a definition here
        elif recv.startswith("()"):
            cls = self.type_of(path, scope, recv)
            obj = ("instance", cls) if cls is not None else None
        elif recv == "!":
            return []  # a method of a literal (str, list, dict...)
        if obj is None:
            if name.startswith("__") or (recv.startswith(".") and self._builtin_local(path, scope, recv[1:])):
                return []
            return self._by_name(name, functions=False)
        if obj[0] == "instance":
            assert isinstance(obj[1], tuple)
            return self._dispatch(obj[1], name)
        found = self.member(obj, name)
        if found is not None and found[0] == "def":
            assert isinstance(found[1], tuple)
            d = self.defs[found[1]]
            if obj[0] == "def" and d.kind == "method":  # Class.method: the class's own, statically
                return [(found[1], RESOLVED, 1.0)]
            return [(found[1], RESOLVED, 1.0)]
        return []

    def _builtin_local(self, path: str, scope: str, dotted: str) -> bool:
        """Whether `dotted` starts with a local typed by a builtin (`**kwargs` is a dict, `x: str`)."""
        head = dotted.split(".", 1)[0]
        f = self.facts[path]
        parts = scope.split(".") if scope else []
        for i in range(len(parts), 0, -1):
            t = f.types.get(".".join(parts[:i]), {}).get(head)
            if t:
                name = _annotation_name(t[1:]) if t.startswith(":") else t.lstrip("(=)")
                return name in _BUILTINS and "\n" not in t
        return False

    def _external(self, path: str, scope: str, dotted: str) -> bool:
        """Whether the head of `dotted` is an import the repository does not hold (or a builtin)."""
        head = dotted.split(".", 1)[0]
        f = self.facts[path]
        if head in f.imports and f.lang in JS_LANGS:
            return f.imports[head].startswith(EXTERNAL)
        if head in f.imports:
            return self.resolve_dotted(f.imports[head]) is None
        return head in _BUILTINS and (path, head) not in self.defs

    def _dispatch(self, cls: Key, name: str) -> list[tuple[Key, str, float]]:
        """`obj.name` on an instance of `cls`: the method it resolves to, and overrides below `cls`."""
        out: list[tuple[Key, str, float]] = []
        static = self.lookup(cls, name)
        if static is not None:
            out.append((static, RESOLVED, 1.0))
        overrides = [
            (c[0], f"{c[1]}.{name}") for c in self.subclasses(cls) if (c[0], f"{c[1]}.{name}") in self.defs
        ]
        out += [(k, DYNAMIC, 1.0 / (len(overrides) + 1)) for k in overrides if k != static]
        return out

    def _by_name(self, name: str, functions: bool) -> list[tuple[Key, str, float]]:
        kinds = {"method", "function", "class"} if functions else {"method"}
        cands = [k for k in self.by_name.get(name, []) if self.defs[k].kind in kinds]
        if not cands or len(cands) > MAX_NAME_CANDIDATES:
            return []
        return [(k, NAME, 1.0 / len(cands)) for k in cands]

    def _ref_index(self) -> dict[str, list[tuple[str, int]]]:
        if self._by_ref_name is None:
            table: dict[str, list[tuple[str, int]]] = {}
            for path, f in self.facts.items():
                for i, r in enumerate(f.refs):
                    table.setdefault(r[2], []).append((path, i))
            self._by_ref_name = table
        return self._by_ref_name

    def _aliases(self, name: str) -> set[str]:
        """Other local names files import `name` under (`from x import name as other`)."""
        out = set()
        for f in self.facts.values():
            for alias, target in f.imports.items():
                if alias != name and target.rsplit(".", 1)[-1].rsplit("#", 1)[-1] == name:
                    out.add(alias)
        return out

    # ---- queries -------------------------------------------------------------------------------
    def definitions(self, symbol: str) -> list[Def]:
        """Definitions `symbol` names: `path:Qual.name`, a dotted module path, a qualified name, or
        its tail (`send` -> every `*.send`)."""
        symbol = symbol.strip().replace("::", ".").replace("#", ".").removesuffix("()")
        if ":" in symbol:
            path, _, qual = symbol.partition(":")
            d = self.defs.get((path, qual))
            return [d] if d is not None else []
        exact = [d for d in self.defs.values() if d.qualname == symbol]
        if exact:
            return exact
        value = self.resolve_dotted(symbol) if "." in symbol else None
        if value is not None and value[0] == "def":
            assert isinstance(value[1], tuple)
            return [self.defs[value[1]]]
        tail = "." + symbol
        return [d for d in self.defs.values() if d.qualname.endswith(tail)]

    def uses(self, target: Def, calls_only: bool = False) -> list[Use]:
        """Where `target` is used (called, for `calls_only`), with how sure each link is."""
        index = self._ref_index()
        out: list[Use] = []
        names = {target.name} | self._aliases(target.name)
        for name in names:
            for path, i in index.get(name, []):
                ref: Ref = self.facts[path].refs[i]
                if calls_only and not ref[4]:
                    continue
                for key, certainty, confidence in self.resolve(path, i):
                    if key == target.key:
                        out.append(Use(path, ref[1], ref[0], bool(ref[4]), certainty, confidence, ref[2]))
        out.sort(key=lambda u: (u.certainty != RESOLVED, u.path, u.line))
        return out

    def callers(self, target: Def) -> list[Use]:
        """The calls of `target` (a class: its instantiations)."""
        return self.uses(target, calls_only=True)

    def _scope_refs(self, d: Def) -> list[int]:
        if self._by_scope is None:
            table: dict[Key, list[int]] = {}
            for path, f in self.facts.items():
                for i, r in enumerate(f.refs):
                    if r[4]:
                        table.setdefault((path, r[0]), []).append(i)
            self._by_scope = table
        return self._by_scope.get(d.key, [])

    def callees(self, source: Def) -> list[tuple[Def, Hop, float]]:
        """What `source` calls: (definition, the call's line and certainty, confidence), in order."""
        out: list[tuple[Def, Hop, float]] = []
        seen: set[tuple[Key, str]] = set()
        for i in self._scope_refs(source):
            line = self.facts[source.path].refs[i][1]
            for key, certainty, confidence in self.resolve(source.path, i):
                if (key, certainty) not in seen:
                    seen.add((key, certainty))
                    out.append((self.defs[key], Hop(line, certainty), confidence))
        return out

    def unresolved_calls(self, source: Def) -> list[str]:
        """Names `source` calls that no definition of the repository answers (library code, builtins,
        values of unknown type with no method of that name here)."""
        out: dict[str, None] = {}
        f = self.facts.get(source.path)
        for i in self._scope_refs(source):
            if not self.resolve(source.path, i) and f is not None:
                _, _, name, recv, _ = f.refs[i]
                out.setdefault((recv[1:] + "." if recv.startswith(".") else "") + name, None)
        return list(out)

    def call_chain(self, start: str, goal: str, max_hops: int = MAX_HOPS, limit: int = 3) -> list[Chain]:
        """The cheapest call chains from a definition named `start` to one named `goal` (resolved hops
        cost 1, dynamic dispatch 1.5, by-name guesses 3), at most `max_hops` long, best first."""
        sources, goals = self.definitions(start), {d.key for d in self.definitions(goal)}
        chains: list[tuple[float, Chain]] = []
        for src in sources:
            found = self._cheapest(src, goals, max_hops)
            if found is not None:
                chains.append(found)
        chains.sort(key=lambda c: (c[0], len(c[1].nodes)))
        return [c for _, c in chains[:limit]]

    def _cheapest(self, src: Def, goals: set[Key], max_hops: int) -> tuple[float, Chain] | None:
        best: dict[Key, float] = {src.key: 0.0}
        back: dict[Key, tuple[Key, Hop]] = {}
        heap: list[tuple[float, int, Key]] = [(0.0, 0, src.key)]
        visits = 0
        while heap and visits < MAX_VISITS:
            cost, hops, key = heapq.heappop(heap)
            if cost > best.get(key, float("inf")):
                continue
            if key in goals and key != src.key:
                nodes, steps = [self.defs[key]], []
                while key in back:
                    key, hop = back[key]
                    nodes.append(self.defs[key])
                    steps.append(hop)
                return cost, Chain(nodes[::-1], steps[::-1])
            if hops >= max_hops:
                continue
            visits += 1
            for d, hop, _conf in self.callees(self.defs[key]):
                c = cost + COST[hop.certainty]
                if c < best.get(d.key, float("inf")):
                    best[d.key] = c
                    back[d.key] = (key, hop)
                    heapq.heappush(heap, (c, hops + 1, d.key))
        return None

    def scope_def(self, path: str, scope: str) -> Def | None:
        """The definition a use sits in (None at module level)."""
        return self.defs.get((path, scope)) if scope else None


def _annotation_name(text: str) -> str:
    """The class an annotation names: `Optional["Session"]` -> `Session`, `A | None` -> `A`."""
    text = text.replace('"', " ").replace("'", " ")
    for piece in re.split(r"[\[\],|\s]+", text):
        if piece and piece not in _ANNOTATION_NOISE and not piece.startswith("typing."):
            return piece
    return ""
