"""Self-play: ``B`` games advanced side by side with search in one ``lax.scan`` over moves,
then the finished games' records into the replay buffer.

Each game slot keeps the records of the game it is playing (``[B, T, ...]`` with
``T = game.max_game_length``). A move is: observe, search (on worlds sampled for the
mover, inside :func:`beastybar_jax.search.run_search`), choose an action with the
temperature schedule, record, step; a slot whose game ended starts a new game at once.
:func:`play_moves` returns every move it played (:class:`PlayedMoves`, ``[M, B]``), and
:func:`insert_finished` then labels the records of the games that ended (the outcome and
final score margin for each record's own player) and appends them to the replay buffer
in the order the games ended. Games still running when an iteration ends carry over to
the next one, so their positions are never inserted half-labelled.

Between the two, a transform may rewrite the played records' targets before they enter
the buffer (AlphaZero's exact targets, :mod:`beastybar_jax.alphazero.exact_targets`): a
record marked ``exact`` keeps the value target it has.

Everything here takes the game as a parameter (:class:`beastybar_jax.games.Game`);
nothing is specific to Beasty Bar.
"""

from __future__ import annotations

from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp

from beastybar_jax import search as search_lib
from beastybar_jax.alphazero import replay as replay_lib
from beastybar_jax.alphazero.replay import Records, ReplayBuffer
from beastybar_jax.games.base import Game
from beastybar_jax.per_game import set_each


@chex.dataclass(frozen=True)
class SelfPlayState:
    """The games in progress and what has been recorded of them.

    Attributes:
      games: the game states, batched ``[B]``.
      trajectory: :class:`~beastybar_jax.alphazero.replay.Records` ``[B, T]``: the moves of each
        slot's current game so far (``value`` / ``score_margin`` are filled when it ends,
        unless a transform marked a record ``exact`` first).
      length: ``int32[B]`` moves recorded in each slot's current game.
    """

    games: Any
    trajectory: Records
    length: chex.Array


@chex.dataclass(frozen=True)
class PlayedMoves:
    """Every move of one :func:`play_moves` call; leading axes ``[M, B]`` (move, slot).

    Attributes:
      games: the game states before the move.
      record: :class:`~beastybar_jax.alphazero.replay.Records` the move's record, as its
        slot's trajectory holds it (unlabelled).
      index: ``int32`` the position's index in its game's trajectory.
      done: ``bool`` the game ended with this move.
      rewards: ``float32[P]`` the game's outcome for each player, where ``done``.
      margins: ``float32[P]`` each player's final ``game.score_margin``, where ``done``.
    """

    games: Any
    record: Records
    index: chex.Array
    done: chex.Array
    rewards: chex.Array
    margins: chex.Array


@chex.dataclass(frozen=True)
class SelfPlayStats:
    """Totals over the moves of one :func:`play_moves` call (scalars).

    Attributes:
      moves: moves played (``B`` per move step).
      games_finished: games that ended.
      finished_game_length: summed length (moves) of the games that ended: the records
        :func:`insert_finished` inserts.
      draws: finished games that were drawn.
      first_player_outcome: summed outcome of finished games for the player who moved first.
      policy_target_entropy: summed entropy of the search policy targets (divide by ``moves``).
      root_value: summed search root values (divide by ``moves``).
      search_passes: summed :attr:`SearchOutput.passes` (divide by ``moves``: the
        searches run per move; above 1 where afterstate lists overflowed).
    """

    moves: chex.Array
    games_finished: chex.Array
    finished_game_length: chex.Array
    draws: chex.Array
    first_player_outcome: chex.Array
    policy_target_entropy: chex.Array
    root_value: chex.Array
    search_passes: chex.Array


def init(game: Game, key: jax.Array, num_games: int) -> SelfPlayState:
    """``num_games`` fresh games with empty records."""
    games = jax.vmap(game.init)(jax.random.split(key, num_games))
    return SelfPlayState(
        games=games,
        trajectory=replay_lib.empty_records((num_games, game.max_game_length), game.observation_size, game.num_actions),
        length=jnp.zeros((num_games,), jnp.int32),
    )


def temperature_schedule(move_number: jax.Array, temperature: float, drop_move: int,
                         final_temperature: float) -> jax.Array:
    """``temperature`` for a game's moves ``0 .. drop_move - 1``, ``final_temperature`` after."""
    return jnp.where(move_number < drop_move, temperature, final_temperature).astype(jnp.float32)


