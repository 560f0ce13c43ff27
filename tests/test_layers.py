"""The import graph of ``agentgym``: no cycle, and imports point down the layers of the design.

Every import counts: module-level, inside functions (lazy) and under ``if TYPE_CHECKING:``, because
each is a dependency a reader has to hold in mind and a lazy one only moves the failure to run
time. ``from pkg import name`` is an import of ``pkg.name`` when that is a submodule, else of
``pkg``; a package's ``__init__`` imports are the package's. ``importlib.import_module`` counts
like an import statement: with a literal name, that module; with a computed one (a facade's
``__getattr__``), every agentgym module named by a string in the file. ``agentgym.x.y`` used
through a plain ``import agentgym`` counts as an import of ``agentgym.x.y``.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import agentgym

# Imports point down this list only: a module may import its own layer and the layers before it.
# Packages from the design's table, in its order. The shared modules sit where their own imports
# put them, so that every layer after may use them: ``error`` (re-exports core's errors),
# ``extras``, ``models`` (the tiny default policy) and ``wrappers`` import only ``core``;
# ``agentgym`` itself (``import agentgym`` registers the envs) and ``utils`` (the env checker,
# which looks up registered env metadata) import ``core`` and ``registry``.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agentgym.core", "agentgym.error", "agentgym.extras", "agentgym.models", "agentgym.wrappers"),
    ("agentgym.registry", "agentgym", "agentgym.utils"),
    ("agentgym.sandbox",),
    ("agentgym.envs",),
    ("agentgym.inference",),  # the design's layer 3 with envs and utils, below vector (4)
    ("agentgym.vector",),
    ("agentgym.rollout", "agentgym.gateway"),  # the gateway records episodes as rollout does
    ("agentgym.trainers", "agentgym.multiagent"),  # multi-agent rollouts, policies, sources
    ("agentgym.recipes", "agentgym.integrations", "agentgym.view"),
    ("agentgym.cli", "agentgym.__main__"),
)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    where: str  # "path:line: statement", for the failure message


def find_modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package at ``package_dir``."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _longest_module(dotted: str, modules: Mapping[str, Path]) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _statement_targets(
    node: ast.AST, module: str, is_package: bool, modules: Mapping[str, Path]
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(module, is_package, node)
        for alias in node.names:
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def _dynamic_targets(
    tree: ast.Module, root: str, modules: Mapping[str, Path]
) -> Iterator[tuple[int, str]]:
    """``(line, module)`` loaded through ``import_module``, or used as ``agentgym.x.y`` where
    ``root`` (``agentgym``) is imported as a name."""
    binds_root = False
    computed: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            binds_root |= any(a.asname is None and a.name.split(".")[0] == root for a in node.names)
        elif isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("import_module"):
            argument = node.args[0] if node.args else None
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                yield node.lineno, argument.value
            else:
                computed.append(node.lineno)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if computed and isinstance(node, ast.Constant) and node.value in modules:
            yield node.lineno, node.value
        elif binds_root and isinstance(node, ast.Attribute) and id(node) not in inner:
            dotted = _dotted(node)
            if dotted and dotted.startswith(f"{root}."):
                yield node.lineno, _longest_module(dotted, modules) or root


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> list[Import]:
    """Every import of a module of ``modules`` that the file of ``module`` makes."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines()
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        for target in _statement_targets(node, module, is_package, modules):
            found.append((getattr(node, "lineno", 0), target))
    found += _dynamic_targets(tree, module.split(".")[0], modules)
    root = path.parents[len(module.split(".")) - (0 if is_package else 1)]
    shown = path.relative_to(root)
    return [
        Import(module, target, f"{shown}:{line}: {lines[line - 1].strip()}")
        for line, target in sorted(set(found))
        if target in modules and target != module
    ]


def import_graph(package_dir: Path) -> dict[str, list[Import]]:
    modules = find_modules(package_dir)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: Mapping[str, list[Import]]) -> list[list[Import]]:
    """One shortest cycle through each strongly connected component that has one."""
    cycles = []
    for component in _components(graph):
        start = min(component)
        came: dict[str, Import] = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for edge in graph[node]:
                if edge.target in component and edge.target not in came:
                    came[edge.target] = edge
                    queue.append(edge.target)
            if start in came:
                break
        cycle = [came[start]]
        while cycle[-1].source != start:
            cycle.append(came[cycle[-1].source])
        cycles.append(cycle[::-1])
    return cycles


