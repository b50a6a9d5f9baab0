"""The package's rooms and arrows: no import circle, no arrow up, no hidden edge.

Every import counts, also those inside functions (a deferred import that closes a circle
is still a circle), and the package loads nothing by name: no ``importlib``, no lazy
module ``__getattr__``, so every edge is one the tools (and this test) can see. A
package's ``__init__`` is a module of its own.

The rooms, bottom up: ``validation`` and ``seeds``; ``games.base`` and the helpers every game may use
(``games.choice``, ``games.text``, ``games.minimax``); one room per game
(``games.beastybar``, ``games.tictactoe``) and their registry (``games.registry``,
re-exported by ``games``); ``network`` and ``config`` (plain data, one module per section);
``search``; ``checkpoint``; ``agents`` and ``arena``; the algorithms (``alphazero``, ``ppo``)
over the shared pieces of ``training``; ``algorithms`` (their registry); ``training``'s loop.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "beastybar_jax"
FILES = {}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, modules: set[str], importer: str, packages: bool = True) -> set[str]:
    """beastybar_jax modules imported anywhere in the module, also inside functions
    (``from x import y`` counts ``x.y`` when that is a module, else ``x``; importing
    ``a.b`` also runs package ``a``, unless the importer is inside ``a``: a sibling import
    while ``a`` loads is no circle). ``packages=False``: only the modules named."""
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                     for alias in node.names]
        for name in names:
            parts = name.split(".")
            for i in range(1 if packages else len(parts), len(parts) + 1):  # the packages on the way run too
                prefix = ".".join(parts[:i])
                inside = importer.startswith(prefix + ".") and i < len(parts)
                if prefix in modules and not inside:
                    found.add(prefix)
    return found


def _trees() -> dict[str, ast.AST]:
    return {_module_name(p): ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}


TREES = _trees()
GRAPH = {name: _imports(tree, set(TREES), name) - {name} for name, tree in TREES.items()}
# What each module names: the arrows between rooms. (``beastybar_jax.games`` re-exports the
# registry for users, so importing ``games.base`` also runs it; that is no dependency on a game.)
NAMED = {name: _imports(tree, set(TREES), name, packages=False) - {name} for name, tree in TREES.items()}


def _reachable(start: str, graph: dict = GRAPH) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_circle():
    cycles = [m for m in GRAPH if m in _reachable(m) and not m == "beastybar_jax"]
    # the top package is imported on the way to every submodule; it imports nothing itself
    assert not GRAPH["beastybar_jax"], GRAPH["beastybar_jax"]
    assert not cycles, {m: sorted(_reachable(m) & {n for n in GRAPH if m in _reachable(n)}) for m in cycles}


def test_nothing_is_loaded_by_name_and_no_module_loads_lazily():
    """No ``importlib`` (an edge the graph cannot see) and no module ``__getattr__`` loader."""
    by_name = sorted(name for name, tree in TREES.items()
                     if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "importlib" in
                            ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
                            for n in ast.walk(tree))
                     or any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__import__" for n in ast.walk(tree)))
    lazy = sorted(name for name, tree in TREES.items()
                  if any(isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__") for n in tree.body))
    assert not by_name and not lazy, (by_name, lazy)


def _matches(module: str, rooms: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in rooms)


GAME_ROOMS = ("beastybar_jax.games.beastybar", "beastybar_jax.games.tictactoe")
ABOVE_GAMES = ("beastybar_jax.network", "beastybar_jax.search", "beastybar_jax.agents", "beastybar_jax.arena",
               "beastybar_jax.training", "beastybar_jax.alphazero", "beastybar_jax.ppo", "beastybar_jax.config",
               "beastybar_jax.checkpoint", "beastybar_jax.algorithms")


@pytest.mark.parametrize("module, forbidden", [
    # the game interface and the shared game helpers know no game and nothing above games
    ("beastybar_jax.games.base", ("beastybar_jax.games.registry", *GAME_ROOMS, *ABOVE_GAMES)),
    ("beastybar_jax.games.choice", ("beastybar_jax.games.registry", *GAME_ROOMS, *ABOVE_GAMES)),
    ("beastybar_jax.games.text", ("beastybar_jax.games.registry", *GAME_ROOMS, *ABOVE_GAMES)),
    ("beastybar_jax.games.minimax", ("beastybar_jax.games.registry", *GAME_ROOMS, *ABOVE_GAMES)),
    # a game knows no other game and nothing above games
    ("beastybar_jax.games.beastybar", ("beastybar_jax.games.tictactoe", "beastybar_jax.games.registry", *ABOVE_GAMES)),
    ("beastybar_jax.games.tictactoe", ("beastybar_jax.games.beastybar", "beastybar_jax.games.registry", *ABOVE_GAMES)),
    # configuration is plain data: no algorithm, agent, checkpoint or training code
    ("beastybar_jax.config", ("beastybar_jax.alphazero", "beastybar_jax.ppo", "beastybar_jax.agents",
                              "beastybar_jax.training", "beastybar_jax.arena", "beastybar_jax.checkpoint",
                              "beastybar_jax.search", "beastybar_jax.algorithms")),
    # generic rooms take a Game: no game room, not even the registry, for a default argument
    ("beastybar_jax.network", ("beastybar_jax.games.registry", *GAME_ROOMS, "beastybar_jax.search")),
    ("beastybar_jax.search", ("beastybar_jax.games.registry", *GAME_ROOMS, "beastybar_jax.alphazero",
                              "beastybar_jax.ppo", "beastybar_jax.training", "beastybar_jax.agents")),
    ("beastybar_jax.arena", ("beastybar_jax.games.registry", *GAME_ROOMS, "beastybar_jax.training")),
    ("beastybar_jax.agents.search_agents", ("beastybar_jax.games.registry", *GAME_ROOMS)),
    ("beastybar_jax.agents.baselines", ("beastybar_jax.games.registry", *GAME_ROOMS)),
    ("beastybar_jax.alphazero.algorithm", ("beastybar_jax.games.registry", *GAME_ROOMS, "beastybar_jax.ppo",
                                           "beastybar_jax.training.trainer", "beastybar_jax.training.loop")),
    ("beastybar_jax.ppo.rollout", ("beastybar_jax.games.registry", *GAME_ROOMS)),
    # agents sit below training: checkpoints are read by beastybar_jax.checkpoint
    ("beastybar_jax.agents", ("beastybar_jax.training", "beastybar_jax.alphazero", "beastybar_jax.ppo",
                              "beastybar_jax.algorithms")),
    ("beastybar_jax.checkpoint", ("beastybar_jax.training", "beastybar_jax.agents", "beastybar_jax.alphazero",
                                  "beastybar_jax.ppo")),
    # the algorithms do not know each other, nor the loop that runs them
    ("beastybar_jax.ppo.algorithm", ("beastybar_jax.alphazero", "beastybar_jax.training.trainer",
                                     "beastybar_jax.training.loop", "beastybar_jax.training.evaluation")),
    # the shared training pieces an algorithm imports know no algorithm
    ("beastybar_jax.training.algorithm", ("beastybar_jax.alphazero", "beastybar_jax.ppo", "beastybar_jax.algorithms")),
    ("beastybar_jax.training.sharding", ("beastybar_jax.alphazero", "beastybar_jax.ppo", "beastybar_jax.algorithms")),
    ("beastybar_jax.training.optimizer", ("beastybar_jax.alphazero", "beastybar_jax.ppo", "beastybar_jax.algorithms")),
])
def test_arrows_point_one_way(module, forbidden):
    inside = {m for m in NAMED if m == module or m.startswith(module + ".")}
    reached = set().union(*(_reachable(m, NAMED) for m in inside))
    bad = sorted(m for m in reached if _matches(m, forbidden))
    assert not bad, f"{module} imports {bad}"


def test_only_the_game_rooms_know_beasty_bar_rules():
    """The Beasty Bar engine (cards, species, the queue) is read only inside
    games/beastybar; elsewhere a game is a ``Game``. The registry names the games."""
    knows = sorted(m for m in GRAPH if not _matches(m, ("beastybar_jax.games.beastybar",))
                   and m != "beastybar_jax.games.registry"
                   and any(_matches(d, ("beastybar_jax.games.beastybar",)) for d in NAMED[m]))
    assert not knows, knows