def select_action(output: search_lib.SearchOutput, legal_mask: jax.Array, temperature: jax.Array,
                  key: jax.Array) -> jax.Array:
    """``int32[B]`` actions: drawn from ``action_weights ** (1 / temperature)`` where the
    temperature (``[B]``) is positive, the search's own ``action`` where it is 0."""
    weights = jnp.where(legal_mask, output.action_weights, 0.0)
    safe_temperature = jnp.where(temperature > 0, temperature, 1.0)[:, None]
    logits = jnp.where(weights > 0, jnp.log(jnp.maximum(weights, 1e-30)) / safe_temperature, -jnp.inf)
    has_support = jnp.any(weights > 0, axis=-1)
    sampled = jax.random.categorical(key, jnp.where(has_support[:, None], logits, 0.0), axis=-1)
    use_sample = (temperature > 0) & has_support
    return jnp.where(use_sample, sampled, output.action).astype(jnp.int32)


def final_margins(game: Game, final_games) -> jax.Array:
    """``float32[B, P]`` each player's ``score_margin`` in the states ``final_games`` ``[B]``."""
    players = jnp.arange(game.num_players)
    margins = jax.vmap(lambda s: jax.vmap(lambda p: game.score_margin(s, p))(players))(final_games)
    return margins.astype(jnp.float32)


def label(game: Game, records: Records, rewards: jax.Array, margins: jax.Array) -> Records:
    """``records`` (any leading axes) labelled from their game's outcome ``rewards`` and
    final ``margins`` (the same axes, then ``[P]``): the value target is the outcome for
    each record's own player (a record marked ``exact`` keeps its own), the score-margin
    target that player's margin / ``game.score_margin_scale``."""
    player = records.player.astype(jnp.int32)[..., None]
    per_record = lambda x: jnp.broadcast_to(x.astype(jnp.float32), player.shape[:-1] + x.shape[-1:])  # noqa: E731
    outcome = jnp.take_along_axis(per_record(rewards), player, axis=-1)[..., 0]
    margin = jnp.take_along_axis(per_record(margins), player, axis=-1)[..., 0] / game.score_margin_scale
    return records.replace(value=jnp.where(records.exact, records.value, outcome), score_margin=margin)


def label_trajectory(game: Game, trajectory: Records, final_games) -> Records:
    """The ``[B, T]`` records ``trajectory`` labelled (:func:`label`) from the final states ``[B]``."""
    return label(game, trajectory, final_games.rewards[:, None, :], final_margins(game, final_games)[:, None, :])


def play_move(game: Game, evaluate: search_lib.Evaluator, search_config: search_lib.SearchConfig,
              state: SelfPlayState, key: jax.Array, *, temperature: float, temperature_drop_move: int,
              final_temperature: float, constrain: Callable[[Any], Any] = lambda x: x, start_tier=0):
    """One move in every game: search, act, record, step; finished games restart.
    Returns ``(state, the move as PlayedMoves [B], stats, least_tier)``: the search starts
    at afterstate tier ``start_tier`` (``run_search``), and ``least_tier`` (``int32[]``) is
    the first that held all of its rows, where the next move's search can start."""
    games = state.games
    num_games = state.length.shape[0]
    search_key, action_key, reset_key = jax.random.split(key, 3)

    players = games.current_player
    observation = jax.vmap(game.observe)(games, players)  # [B, O]
    legal_mask = jax.vmap(game.legal_action_mask)(games)  # [B, A]
    output = search_lib.run_search(game, evaluate, games, search_key, search_config, add_noise=True,
                                   start_tier=start_tier)
    if search_config.algorithm != "gumbel":
        # mctx's PUCT self-play action is already drawn from the visits; temperature 0
        # means the most visited action (the Gumbel choice is already greedy given its noise).
        greedy = jnp.argmax(jnp.where(legal_mask, output.visit_counts, -1), axis=-1).astype(jnp.int32)
        output = output.replace(action=greedy)
    temp = temperature_schedule(state.length, temperature, temperature_drop_move, final_temperature)
    action = select_action(output, legal_mask, temp, action_key)

    record = Records(
        observation=observation,
        legal_mask=legal_mask,
        policy=output.action_weights.astype(jnp.float32),
        player=players.astype(jnp.int8),
        value=jnp.zeros((num_games,), jnp.float32),
        score_margin=jnp.zeros((num_games,), jnp.float32),
        exact=jnp.zeros((num_games,), bool),
    )
    trajectory = jax.tree.map(lambda stored, new: set_each(stored, new, state.length, mode="drop"),
                              state.trajectory, record)
    length = state.length + 1

    next_games = jax.vmap(game.step)(games, action)
    done = next_games.terminated  # [B]
    played = PlayedMoves(games=games, record=record, index=state.length, done=done, rewards=next_games.rewards,
                         margins=final_margins(game, next_games))

    fresh = jax.vmap(game.init)(jax.random.split(reset_key, num_games))
    new_games = jax.tree.map(
        lambda f, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), f, n), fresh, next_games
    )
    new_state = state.replace(games=new_games, trajectory=trajectory, length=jnp.where(done, 0, length))

    first_player = trajectory.player[:, 0].astype(jnp.int32)
    outcome_first = jnp.take_along_axis(next_games.rewards, first_player[:, None], axis=1)[:, 0]
    target = jnp.where(legal_mask, output.action_weights, 0.0)
    entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(jnp.maximum(target, 1e-30)), 0.0), axis=-1)
    stats = SelfPlayStats(
        moves=jnp.asarray(num_games, jnp.int32),
        games_finished=jnp.sum(done, dtype=jnp.int32),
        finished_game_length=jnp.sum(jnp.where(done, length, 0), dtype=jnp.int32),
        draws=jnp.sum(done & jnp.all(next_games.rewards == 0, axis=-1), dtype=jnp.int32),
        first_player_outcome=jnp.sum(jnp.where(done, outcome_first, 0.0)),
        policy_target_entropy=jnp.sum(entropy),
        root_value=jnp.sum(output.root_value.astype(jnp.float32)),
        search_passes=jnp.sum(output.passes),
    )
    return constrain(new_state), played, stats, jnp.max(output.least_tier)


