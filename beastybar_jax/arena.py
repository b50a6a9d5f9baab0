"""Matches between agents, measured the way the reference project measures, but fairer.

``play_match`` plays ``num_deals`` deals twice each (duplicate format): in the
first copy agent A sits in seat 0, in the second the same deal (same hands, decks
and starting seat) is replayed with the seats swapped, so A holds exactly the cards
B held. Card luck cancels within each pair. All ``2 * num_deals`` games run at once:
each agent acts on the whole batch of games (``agents.batch_act``) inside one
``lax.scan`` over turns, both agents' actions computed every turn and the mover's
selected with ``jnp.where`` (no per-move Python, one compiled function per pair of
agents and match size).

Statistics (``MatchResult``, from agent A's point of view):
- ``win_rate`` = wins / games, as the reference counts it (draws are not wins);
- ``score`` = (wins + draws / 2) / games with a 95% interval. The two games of a
  deal are not independent, so the interval is a normal one over the
  ``num_deals`` per-deal mean scores (the independent units), clipped to [0, 1];
  when those have no spread (e.g. all won) the Wilson interval over games is used.
- ``mean_margin``: mean final (A - B) bar points.
- ``entry`` (``play_match(..., record_entry=True)``, games with an exact solver): where
  the games were decided. For each game, the exact result for A (best play by both
  from there, ``Game.solver.exact_values``) at the first position the solver solves, the
  endgame's entry (Beasty Bar: the opponent's deck empty, the mover's at most one
  card), against the final result. Under best play by both the result stays the entry's:
  a game that ends worse for A was thrown away by A in the endgame, one that ends better
  was given away by B.

``elo_table`` fits Elo ratings to any set of pairwise results by the Bradley-Terry
maximum-likelihood fit on scores (draws count half), with one virtual drawn game
per pair played as a prior so that a 100% score gives a finite rating. Ratings
are anchored at ``random`` = 0 when ``random`` took part, else at mean 0.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.agents.base import Agent, batch_act
from beastybar_jax.games.base import Game



@chex.dataclass(frozen=True)
class MatchOutcomes:
    """Per-game outcomes of a duplicate match, as device arrays (``G = 2 * num_deals``).

    Game ``g`` and game ``g + num_deals`` share a deal, with A in seat 0 and 1.

    Attributes:
      reward: ``float32[G]`` +1 / 0 / -1 for agent A.
      margin: ``float32[G]`` final (A - B) bar points.
      agent_seat: ``int32[G]`` A's seat (0 or 1).
      first_player: ``int32[G]`` the seat that moved first.
      illegal: ``int32[G, 2]`` illegal moves attempted by A (column 0) and B (column 1).
      terminated: ``bool[G]`` every game ended within ``game.max_game_length`` turns.
      entry_value: ``float32[G]`` with ``record_entry``: the exact result for A at the
        endgame's entry (module docstring), NaN where the solver solved no position
        of the game; else None.
    """

    reward: chex.Array
    margin: chex.Array
    agent_seat: chex.Array
    first_player: chex.Array
    illegal: chex.Array
    terminated: chex.Array
    entry_value: chex.Array | None = None


def _check_actions(agent: Agent, actions, games: int):
    """An agent's actions ``[games]``, or ``TypeError`` at trace time for another shape or
    a non-integer dtype (a float 8.7 would be played as 8, a bool as 0 or 1)."""
    if actions.shape != (games,) or not jnp.issubdtype(actions.dtype, jnp.integer):
        raise TypeError(f"agent {agent.name!r} returned actions of shape {actions.shape} and dtype "
                        f"{actions.dtype}; an agent returns one integer action id per game ({games},)")
    return actions


def play_games(agent_a: Agent, agent_b: Agent, deal_keys: jax.Array, key: jax.Array,
               game: Game, record_entry: bool = False) -> MatchOutcomes:
    """Pure and jittable core of ``play_match``: every deal of ``deal_keys`` (``[D]``
    keys) played twice with seats swapped. Usable inside a larger jitted function
    (e.g. training-time evaluation of a network agent with traced parameters).
    ``record_entry`` (static) also solves the endgames (``MatchOutcomes.entry_value``)."""
    if record_entry and not game.has("solver.exact_values"):
        raise ValueError(f"where games are decided needs an exact solver (Game.solver.exact_values); {game.name} "
                         f"has none")
    num_deals = deal_keys.shape[0]
    deals = jax.vmap(game.init)(deal_keys)
    states = jax.tree.map(lambda x: jnp.concatenate([x, x]), deals)
    agent_seat = jnp.repeat(jnp.arange(2, dtype=jnp.int32), num_deals)
    first_player = states.current_player.astype(jnp.int32)
    act_a = batch_act(agent_a)
    act_b = batch_act(agent_b)

    def turn(carry, turn_key):
        states, illegal = carry
        key_a, key_b = jax.random.split(turn_key)
        games = 2 * num_deals
        action_a = _check_actions(agent_a, act_a(states, jax.random.split(key_a, games)), games)
        action_b = _check_actions(agent_b, act_b(states, jax.random.split(key_b, games)), games)
        a_to_move = states.current_player.astype(jnp.int32) == agent_seat
        action = jnp.where(a_to_move, action_a, action_b).astype(jnp.int32)
        legal = jax.vmap(game.legal_action_mask)(states)
        in_range = (action >= 0) & (action < game.num_actions)
        chosen_legal = jnp.take_along_axis(legal, jnp.clip(action, 0, game.num_actions - 1)[:, None], 1)[:, 0]
        bad = ~states.terminated & ~(in_range & chosen_legal)
        illegal = illegal + jnp.stack([bad & a_to_move, bad & ~a_to_move], axis=1).astype(jnp.int32)
        return (jax.vmap(game.step)(states, action), illegal), (states if record_entry else None)

    illegal = jnp.zeros((2 * num_deals, 2), jnp.int32)
    (final, illegal), history = jax.lax.scan(turn, (states, illegal), jax.random.split(key, game.max_game_length))
    seats = jnp.arange(2 * num_deals)
    reward = final.rewards[seats, agent_seat]
    margin = jax.vmap(game.score_margin)(final, agent_seat)
    entry_value = _entry_values(history, agent_seat, game) if record_entry else None
    return MatchOutcomes(reward=reward, margin=margin, agent_seat=agent_seat, first_player=first_player,
                         illegal=illegal, terminated=final.terminated, entry_value=entry_value)


def _entry_values(history, agent_seat: jax.Array, game: Game) -> jax.Array:
    """``float32[G]`` the exact result for the agent in ``agent_seat [G]`` at the first
    state of ``history`` (``[T, G]``, the states before each turn) that the game's solver
    solves; NaN where it solves none. Every state is handed to the solver (those it
    cannot solve cost nothing), so no game-specific test of solvability is needed."""
    turns, games = history.current_player.shape
    solved, value = game.solver.exact_values(jax.tree.map(lambda x: x.reshape((turns * games,) + x.shape[2:]), history), 0)
    solved, value = solved.reshape(turns, games), value.reshape(turns, games)
    for_agent = jnp.where(history.current_player.astype(jnp.int32) == agent_seat, value, -value)
    first = jnp.argmax(solved, axis=0)
    entry = jnp.take_along_axis(for_agent, first[None], axis=0)[0]
    return jnp.where(solved.any(axis=0), entry, jnp.nan)


@functools.lru_cache(maxsize=64)
def _compiled_match(agent_a: Agent, agent_b: Agent, game: Game, record_entry: bool):
    # record_entry without a default: (a, b, g) and (a, b, g, False) would be two cache keys.
    return jax.jit(functools.partial(play_games, agent_a, agent_b, game=game, record_entry=record_entry))


@dataclasses.dataclass
class MatchResult:
    """A duplicate match from ``agent``'s point of view (see the module docstring)."""

    agent: str
    opponent: str
    games: int
    wins: int
    draws: int
    losses: int
    win_rate: float
    score: float
    score_ci95: tuple[float, float]
    mean_margin: float
    illegal_moves: int = 0         # by ``agent``; the opponent's are in the mirrored result
    opponent_illegal_moves: int = 0
    first_player_win_rate: float = math.nan  # share of games won by the seat that moved first
    # With ``record_entry``: games by exact result at the endgame's entry (best play from
    # there; "none" where no position was solved) and final result, for ``agent``:
    # ``entry["win"]["draw"]`` games entered won ended drawn (module docstring).
    entry: dict | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def mirrored(self) -> "MatchResult":
        """The same match from the opponent's point of view."""
        lo, hi = self.score_ci95
        return dataclasses.replace(
            self, agent=self.opponent, opponent=self.agent, wins=self.losses, losses=self.wins,
            win_rate=self.losses / self.games, score=1.0 - self.score, score_ci95=(1.0 - hi, 1.0 - lo),
            mean_margin=-self.mean_margin, illegal_moves=self.opponent_illegal_moves,
            opponent_illegal_moves=self.illegal_moves,
            entry=None if self.entry is None else _mirrored_entry(self.entry))


