"""The floor plan: imports point down the layers, features do not reach into each other, no cycles.

Layers, bottom to top (agent/README.md "Layout"):
  0 spine     xihe.agent.<module> (the flat modules) and xihe.config's loading and core models
  1 config    xihe.config.<section>: one pydantic model (+ YAML) per feature
  2 outside   xihe.integrations.<system>: clients of outside systems and their loopback fakes
  3 tools     xihe.tools.<feature>: what the model can call, and the services behind it
  4 features  xihe.agent.<feature>: plugging a feature in (jobs, commands, hooks, routes)
  5 root      xihe.agent.app: the one place that knows every feature (DECLARED), and
              xihe.agent.web: serve and the web pages, which run on the app they are given
  6 entries   xihe.agent.cli, xihe.agent.demo: commands that build the app and run it

A module may import its own layer or lower ones. Within layers 1-4 a feature's folders may import
only the spine, their own feature, and the features listed in ALLOWED.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("agent", "tools", "integrations", "config")

SPINE_CONFIG = {"load", "settings", "yamlmodel", "core", "access", "workflows", "semantic"}
ENTRIES = {"cli", "demo"}
# a feature's name in each folder (the same feature may be spelled differently per layer)
FEATURE_NAMES = {
    "dolphinscheduler": "dolphin",
    "codeindex": "code",
    "send_wecom_alert": "alerts",
    "mailer": "alerts",
    "ui": "web",
}
# generic loopback fakes (LLM, SMTP) serve every feature's tests and the demo
SHARED = {"integrations.fakes"}
ALLOWED = {
    ("alerts", "dolphin"),  # alert decisions read DolphinScheduler's state names (its states module)
    ("alerts", "wecom"),  # the WeCom robot is one alert notifier
    ("alerts", "oncall"),  # who may /ack, whom lifecycle.fallback may name: rotation members (oncall.yaml)
    ("dolphin", "alerts"),  # DolphinScheduler's events (watcher, webhook, scan) go into the alert pipeline
    ("mcp", "web"),  # the MCP server's bearer tokens are the web login's tokens (ui.yaml users)
}


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "xihe." + ".".join(parts)


def product_modules() -> dict[str, Path]:
    out = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            out[module_name(path)] = path
    return out


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every product module `name` imports, anywhere in the file (also inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t:
                found.add(t)
    return found - {name}


def layer(name: str) -> tuple[int, str | None]:
    """(layer number, feature or None) of a product module."""
    parts = name.split(".")[1:]
    folder, rest = parts[0], parts[1:]
    head = rest[0] if rest else ""
    feature = FEATURE_NAMES.get(head, head) or None
    if folder == "config":
        return (0, None) if head in SPINE_CONFIG or not head else (1, feature)
    if folder == "integrations":
        return 2, None if f"integrations.{head}" in SHARED or not head else feature
    if folder == "tools":
        return 3, feature if len(rest) > 1 or head in FEATURE_NAMES else None
    if head in ENTRIES:
        return 6, None
    if head in ("app", "web"):
        return 5, None
    if len(rest) > 1:  # a package under agent/
        return 4, feature
    return 0, None


def graph() -> dict[str, set[str]]:
    mods = product_modules()
    known = set(mods)
    return {name: imports_of(path, name, known) for name, path in mods.items()}


def violations(g: dict[str, set[str]] | None = None) -> list[str]:
    out = []
    for src, targets in sorted((graph() if g is None else g).items()):
        s_layer, s_feat = layer(src)
        for dst in sorted(targets):
            d_layer, d_feat = layer(dst)
            if d_layer > s_layer:
                out.append(f"{src} (layer {s_layer}) imports {dst} (layer {d_layer}): upward")
            elif (
                1 <= s_layer <= 4
                and s_feat
                and d_feat
                and s_feat != d_feat
                and (s_feat, d_feat) not in ALLOWED
            ):
                out.append(f"{src} (feature {s_feat}) imports {dst} (feature {d_feat}): not in ALLOWED")
    return out


def cycles(g: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    g = graph() if g is None else g
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_imports_point_down_and_features_stay_in_their_folders():
    assert violations() == []


def test_no_import_cycles():
    assert cycles() == []


def test_nothing_imports_the_folders_by_their_bare_names():
    """`import agent.x` happens to work from the repository root but not once installed: only `xihe.*`."""
    bare = []
    for path in [*(p for f in FOLDERS for p in (REPO / f).rglob("*.py")), *(REPO / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            bare += [
                f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in FOLDERS
            ]
    assert bare == []


def test_every_package_folder_is_installed():
    """Code folders (with __init__.py) and data folders (named in package-data) are listed, nothing else.

    Data folders are listed too: setuptools warns about, and will one day drop, an importable folder
    that is not in `packages`.
    """
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    data = set(setuptools["package-data"]) - {"xihe.config"}
    on_disk = {module_name(p) for f in FOLDERS for p in (REPO / f).rglob("__init__.py")}
    assert on_disk == listed - data
    for name in data:
        folder = REPO / "/".join(name.split(".")[1:])
        assert folder.is_dir() and not (folder / "__init__.py").exists(), name


def test_the_rule_catches_an_upward_import_and_a_cycle(tmp_path):
    """The checker itself: an upward import and a two-module cycle are found."""
    assert layer("xihe.agent.loop") == (0, None)
    assert layer("xihe.tools.dolphin.service") == (3, "dolphin")
    assert layer("xihe.agent.alerts.pipeline") == (4, "alerts")
    assert layer("xihe.integrations.dolphinscheduler.client") == (2, "dolphin")
    assert layer("xihe.agent.web.ui.tasks") == (5, None)
    assert layer("xihe.config.dolphin") == (1, "dolphin")
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("import x.b\n")
    b.write_text("from x import a\n")
    assert imports_of(a, "x.a", {"x.a", "x.b"}) == {"x.b"}
    assert imports_of(b, "x.b", {"x.a", "x.b"}) == {"x.a"}
    g = {
        "xihe.agent.loop": {"xihe.tools.dolphin.service"},  # the spine reaching up into a feature
        "xihe.tools.shell.tool": {"xihe.tools.dolphin.dates"},  # one feature into another
        "xihe.agent.dolphin.scan": {"xihe.agent.alerts.state"},  # declared in ALLOWED
        "xihe.tools.dolphin.service": set(),
        "xihe.tools.dolphin.dates": set(),
        "xihe.agent.alerts.state": set(),
    }
    assert [v.split(": ")[-1] for v in violations(g)] == ["upward", "not in ALLOWED"]
    assert cycles({"m.a": {"m.b"}, "m.b": {"m.a"}, "m.c": {"m.a"}}) == [["m.a", "m.b"]]


if __name__ == "__main__":  # a report for whoever is fixing the plan
    by: dict[str, list[str]] = defaultdict(list)
    for v in violations():
        by[v.split(" ")[0].rsplit(".", 1)[0]].append(v)
    for k in sorted(by):
        print("\n".join(by[k]))
    for c in cycles():
        print("cycle:", " ".join(c))
