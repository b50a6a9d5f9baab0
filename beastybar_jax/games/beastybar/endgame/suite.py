"""A fixed yardstick of solved endgames, and how an agent measures against it.

The suite (``endgame_suite.npz`` beside this module, made by
``experiments/make_endgame_suite.py``) holds positions drawn from games between
varied agents, each a real decision (at least two legal moves whose exact
margins differ), with the exact final point margin after every legal move
(``solver`` mode margins). An agent is scored on the move it picks in each:

* ``keeps_result``: the share of positions where the move keeps the best
  game-theoretic result (win / draw / loss under best play by both sides);
* ``throws_win`` / ``throws_draw``: the shares where a won position becomes a
  draw or a loss / a drawn position becomes a loss (their sum is
  ``1 - keeps_result``);
* ``best_margin``: the share where the move reaches the best margin;
* ``margin_lost``: the mean point margin given away against best play;
* ``keeps_at_stake``: ``keeps_result`` over the positions where the result is at stake
  (a legal move changes it; in the others every move keeps it and only the margin
  differs), None where a subset holds none; ``at_stake``: how many there are.

Scores need no search at evaluation time: the stored margins are exact.
:func:`score_groups` scores the same moves per group of positions (by turn, number of
legal moves, exact result or source), to see where an agent loses results.
"""

from __future__ import annotations

import dataclasses
import functools
import zipfile
import zlib
from typing import Any
import pathlib

import jax
import numpy as np

from beastybar_jax.games.beastybar import engine as game
from beastybar_jax.games.base import Yardstick

SUITE_PATH = pathlib.Path(__file__).resolve().parent / "endgame_suite.npz"
WORST_MARGIN = int(np.sum(np.asarray(game.POINTS)))  # all of a player's points
_STATE_FIELDS = ("queue", "hand", "deck", "bar", "thats_it", "current_player", "turn", "terminated", "rewards")


class SuiteError(ValueError):
    """A missing or malformed endgame suite file."""


@dataclasses.dataclass
class Suite:
    """``N`` solved endgame positions (host arrays).

    Attributes:
      states: ``State`` ``[N]``.
      action_margin: ``int8[N, A]`` exact final margin (player to move minus the
        opponent) after each legal action under best play; 0 where illegal.
      legal: ``bool[N, A]``.
      source: ``int8[N]`` index into ``sources`` of the games the position comes from.
      sources: ``"A vs B"`` per pairing of agents.
    """

    states: game.State
    action_margin: np.ndarray
    legal: np.ndarray
    source: np.ndarray
    sources: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.legal.shape[0])

    @property
    def margin(self) -> np.ndarray:
        """``int32[N]`` the best margin of each position."""
        return np.where(self.legal, self.action_margin.astype(np.int32), -1000).max(axis=1)

    @property
    def result(self) -> np.ndarray:
        return np.sign(self.margin)

    def subset(self, index) -> "Suite":
        return dataclasses.replace(self, states=jax.tree.map(lambda x: x[index], self.states),
                                   action_margin=self.action_margin[index], legal=self.legal[index],
                                   source=self.source[index])


def save_suite(suite: Suite, path=SUITE_PATH) -> None:
    """Write ``suite`` to ``path`` exactly (NumPy would add ``.npz`` to a name without it);
    :class:`SuiteError` for one :func:`load_suite` would refuse (no positions, say)."""
    problem = _suite_problem(suite)
    if problem:
        raise SuiteError(f"not written to {path}: {problem}")
    arrays = {f"state_{name}": np.asarray(suite.states[name]) for name in _STATE_FIELDS}
    with open(path, "wb") as f:
        np.savez_compressed(f, action_margin=suite.action_margin.astype(np.int8), legal=suite.legal,
                            source=suite.source.astype(np.int8), sources=np.array(suite.sources), **arrays)


