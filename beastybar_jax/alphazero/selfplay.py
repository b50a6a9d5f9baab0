"""Self-play: ``B`` games advanced side by side with search, one ``lax.scan`` over moves.

Each game slot keeps the records of the game it is playing (``[B, T, ...]`` with
``T = game.max_game_length``). A move is: observe, search (on worlds sampled for the
mover, inside :func:`beastybar_jax.search.run_search`), choose an action with the
temperature schedule, record, step. When a slot's game ends, its records are
labelled with the outcome (and final score margin) for each record's player and
inserted into the replay buffer with a validity mask, and the slot starts a new
game at once. Games still running when an iteration ends carry over to the next
one, so their positions are never inserted half-labelled.

Everything here takes the game as a parameter (:class:`beastybar_jax.game.Game`);
nothing is specific to Beasty Bar.
"""

from __future__ import annotations

from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp

from beastybar_jax.alphazero import replay as replay_lib
from beastybar_jax import search as search_lib
from beastybar_jax.games import Game
from beastybar_jax.alphazero.replay import Records, ReplayBuffer


@chex.dataclass(frozen=True)
class SelfPlayState:
    """The games in progress and what has been recorded of them.

    Attributes:
      games: the game states, batched ``[B]``.
      trajectory: :class:`~beastybar_jax.replay.Records` ``[B, T]``: the moves of each
        slot's current game so far (``value`` / ``score_margin`` are filled when it ends).
      length: ``int32[B]`` moves recorded in each slot's current game.
    """

    games: Any
    trajectory: Records
    length: chex.Array


@chex.dataclass(frozen=True)
class SelfPlayStats:
    """Totals over the moves of one :func:`play_moves` call (scalars).

    Attributes:
      moves: moves played (``B`` per move step).
      games_finished: games that ended.
      finished_game_length: summed length (moves) of the games that ended.
      positions_inserted: records inserted into the replay buffer.
      draws: finished games that were drawn.
      first_player_outcome: summed outcome of finished games for the player who moved first.
      policy_target_entropy: summed entropy of the search policy targets (divide by ``moves``).
      root_value: summed search root values (divide by ``moves``).
    """

    moves: chex.Array
    games_finished: chex.Array
    finished_game_length: chex.Array
    positions_inserted: chex.Array
    draws: chex.Array
    first_player_outcome: chex.Array
    policy_target_entropy: chex.Array
    root_value: chex.Array


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


def label_trajectory(game: Game, trajectory: Records, final_games) -> Records:
    """Fill ``value`` and ``score_margin`` of ``[B, T]`` records from the final states ``[B]``:
    the outcome and the final ``score_margin / game.score_margin_scale`` for each record's
    own player."""
    players = jnp.arange(game.num_players)
    margins = jax.vmap(lambda s: jax.vmap(lambda p: game.score_margin(s, p))(players))(final_games)  # [B, P]
    record_player = trajectory.player.astype(jnp.int32)  # [B, T]
    value = jnp.take_along_axis(final_games.rewards.astype(jnp.float32), record_player, axis=1)
    margin = jnp.take_along_axis(margins.astype(jnp.float32), record_player, axis=1) / game.score_margin_scale
    return trajectory.replace(value=value, score_margin=margin)


