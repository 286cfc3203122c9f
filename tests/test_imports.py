"""One import direction: the bnpmix package's import graph has no cycle.

Every module is parsed with `ast` (never imported), and every `import` statement counts, those
inside functions and methods included: a function-level import that closes a cycle only moves the
cycle from import time to call time. Relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

# The package's roots: `bnpmix` itself and the three folders installed under it (pyproject.toml).
ROOTS = ("bnpmix", "bnpmix.algorithms", "bnpmix.storage", "bnpmix.pipeline")


def _module_files() -> dict[str, Path]:
    """Module name -> source file, for every .py file under the package's roots."""
    files: dict[str, Path] = {}
    for root in ROOTS:
        spec = importlib.util.find_spec(root)
        assert spec is not None and spec.submodule_search_locations, root
        base = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([root, *parts])] = path
    return files


def _resolve(name: str, level: int, importer: str, is_package: bool) -> str:
    """The absolute name `from <level dots><name>` means inside `importer`."""
    if level == 0:
        return name
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imported(tree: ast.AST, importer: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules that `tree` imports anywhere (a `from m import x` counts m.x when
    m.x is a module, else m)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", node.level, importer, is_package)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != importer)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (module level and inside functions)."""
    files = _module_files()
    modules = set(files)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = _imported(tree, name, path.name == "__init__.py", modules)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

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
            if len(component) > 1 or v in graph[v]:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of `component` (breadth-first search)."""
    start, inside = component[0], set(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & inside):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def test_graph_sees_function_level_and_relative_imports():
    """The walker must see what the test is about: an import inside a function, resolved from a
    relative name."""
    source = "def f():\n    from ..storage import rundir\n    from . import fit\n"
    modules = {"bnpmix.storage.rundir", "bnpmix.pipeline.fit", "bnpmix.pipeline.cli",
               "bnpmix.storage", "bnpmix.pipeline"}
    got = _imported(ast.parse(source), "bnpmix.pipeline.cli", False, modules)
    assert got == {"bnpmix.storage.rundir", "bnpmix.pipeline.fit"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert shortest_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 50 and "bnpmix.pipeline.cli" in graph
    cycles = [" -> ".join(shortest_cycle(graph, c)) + f"   ({len(c)} modules in the component)"
              for c in strongly_connected(graph)]
    if cycles:
        pytest.fail("import cycles (imports inside functions included):\n" + "\n".join(cycles))