def load_suite(path=SUITE_PATH) -> Suite:
    """The stored suite (``SUITE_PATH`` by default). :class:`SuiteError` for a file that
    is missing, not an ``.npz`` archive, or not a suite of at least one position whose
    arrays agree with each other and with the engine's state."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise SuiteError(f"no endgame suite at {path}; make one with python experiments/make_endgame_suite.py")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise SuiteError(f"{path} is not an endgame suite: NumPy cannot read it as an .npz archive ({first})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # a single .npy array
        raise SuiteError(f"{path} is not an endgame suite: one array, not an .npz archive of them")
    with data:
        try:
            states = game.State(**{name: data[f"state_{name}"] for name in _STATE_FIELDS})
            suite = Suite(states=states, action_margin=data["action_margin"], legal=data["legal"],
                          source=data["source"], sources=tuple(str(s) for s in data["sources"]))
        except KeyError as e:
            raise SuiteError(f"{path} is not an endgame suite (missing {e}); regenerate it") from None
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:  # a damaged member
            raise SuiteError(f"{path} is not an endgame suite: an array cannot be read ({type(e).__name__})") from None
    problem = _suite_problem(suite)
    if problem:
        raise SuiteError(f"{path} is not an endgame suite: {problem}")
    return suite


def _suite_problem(suite: Suite) -> str | None:
    """What makes ``suite`` unusable, or None."""
    legal = suite.legal
    if legal.ndim != 2 or legal.shape[1] != game.NUM_ACTIONS or legal.dtype != np.bool_:
        return f"legal is {legal.dtype}{list(legal.shape)}, not bool[N, {game.NUM_ACTIONS}]"
    n = legal.shape[0]
    if n == 0:
        return "it holds no positions"
    if suite.action_margin.shape != legal.shape:
        return f"action_margin has shape {list(suite.action_margin.shape)}, legal {list(legal.shape)}"
    if suite.source.shape != (n,) or not np.all((suite.source >= 0) & (suite.source < len(suite.sources))):
        return f"source must hold one index into its {len(suite.sources)} sources per position"
    one = jax.eval_shape(game.init, jax.random.key(0))
    for name in _STATE_FIELDS:
        want, got = (n, *one[name].shape), np.shape(suite.states[name])
        if got != want:
            return f"state_{name} has shape {list(got)}, not {list(want)}"
    if not np.all(legal.sum(axis=1) >= 2):
        return "a position has fewer than two legal moves (each must be a decision)"
    return None


def spread(suite: Suite, num_positions: int, seed: int = 0) -> Suite:
    """``num_positions`` positions drawn at random (without replacement, a fixed
    ``seed``, kept in suite order), or the whole suite when that is more than it holds
    (or 0). A random draw, not a regular stride: the first stride tried (every ~6th
    position for 2,048) happened to score a trained network 2.4 points (3.6 standard
    deviations of a random draw) below the whole suite."""
    if num_positions <= 0 or num_positions >= len(suite):
        return suite
    return suite.subset(np.sort(np.random.default_rng(seed).choice(len(suite), num_positions, replace=False)))


SCORE_METRICS = ("keeps_result", "throws_win", "throws_draw", "best_margin", "margin_lost")


def yardstick(num_positions: int = 0, path=SUITE_PATH):
    """The suite as the game interface's :class:`~beastybar_jax.games.Yardstick`
    (``Game.solver.endgame_suite``): ``num_positions`` spread positions (0: all) and a
    ``score(actions) -> {metric: float}`` over ``SCORE_METRICS``."""
    suite = spread(load_suite(path), num_positions)

    def score(actions) -> dict:
        result = score_moves(suite, actions)
        return {name: getattr(result, name) for name in SCORE_METRICS}

    return Yardstick(states=suite.states, score=score)


@dataclasses.dataclass
class EndgameScore:
    """How an agent's moves compare with best play over a suite (module docstring)."""

    agent: str
    positions: int
    keeps_result: float
    throws_win: float
    throws_draw: float
    best_margin: float
    margin_lost: float
    illegal: int
    keeps_at_stake: float | None
    at_stake: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _checked_actions(suite: Suite, actions) -> np.ndarray:
    actions = np.asarray(actions)
    if actions.shape != (len(suite),) or not np.issubdtype(actions.dtype, np.integer):
        raise ValueError(f"score_moves takes one integer action per position, shape ({len(suite)},); "
                         f"got shape {actions.shape}, dtype {actions.dtype}")
    return actions


