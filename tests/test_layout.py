"""The package's rooms and arrows: no import circle, configuration is plain data, the
shared training room and the game interface depend on no algorithm and no game.

Every import counts, also those inside functions (a deferred import that closes a circle
is still a circle). A package's ``__init__`` is a module of its own. The registries that
load a game or an algorithm by name (``importlib``) are the deliberate exception: they
are how the shared rooms reach a room they must not depend on.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "beastybar_jax"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path, modules: set[str], importer: str) -> set[str]:
    """beastybar_jax modules imported at module level (``from x import y`` counts ``x.y``
    when that is a module, else ``x``; importing ``a.b`` also runs package ``a``, unless
    the importer is inside ``a``: a sibling import while ``a`` loads is no circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                     for alias in node.names]
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # the packages on the way are imported too
                prefix = ".".join(parts[:i])
                inside = importer.startswith(prefix + ".") and i < len(parts)
                if prefix in modules and not inside:
                    found.add(prefix)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {name: _imports(path, modules, name) - {name} for name, path in files.items()}


GRAPH = import_graph()


def _reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_circle():
    cycles = [m for m in GRAPH if m in _reachable(m) and not m == "beastybar_jax"]
    # the top package is imported on the way to every submodule; it imports nothing itself
    assert not GRAPH["beastybar_jax"], GRAPH["beastybar_jax"]
    assert not cycles, {m: sorted(_reachable(m) & {n for n in GRAPH if m in _reachable(n)}) for m in cycles}


@pytest.mark.parametrize("module, forbidden", [
    ("beastybar_jax.config", ("beastybar_jax.agents", "beastybar_jax.training", "beastybar_jax.arena")),
    ("beastybar_jax.games", ("beastybar_jax.games.beastybar", "beastybar_jax.search", "beastybar_jax.network")),
    ("beastybar_jax.training.trainer", ("beastybar_jax.alphazero.algorithm", "beastybar_jax.ppo.algorithm")),
    ("beastybar_jax.training.loop", ("beastybar_jax.alphazero.algorithm", "beastybar_jax.ppo.algorithm")),
    ("beastybar_jax.ppo.algorithm", ("beastybar_jax.alphazero.algorithm", "beastybar_jax.alphazero.selfplay",
                                     "beastybar_jax.alphazero.replay", "beastybar_jax.alphazero.loss")),
    ("beastybar_jax.alphazero.algorithm", ("beastybar_jax.ppo.algorithm", "beastybar_jax.ppo.rollout",
                                           "beastybar_jax.ppo.loss")),
    ("beastybar_jax.config.ppo", ("beastybar_jax.ppo.rollout", "beastybar_jax.agents", "beastybar_jax.training")),
    ("beastybar_jax.search", ("beastybar_jax.alphazero", "beastybar_jax.training")),
    ("beastybar_jax.network", ("beastybar_jax.games.beastybar",)),
])
def test_arrows_point_one_way(module, forbidden):
    reached = _reachable(module)
    bad = sorted(m for m in reached if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert not bad, f"{module} imports {bad} at module level"