def _components(graph: Mapping[str, list[Import]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []
    counter = itertools.count()

    def visit(node: str) -> None:
        index[node] = low[node] = next(counter)
        stack.append(node)
        for edge in graph[node]:
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return components


def layer_of(module: str) -> int | None:
    """The layer of the most specific entry naming ``module`` or a package above it."""
    found: tuple[int, int] | None = None  # (entry length, layer)
    for position, layer in enumerate(LAYERS):
        for entry in layer:
            # "agentgym" is the top-level module alone, not every module under it.
            named = module == entry or (entry != "agentgym" and module.startswith(f"{entry}."))
            if named and (found is None or len(entry) > found[0]):
                found = (len(entry), position)
    return None if found is None else found[1]


def _describe(cycle: list[Import]) -> str:
    chain = " -> ".join([cycle[0].source, *(edge.target for edge in cycle)])
    return "\n".join([f"import cycle: {chain}", *(f"    {edge.where}" for edge in cycle)])


@functools.cache
def agentgym_graph() -> dict[str, list[Import]]:
    """The package's import graph, built by the first test that needs it (not at collection)."""
    return import_graph(Path(agentgym.__file__).parent)


def test_the_import_graph_has_no_cycle() -> None:
    cycles = find_cycles(agentgym_graph())
    if cycles:
        pytest.fail("\n".join(map(_describe, cycles)), pytrace=False)


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(module for module in agentgym_graph() if layer_of(module) is None)
    assert not unplaced, f"put these in LAYERS (tests/test_layers.py): {unplaced}"


def test_every_package_sits_on_one_layer() -> None:
    """LAYERS places whole packages: no entry sits inside another entry's package, so no
    package is spread over layers (which would hide the imports running up inside it)."""
    entries = [entry for layer in LAYERS for entry in layer if entry != "agentgym"]
    inside = sorted(e for e in entries for p in entries if e.startswith(f"{p}."))
    assert not inside, f"LAYERS places these apart from their package: {inside}"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for edges in agentgym_graph().values():
        for edge in edges:
            source, target = layer_of(edge.source), layer_of(edge.target)
            if source is not None and target is not None and target > source:
                upward.append(
                    f"{edge.where}\n    ({LAYERS[source][0]} must not import {LAYERS[target][0]})"
                )
    if upward:
        pytest.fail("imports that point up the layers:\n" + "\n".join(upward), pytrace=False)


def test_the_walk_finds_every_kind_of_import(tmp_path: Path) -> None:
    """The checks above are only as good as the walk: each kind of import is an edge."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.sub import leaf\n",
        "sub/__init__.py": "",
        "sub/leaf.py": "from .. import top\n",
        "top.py": (
            "from typing import TYPE_CHECKING\n"
            "import importlib\n"
            "if TYPE_CHECKING:\n    from pkg.sub import typed\n"
            "def later():\n    import pkg.lazy\n"
            "def hidden():\n    return importlib.import_module('pkg.dynamic')\n"
        ),
        "typed.py": "",
        "sub/typed.py": "",
        "lazy.py": "import pkg\nx = pkg.sub.typed\n",
        "dynamic.py": "",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(package)
    edges = {(edge.source, edge.target) for edges in graph.values() for edge in edges}
    assert edges == {
        ("pkg", "pkg.sub.leaf"),
        ("pkg.sub.leaf", "pkg.top"),
        ("pkg.top", "pkg.sub.typed"),
        ("pkg.top", "pkg.lazy"),
        ("pkg.top", "pkg.dynamic"),
        ("pkg.lazy", "pkg"),
        ("pkg.lazy", "pkg.sub.typed"),
    }
    cycles = find_cycles(graph)
    assert [[edge.source for edge in cycle] for cycle in cycles] == [
        ["pkg", "pkg.sub.leaf", "pkg.top", "pkg.lazy"]
    ]
    assert cycles[0][0].where == "pkg/__init__.py:1: from pkg.sub import leaf"
