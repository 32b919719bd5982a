"""The package's import structure (issue 32): no import circle anywhere in ``preflab`` (an
import inside a function counts: it only hides the circle), no server route module importing
another route module, and no page importing a route (pages call the services)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "preflab"
#: The routes' shared helpers (no routes in it): the one route module others may import.
ROUTE_HELPERS = {"preflab.server.routes.common", "preflab.server.routes.models"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports, at any depth of its
    code (inside functions and ``if TYPE_CHECKING`` blocks too). ``from a import b`` is an
    import of ``a.b`` when that is a module, else of ``a``."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path, node)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a non-module name
                    target = target.rpartition(".")[0]
                if target.startswith(PACKAGE) and target != module:
                    graph[module].add(target)
    return graph


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` that re-exports its submodules is not a circle with them:
    a submodule importing a sibling through the package is an import of the package, which
    Python runs first. Edges from a package to its own submodules are left out."""
    return {m: {t for t in targets if not t.startswith(m + ".")} for m, targets in graph.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_circle():
    cycles = import_cycles(_without_package_inits(import_graph()))
    assert cycles == [], (
        "import circles (break them; an import inside a function is one too):\n"
        + "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_no_route_imports_another_route_and_no_page_imports_a_route():
    routes = "preflab.server.routes."
    bad = []
    for module, targets in import_graph().items():
        for target in targets:
            into_routes = target.startswith(routes) and target not in ROUTE_HELPERS
            if module.startswith(routes) and into_routes:
                bad.append(f"{module} -> {target}")
            if module.startswith("preflab.server.pages") and (
                target.startswith(routes) or target == routes[:-1]
            ):
                bad.append(f"{module} -> {target}")
    assert bad == [], "routes call services, not each other; pages call services:\n" + "\n".join(
        bad
    )


def test_the_cycle_finder_finds_a_circle_through_a_function_local_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_lazy_commands_close_no_circle():
    """``preflab.cli`` imports the packages' command modules by name when they run
    (``LAZY_COMMANDS``, issue 27): an import the walk above cannot see, counted here."""
    from preflab.cli import LAZY_COMMANDS

    graph = import_graph()
    modules = {entry.module for entry in LAZY_COMMANDS}
    assert modules <= set(graph), modules - set(graph)
    graph["preflab.cli"] |= modules
    assert import_cycles(_without_package_inits(graph)) == []