def play_move(game: Game, evaluate: search_lib.Evaluator, search_config: search_lib.SearchConfig,
              state: SelfPlayState, replay: ReplayBuffer, key: jax.Array, *,
              temperature: float, temperature_drop_move: int, final_temperature: float,
              constrain: Callable[[Any], Any] = lambda x: x):
    """One move in every game: search, act, record; finished games go to the buffer
    and restart. Returns ``(state, replay, stats)``."""
    games = state.games
    num_games, max_length = state.trajectory.player.shape
    search_key, action_key, reset_key = jax.random.split(key, 3)

    players = games.current_player
    observation = jax.vmap(game.observe)(games, players)  # [B, O]
    legal_mask = jax.vmap(game.legal_action_mask)(games)  # [B, A]
    output = search_lib.run_search(game, evaluate, games, search_key, search_config, add_noise=True)
    if search_config.algorithm != "gumbel":
        # mctx's PUCT self-play action is already drawn from the visits; temperature 0
        # means the most visited action (the Gumbel choice is already greedy given its noise).
        greedy = jnp.argmax(jnp.where(legal_mask, output.visit_counts, -1), axis=-1).astype(jnp.int32)
        output = output.replace(action=greedy)
    temp = temperature_schedule(state.length, temperature, temperature_drop_move, final_temperature)
    action = select_action(output, legal_mask, temp, action_key)

    record = replay_lib.Records(
        observation=observation,
        legal_mask=legal_mask,
        policy=output.action_weights.astype(jnp.float32),
        player=players.astype(jnp.int8),
        value=jnp.zeros((num_games,), jnp.float32),
        score_margin=jnp.zeros((num_games,), jnp.float32),
    )
    rows = jnp.arange(num_games)
    trajectory = jax.tree.map(
        lambda stored, new: stored.at[rows, state.length].set(new, mode="drop"), state.trajectory, record
    )
    length = state.length + 1

    next_games = jax.vmap(game.step)(games, action)
    done = next_games.terminated  # [B]

    labelled = label_trajectory(game, trajectory, next_games)
    valid = done[:, None] & (jnp.arange(max_length)[None, :] < length[:, None])  # [B, T]
    flat = jax.tree.map(lambda x: x.reshape((num_games * max_length,) + x.shape[2:]), labelled)
    replay = replay_lib.insert(replay, flat, valid.reshape(-1))

    fresh = jax.vmap(game.init)(jax.random.split(reset_key, num_games))
    new_games = jax.tree.map(
        lambda f, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), f, n), fresh, next_games
    )
    finished_length = jnp.where(done, length, 0)
    new_state = SelfPlayState(games=new_games, trajectory=trajectory, length=jnp.where(done, 0, length))

    first_player = trajectory.player[:, 0].astype(jnp.int32)
    outcome_first = jnp.take_along_axis(next_games.rewards, first_player[:, None], axis=1)[:, 0]
    target = jnp.where(legal_mask, output.action_weights, 0.0)
    entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(jnp.maximum(target, 1e-30)), 0.0), axis=-1)
    stats = SelfPlayStats(
        moves=jnp.asarray(num_games, jnp.int32),
        games_finished=jnp.sum(done, dtype=jnp.int32),
        finished_game_length=jnp.sum(finished_length, dtype=jnp.int32),
        positions_inserted=jnp.sum(valid, dtype=jnp.int32),
        draws=jnp.sum(done & jnp.all(next_games.rewards == 0, axis=-1), dtype=jnp.int32),
        first_player_outcome=jnp.sum(jnp.where(done, outcome_first, 0.0)),
        policy_target_entropy=jnp.sum(entropy),
        root_value=jnp.sum(output.root_value.astype(jnp.float32)),
    )
    return constrain(new_state), replay, stats


def play_moves(game: Game, evaluate: search_lib.Evaluator, search_config: search_lib.SearchConfig,
               state: SelfPlayState, replay: ReplayBuffer, key: jax.Array, num_moves: int, *,
               temperature: float = 1.0, temperature_drop_move: int = 0, final_temperature: float = 0.0,
               constrain: Callable[[Any], Any] = lambda x: x):
    """``num_moves`` moves in every game (a ``lax.scan``). Returns ``(state, replay, stats)``
    with ``stats`` summed over the moves."""

    def body(carry, move_key):
        state, replay = carry
        state, replay, stats = play_move(
            game, evaluate, search_config, state, replay, move_key,
            temperature=temperature, temperature_drop_move=temperature_drop_move,
            final_temperature=final_temperature, constrain=constrain,
        )
        return (state, replay), stats

    (state, replay), stats = jax.lax.scan(body, (state, replay), jax.random.split(key, num_moves))
    return state, replay, jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
