"""The package's rooms and arrows: no import circle, no arrow up, no hidden edge.

Every import counts, also those inside functions (a deferred import that closes a circle
is still a circle), and the package loads nothing by name: no ``importlib``, no lazy
module ``__getattr__``, so every edge is one the tools (and this test) can see. A
package's ``__init__`` is a module of its own.

The rooms stand on floors (:data:`FLOORS`, bottom up) and a module imports only from its
own floor and those below: the leaves (``validation``, ``seeds``, ``strict_yaml``, ``per_game``,
``cli``); the game interface and what every game may use (``games.base``, ``games.choice``,
``games.text``, ``games.minimax``); the games and their registry; the network and its
afterstate scorer; ``config`` (plain data); ``search``; ``checkpoint``; ``agents``,
``arena``, ``playing``; ``learning`` (what the algorithms build on); the algorithms
(``alphazero``, ``ppo``); ``algorithms`` (their registry); ``training`` (the run); ``web``.
Rooms on one floor that must not know each other (the games, the algorithms) and rooms
that take a ``Game`` without naming one have their own rules below.
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


FLOORS = (  # bottom up, each a tuple of rooms (module prefixes under beastybar_jax)
    ("validation", "seeds", "strict_yaml", "cli", "per_game"),
    ("games.base", "games.choice", "games.text", "games.minimax"),
    ("games.beastybar", "games.tictactoe", "games.registry", "games"),
    ("afterstate_scorer", "torso_kernel", "network"),
    ("config",),
    ("search",),
    ("checkpoint",),
    ("agents", "arena", "playing"),
    ("learning",),
    ("alphazero", "ppo"),
    ("algorithms",),
    ("training",),
    ("web",),
)


def _room(module: str) -> tuple[int, str] | None:
    """``(floor, room)`` of a module: the longest room that holds it (``None``: none does)."""
    rooms = [(floor, room) for floor, names in enumerate(FLOORS) for room in names
             if _matches(module, (f"beastybar_jax.{room}",))]
    return max(rooms, key=lambda r: len(r[1]), default=None)


def test_every_module_has_a_room():
    homeless = sorted(m for m in GRAPH if m != "beastybar_jax" and _room(m) is None)
    assert not homeless, f"add these modules to a room of FLOORS: {homeless}"


def test_no_arrow_points_up():
    """A module names only modules of its own floor or below."""
    up = sorted(f"{m} -> {d}" for m in NAMED if m != "beastybar_jax" for d in NAMED[m]
                if _room(m) and _room(d) and _room(d)[0] > _room(m)[0])
    assert up == [], f"{len(up)} arrows up: {up}"


GAME_ROOMS = ("beastybar_jax.games.beastybar", "beastybar_jax.games.tictactoe")
REGISTRY = ("beastybar_jax.games.registry", "beastybar_jax.games")


def _names(module: str, forbidden: tuple[str, ...]) -> list[str]:
    """The modules of ``forbidden`` that ``module`` (or a module inside it) names, directly or not."""
    inside = {m for m in NAMED if m == module or m.startswith(module + ".")}
    reached = set().union(*(_reachable(m, NAMED) for m in inside))
    return sorted(m for m in reached if m in forbidden or _matches(m, tuple(f for f in forbidden
                                                                             if f != "beastybar_jax.games")))


@pytest.mark.parametrize("module, forbidden", [
    # a game knows no other game, nor the registry that lists them
    ("beastybar_jax.games.beastybar", ("beastybar_jax.games.tictactoe", *REGISTRY)),
    ("beastybar_jax.games.tictactoe", ("beastybar_jax.games.beastybar", *REGISTRY)),
    # generic rooms take a Game: no game room, not even the registry, for a default argument
    ("beastybar_jax.network", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.afterstate_scorer", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.torso_kernel", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.search", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.arena", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.agents.search_agents", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.agents.baselines", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.alphazero", (*REGISTRY, *GAME_ROOMS)),
    ("beastybar_jax.ppo.rollout", (*REGISTRY, *GAME_ROOMS)),
    # the algorithms do not know each other
    ("beastybar_jax.alphazero", ("beastybar_jax.ppo",)),
    ("beastybar_jax.ppo", ("beastybar_jax.alphazero",)),
])
def test_rooms_that_must_not_know_each_other(module, forbidden):
    bad = _names(module, forbidden)
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("game", GAME_ROOMS)
def test_only_a_games_room_knows_its_rules(game):
    """A game's engine is read only inside its room (and by the registry that lists it);
    elsewhere a game is a ``Game``."""
    knows = sorted(m for m in GRAPH if not _matches(m, (game,)) and m != "beastybar_jax.games.registry"
                   and any(_matches(d, (game,)) for d in NAMED[m]))
    assert not knows, knows