def play_moves(game: Game, evaluate: search_lib.Evaluator, search_config: search_lib.SearchConfig,
               state: SelfPlayState, key: jax.Array, num_moves: int, *, temperature: float = 1.0,
               temperature_drop_move: int = 0, final_temperature: float = 0.0,
               constrain: Callable[[Any], Any] = lambda x: x):
    """``num_moves`` moves in every game (a ``lax.scan``). Returns ``(state, played, stats)``:
    the moves as :class:`PlayedMoves` ``[M, B]`` and ``stats`` summed over them.

    Each move's search starts at the afterstate tier the previous one needed (the first at
    0): the games move in step, so the room their lists need changes little from one move
    to the next, and a search seldom runs first at a tier too small for it."""

    def body(carry, move_key):
        state, start_tier = carry
        state, played, stats, least_tier = play_move(
            game, evaluate, search_config, state, move_key, temperature=temperature,
            temperature_drop_move=temperature_drop_move, final_temperature=final_temperature, constrain=constrain,
            start_tier=start_tier)
        return (state, least_tier), (played, stats)

    (state, _), (played, stats) = jax.lax.scan(body, (state, jnp.zeros((), jnp.int32)),
                                               jax.random.split(key, num_moves))
    return state, played, jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)


def end_moves(done: jax.Array) -> jax.Array:
    """``int32[M, B]`` for each move of ``done`` (``bool[M, B]``) the move at which its game
    ended (``M``: still running)."""
    num_moves = done.shape[0]
    end = jnp.where(done, jnp.arange(num_moves, dtype=jnp.int32)[:, None], num_moves)
    return jax.lax.cummin(end, axis=0, reverse=True)


def insert_finished(game: Game, replay: ReplayBuffer, start: SelfPlayState, played: PlayedMoves) -> ReplayBuffer:
    """Append to ``replay`` the labelled records of every game that ended during ``played``
    (``[M, B]``), as if each had been appended the moment it ended: by move, then by slot,
    each game's records in order (those its slot held in ``start``'s trajectory, then
    those played)."""
    num_moves, num_games = played.done.shape
    max_length = start.trajectory.player.shape[1]
    end = end_moves(played.done)
    slots = jnp.arange(num_games)
    at_end = lambda x, end: x[jnp.minimum(end, num_moves - 1), slots]  # noqa: E731  x [M, B, ...] at each slot's end
    # Where each finished game starts in the order of insertion: the records of the games before it.
    game_length = jnp.where(played.done, played.index + 1, 0).reshape(-1)
    before = (jnp.cumsum(game_length) - game_length).reshape(num_moves, num_games)

    # The records played here, of the games that ended.
    played_records = label(game, played.record, at_end(played.rewards, end), at_end(played.margins, end))
    played_rank = at_end(before, end) + played.index
    played_valid = end < num_moves
    # The records held since an earlier iteration, of the game each slot was playing at the start.
    first_end = end[0]  # [B]
    columns = jnp.arange(max_length)[None, :]
    carried = label(game, start.trajectory, at_end(played.rewards, first_end)[:, None, :],
                    at_end(played.margins, first_end)[:, None, :])
    carried_rank = at_end(before, first_end)[:, None] + columns
    carried_valid = (first_end < num_moves)[:, None] & (columns < start.length[:, None])

    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    records = jax.tree.map(lambda a, b: jnp.concatenate([flat(a), flat(b)]), carried, played_records)
    rank = jnp.concatenate([flat(carried_rank), flat(played_rank)])
    valid = jnp.concatenate([flat(carried_valid), flat(played_valid)])
    return replay_lib.insert(replay, records, valid, rank)