def score_moves(suite: Suite, actions, agent: str = "agent") -> EndgameScore:
    """The score of one chosen action per suite position (``int[N]``; ``ValueError`` for
    another shape or a non-integer dtype, which would be scored wrong)."""
    actions = _checked_actions(suite, actions)
    rows = np.arange(len(suite))
    in_range = (actions >= 0) & (actions < game.NUM_ACTIONS)
    safe = np.clip(actions, 0, game.NUM_ACTIONS - 1)
    legal = in_range & suite.legal[rows, safe]
    best = suite.margin
    # An illegal move forfeits the game: counted as a loss by the largest margin.
    chosen = np.where(legal, suite.action_margin[rows, safe].astype(np.int32), -WORST_MARGIN)
    result, chosen_result = np.sign(best), np.sign(chosen)
    at_stake = (suite.legal & (np.sign(suite.action_margin) != result[:, None])).any(axis=1)
    kept = chosen_result == result
    return EndgameScore(
        agent=agent, positions=len(suite),
        keeps_result=float(np.mean(kept)),
        throws_win=float(np.mean((result == 1) & (chosen_result < 1))),
        throws_draw=float(np.mean((result == 0) & (chosen_result < 0))),
        best_margin=float(np.mean(chosen == best)),
        margin_lost=float(np.mean(best - chosen)),
        illegal=int((~legal).sum()),
        keeps_at_stake=float(np.mean(kept[at_stake])) if at_stake.any() else None,
        at_stake=int(at_stake.sum()),
    )


GROUPINGS = {  # how score_groups can split the suite: the name, and its label in tables
    "turn": "turn",
    "moves": "legal moves",
    "result": "exact result",
    "source": "from games of",
}
_RESULT_NAMES = {1: "won", 0: "drawn", -1: "lost"}


def position_groups(suite: Suite, by: str) -> list[tuple[str, np.ndarray]]:
    """``[(label, index int[n]), ...]``: the suite's positions split by ``by`` (a key of
    ``GROUPINGS``): the turn they are at, their number of legal moves, their exact result
    for the mover (won, drawn, lost) or the pairing of agents whose games they come from;
    groups in the order of that value, empty ones left out. ``ValueError`` for another
    ``by``."""
    if by not in GROUPINGS:
        raise ValueError(f"positions are grouped by one of {', '.join(GROUPINGS)}; got {by!r}")
    if by == "source":
        value, label = suite.source.astype(np.int64), lambda v: suite.sources[v]
    elif by == "result":
        value, label = -suite.result.astype(np.int64), lambda v: _RESULT_NAMES[-v]  # won first
    else:
        value = (np.asarray(suite.states["turn"]) if by == "turn" else suite.legal.sum(axis=1)).astype(np.int64)
        label = str
    return [(label(v), np.flatnonzero(value == v)) for v in np.unique(value)]


def score_groups(suite: Suite, actions, by: str, agent: str = "agent") -> list[tuple[str, EndgameScore]]:
    """:func:`score_moves` of each group of :func:`position_groups`: ``[(label, score)]``,
    each score's shares taken over its group's positions."""
    actions = _checked_actions(suite, actions)
    return [(label, score_moves(suite.subset(index), actions[index], agent))
            for label, index in position_groups(suite, by)]


CHUNK = 1024  # positions per compiled call of an agent


@functools.lru_cache(maxsize=32)
def _compiled_moves(agent: Any):
    # The agent's own batched act where it has one (beastybar_jax.agents.batch_act; this
    # package imports no agent module).
    return jax.jit(getattr(agent, "act_batch", None) or jax.vmap(agent.act))


def agent_moves(agent: Any, suite: Suite, key: jax.Array, chunk: int = CHUNK) -> np.ndarray:
    """``int32[N]`` the agent's move in each suite position, in chunks of ``chunk``
    positions (the last one padded) so that one compiled function serves the suite."""
    act = _compiled_moves(agent)
    n = len(suite)
    keys = jax.random.split(key, n)
    moves = []
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        index = np.concatenate([np.arange(start, stop), np.full(chunk - (stop - start), start)])
        states = jax.tree.map(lambda x: x[index], suite.states)
        moves.append(np.asarray(act(states, keys[index]))[:stop - start])
    return np.concatenate(moves)


def evaluate_agent(agent: Any, suite: Suite, key: jax.Array, chunk: int = CHUNK) -> EndgameScore:
    """An agent's endgame score over a suite (its moves drawn with ``key``)."""
    return score_moves(suite, agent_moves(agent, suite, key, chunk), agent.name)