RESULTS = ("win", "draw", "loss")


def _mirrored_entry(entry: dict) -> dict:
    flip = {"win": "loss", "draw": "draw", "loss": "win", "none": "none"}
    return {flip[at]: {flip[end]: n for end, n in finals.items()} for at, finals in entry.items()}


def entry_table(entry_value: np.ndarray, reward: np.ndarray) -> dict:
    """``{entry result: {final result: games}}`` from per-game exact results at the
    endgame's entry (NaN: none) and final rewards (``MatchResult.entry``)."""
    entry_value, reward = np.asarray(entry_value), np.asarray(reward)
    # Row / column index: 1 - sign (win 0, draw 1, loss 2); the entry's row 3 is "none".
    rows = np.where(np.isnan(entry_value), 3, 1 - np.sign(np.nan_to_num(entry_value))).astype(int)
    counts = np.zeros((4, 3), int)
    np.add.at(counts, (rows, (1 - np.sign(reward)).astype(int)), 1)
    return {at: {end: int(n) for end, n in zip(RESULTS, row)} for at, row in zip(RESULTS + ("none",), counts)}


def wilson_interval(score: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion (draws counted half) over ``n`` trials."""
    if n <= 0:
        return (0.0, 1.0)
    denom = 1 + z * z / n
    centre = (score + z * z / (2 * n)) / denom
    half = z * math.sqrt(score * (1 - score) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarize(outcomes: MatchOutcomes, agent: str, opponent: str) -> MatchResult:
    """Counts and statistics of a ``MatchOutcomes`` (fetched to the host)."""
    o = jax.tree.map(np.asarray, outcomes)
    if not o.terminated.all():
        raise RuntimeError(f"{int((~o.terminated).sum())} games did not end within the turn limit")
    games = int(o.reward.shape[0])
    wins, draws, losses = (int((o.reward > 0).sum()), int((o.reward == 0).sum()), int((o.reward < 0).sum()))
    per_game = (o.reward + 1.0) / 2.0
    score = float(per_game.mean())
    per_deal = per_game.reshape(2, -1).mean(axis=0)
    spread = float(per_deal.std(ddof=1)) if per_deal.size > 1 else 0.0
    if spread > 0:
        half = 1.96 * spread / math.sqrt(per_deal.size)
        ci = (max(0.0, score - half), min(1.0, score + half))
    else:
        ci = wilson_interval(score, games)
    a_first = o.first_player == o.agent_seat
    first_wins = np.where(a_first, o.reward > 0, o.reward < 0)
    return MatchResult(
        agent=agent, opponent=opponent, games=games, wins=wins, draws=draws, losses=losses,
        win_rate=wins / games, score=score, score_ci95=(float(ci[0]), float(ci[1])),
        mean_margin=float(o.margin.mean()), illegal_moves=int(o.illegal[:, 0].sum()),
        opponent_illegal_moves=int(o.illegal[:, 1].sum()),
        first_player_win_rate=float(first_wins.mean()),
        entry=None if o.entry_value is None else entry_table(o.entry_value, o.reward))


def play_match(agent_a: Agent, agent_b: Agent, num_deals: int, key: jax.Array, *,
               game: Game, record_entry: bool = False) -> MatchResult:
    """``2 * num_deals`` games between two agents in duplicate format, batched on device.

    Args:
      agent_a, agent_b: the players; results are from ``agent_a``'s point of view.
      num_deals: deals to play; each is played twice with seats swapped.
      key: a ``jax.random.key``; the same key gives the same deals and games.
      record_entry: also say where the games were decided (``MatchResult.entry``; a
        game with an exact solver). The games are the same either way.
    """
    if isinstance(num_deals, (bool, np.bool_)) or not isinstance(num_deals, (int, np.integer)) or num_deals < 1:
        raise ValueError(f"num_deals must be an integer >= 1, got {num_deals!r}")
    for agent in (agent_a, agent_b):
        if agent.game is not None and agent.game != game.name:
            raise ValueError(f"agent {agent.name!r} plays {agent.game}, not {game.name}: make it with "
                             f"make_agent(spec, game={game.name!r})")
    deal_key, play_key = jax.random.split(key)
    deal_keys = jax.random.split(deal_key, int(num_deals))
    outcomes = _compiled_match(agent_a, agent_b, game, bool(record_entry))(deal_keys, play_key)
    return summarize(outcomes, agent_a.name, agent_b.name)


def round_robin(agents: Sequence[Agent], num_deals: int, key: jax.Array, *,
                game: Game) -> list[MatchResult]:
    """A duplicate match of ``num_deals`` deals between every pair of ``agents``."""
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise ValueError(f"agent names must be distinct for a round robin, got {names}")
    pairs = list(itertools.combinations(range(len(agents)), 2))
    keys = jax.random.split(key, max(len(pairs), 1))
    return [play_match(agents[i], agents[j], num_deals, k, game=game) for (i, j), k in zip(pairs, keys)]


@dataclasses.dataclass
class EloRow:
    name: str
    elo: float
    games: int
    score: float  # mean score over all its games (draws half)


def elo_table(results: Sequence[MatchResult], anchor: str = "random", prior_games: float = 1.0) -> list[EloRow]:
    """Elo ratings fitted to pairwise results, best first.

    Bradley-Terry maximum likelihood on scores with the Elo scale: the expected
    score of i against j is ``1 / (1 + 10 ** ((R_j - R_i) / 400))``. Solved with
    the minorization-maximization iteration (Hunter 2004). Every pair that met
    gets ``prior_games`` virtual drawn games so perfect scores stay finite.
    Ratings are shifted so that ``anchor`` is 0 if it played, else the mean is 0.
    """
    names: list[str] = []
    for r in results:
        for n in (r.agent, r.opponent):
            if n not in names:
                names.append(n)
    if not names:
        return []
    index = {n: i for i, n in enumerate(names)}
    k = len(names)
    games = np.zeros((k, k))
    points = np.zeros((k, k))  # points[i, j]: score i took from j, draws half
    for r in results:
        i, j = index[r.agent], index[r.opponent]
        won = r.wins + 0.5 * r.draws
        games[i, j] += r.games
        games[j, i] += r.games
        points[i, j] += won
        points[j, i] += r.games - won
    met = games > 0
    games_prior = games + prior_games * met
    points_prior = points + 0.5 * prior_games * met
    wins = points_prior.sum(axis=1)
    gamma = np.ones(k)
    for _ in range(10_000):
        denom = (games_prior / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        new = np.where(denom > 0, wins / np.maximum(denom, 1e-300), 1.0)
        new = new / np.exp(np.mean(np.log(new)))
        if np.max(np.abs(np.log(new) - np.log(gamma))) < 1e-10:
            gamma = new
            break
        gamma = new
    elo = 400.0 * np.log10(gamma)
    elo -= elo[index[anchor]] if anchor in index else elo.mean()
    rows = [EloRow(name=n, elo=float(elo[index[n]]), games=int(games[index[n]].sum()),
                   score=float(points[index[n]].sum() / max(games[index[n]].sum(), 1)))
            for n in names]
    return sorted(rows, key=lambda row: -row.elo)
