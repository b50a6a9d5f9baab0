"""Self-play: ``B`` games advanced side by side with search, one ``lax.scan`` over moves.

Each game slot keeps the records of the game it is playing (``[B, T, ...]`` with
``T = game.max_game_length``). A move is: observe, search (on worlds sampled for the
mover, inside :func:`beastybar_jax.search.run_search`), choose an action with the
temperature schedule, record, step. When a slot's game ends, its records are
labelled with the outcome (and final score margin) for each record's player and
inserted into the replay buffer with a validity mask, and the slot starts a new
game at once. Games still running when an iteration ends carry over to the next
one, so their positions are never inserted half-labelled.

Exact value targets (``alphazero.exact_value_targets``): every position played in an
iteration is handed, after the scan, to the game's solver (``Game.exact_values``) in
one batch; a solved position's value target becomes its exact result. Positions whose
game already ended (and was inserted) during the iteration are corrected in the
replay buffer, at the slots they went to; positions of games still running keep
their exact values beside the trajectory until their game is labelled.

Exact policy targets (``alphazero.exact_policy_targets``, with exact value targets):
the same batch also gives each solved position's result-keeping moves
(``Game.exact_actions``), and its policy target becomes the search's target restricted
to those moves (:func:`exact_policy_target`), written where its value target goes.

Everything here takes the game as a parameter (:class:`beastybar_jax.games.Game`);
nothing is specific to Beasty Bar.
"""

from __future__ import annotations

from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp

from beastybar_jax.alphazero import replay as replay_lib
from beastybar_jax import search as search_lib
from beastybar_jax.games.base import Game
from beastybar_jax.alphazero.replay import Records, ReplayBuffer


@chex.dataclass(frozen=True)
class SelfPlayState:
    """The games in progress and what has been recorded of them.

    Attributes:
      games: the game states, batched ``[B]``.
      trajectory: :class:`~beastybar_jax.alphazero.replay.Records` ``[B, T]``: the moves of each
        slot's current game so far (``value`` / ``score_margin`` are filled when it ends).
      length: ``int32[B]`` moves recorded in each slot's current game.
    """

    games: Any
    trajectory: Records
    length: chex.Array


@chex.dataclass(frozen=True)
class ExactSelfPlayState(SelfPlayState):
    """:class:`SelfPlayState` with exact value targets on: also the solver's values of
    positions recorded in games still running. (A subclass, not optional fields, so
    that the state of runs without exact targets, and their checkpoints, keep their
    structure.)

    Attributes:
      exact_value: ``float32[B, T]`` the solver's value of the recorded position, where
        ``exact_known``.
      exact_known: ``bool[B, T]``.
    """

    exact_value: chex.Array
    exact_known: chex.Array


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
      exact_targets: positions played whose value target is the solver's exact result
        (0 unless exact value targets are on).
    """

    moves: chex.Array
    games_finished: chex.Array
    finished_game_length: chex.Array
    positions_inserted: chex.Array
    draws: chex.Array
    first_player_outcome: chex.Array
    policy_target_entropy: chex.Array
    root_value: chex.Array
    exact_targets: chex.Array


@chex.dataclass(frozen=True)
class PlayedPositions:
    """What :func:`play_moves` needs to know, after its scan, about the position each
    game slot played at each move (exact value targets only). Leading axes ``[M, B]``
    after the scan.

    Attributes:
      games: the game states before the move.
      index: ``int32`` the position's index in its game's trajectory.
      done: ``bool`` the game ended with this move (and was inserted).
      first_slot: ``int32`` where a game that ended went in the replay ring: the slot of
        its first position (the others follow, modulo the capacity).
      first_count: ``int32`` the buffer's ``total_inserted`` counter for that position.
      policy: ``float32[A]`` the search's policy target of the position.
    """

    games: Any
    index: chex.Array
    done: chex.Array
    first_slot: chex.Array
    first_count: chex.Array
    policy: chex.Array


def init(game: Game, key: jax.Array, num_games: int, exact_value_targets: bool = False) -> SelfPlayState:
    """``num_games`` fresh games with empty records (and room for exact values)."""
    games = jax.vmap(game.init)(jax.random.split(key, num_games))
    shape = (num_games, game.max_game_length)
    state = SelfPlayState(
        games=games,
        trajectory=replay_lib.empty_records(shape, game.observation_size, game.num_actions),
        length=jnp.zeros((num_games,), jnp.int32),
    )
    if not exact_value_targets:
        return state
    return ExactSelfPlayState(**state, exact_value=jnp.zeros(shape, jnp.float32), exact_known=jnp.zeros(shape, bool))


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
    return _play_move(game, evaluate, search_config, state, replay, key, temperature=temperature,
                      temperature_drop_move=temperature_drop_move, final_temperature=final_temperature,
                      constrain=constrain)[:3]


def _play_move(game, evaluate, search_config, state: SelfPlayState, replay: ReplayBuffer, key, *,
               temperature, temperature_drop_move, final_temperature, constrain):
    """``play_move``, also returning the :class:`PlayedPositions` of this move (None
    unless exact value targets are on)."""
    exact = isinstance(state, ExactSelfPlayState)
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
        exact=jnp.zeros((num_games,), bool),
    )
    rows = jnp.arange(num_games)
    trajectory = jax.tree.map(
        lambda stored, new: stored.at[rows, state.length].set(new, mode="drop"), state.trajectory, record
    )
    length = state.length + 1

    next_games = jax.vmap(game.step)(games, action)
    done = next_games.terminated  # [B]

    labelled = label_trajectory(game, trajectory, next_games)
    if exact:
        labelled = labelled.replace(value=jnp.where(state.exact_known, state.exact_value, labelled.value),
                                    exact=state.exact_known)
    valid = done[:, None] & (jnp.arange(max_length)[None, :] < length[:, None])  # [B, T]
    flat = jax.tree.map(lambda x: x.reshape((num_games * max_length,) + x.shape[2:]), labelled)
    played = None
    if exact:
        # Valid records are packed row by row: a finished game's records follow those
        # of the finished games in the rows before it.
        row_count = jnp.sum(valid, axis=1, dtype=jnp.int32)
        before = jnp.cumsum(row_count) - row_count
        played = PlayedPositions(games=games, index=state.length, done=done,
                                 first_slot=(replay.write_index + before) % replay.capacity,
                                 first_count=replay.total_inserted + before,
                                 policy=record.policy)
    replay = replay_lib.insert(replay, flat, valid.reshape(-1))

    fresh = jax.vmap(game.init)(jax.random.split(reset_key, num_games))
    new_games = jax.tree.map(
        lambda f, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), f, n), fresh, next_games
    )
    finished_length = jnp.where(done, length, 0)
    new_state = state.replace(games=new_games, trajectory=trajectory, length=jnp.where(done, 0, length))
    if exact:
        new_state = new_state.replace(exact_known=jnp.where(done[:, None], False, state.exact_known))

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
        exact_targets=jnp.zeros((), jnp.int32),
    )
    return constrain(new_state), replay, stats, played


def exact_policy_target(search_policy: jax.Array, keeps: jax.Array, solved: jax.Array) -> jax.Array:
    """``float32[N, A]`` policy targets of solved positions: the search's target
    (``[N, A]``) restricted to the result-keeping moves ``keeps`` (``bool[N, A]``) and
    renormalized, or uniform over them where the search gave them no weight. The
    search's target where a position is not ``solved`` or no move is marked."""
    keeps = keeps & solved[:, None]
    kept = jnp.where(keeps, search_policy, 0.0)
    mass = jnp.sum(kept, axis=-1, keepdims=True)
    count = jnp.sum(keeps, axis=-1, keepdims=True)
    target = jnp.where(mass > 0, kept / jnp.maximum(mass, 1e-30), keeps / jnp.maximum(count, 1))
    return jnp.where(count > 0, target, search_policy).astype(jnp.float32)


def apply_exact_values(game: Game, state: ExactSelfPlayState, replay: ReplayBuffer, played: PlayedPositions,
                       budget: int = 0, exact_policy: bool = False):
    """Solve the positions played in the last ``M`` moves (``played``: ``[M, B]``) in one
    batch with ``game.exact_values`` and make each solved one's value target its exact
    result: in the replay buffer for games that ended (unless the ring has overwritten
    the record since), beside the trajectory for games still running. With
    ``exact_policy`` (``game.exact_actions``) its policy target also becomes
    :func:`exact_policy_target`. Returns ``(state, replay, number of positions solved)``."""
    num_moves, num_games = played.index.shape
    capacity = replay.capacity
    flat = jax.tree.map(lambda x: x.reshape((num_moves * num_games,) + x.shape[2:]), played.games)
    if exact_policy:
        solved, value, keeps = game.exact_actions(flat, budget)
        policy = exact_policy_target(played.policy.reshape(num_moves * num_games, -1), keeps, solved)
    else:
        solved, value = game.exact_values(flat, budget)
    solved = solved.reshape(num_moves, num_games)
    value = value.reshape(num_moves, num_games).astype(jnp.float32)

    # The move at which each position's game ended (num_moves: still running).
    end = jnp.where(played.done, jnp.arange(num_moves)[:, None], num_moves)
    end = jax.lax.cummin(end, axis=0, reverse=True)
    ended = end < num_moves
    rows = jnp.broadcast_to(jnp.arange(num_games)[None, :], end.shape)
    at_end = lambda x: x[jnp.minimum(end, num_moves - 1), rows]  # noqa: E731
    slot = (at_end(played.first_slot) + played.index) % capacity
    # Still in the ring: fewer than ``capacity`` records were inserted after it
    # (int32 counters wrap; their difference does not).
    inserted_since = replay.total_inserted - (at_end(played.first_count) + played.index)
    write = solved & ended & (inserted_since <= capacity)
    records = replay.records
    write_slots = jnp.where(write, slot, capacity).reshape(-1)
    records = records.replace(value=records.value.at[write_slots].set(value.reshape(-1), mode="drop"),
                              exact=records.exact.at[write_slots].set(True, mode="drop"))
    if exact_policy:
        records = records.replace(policy=records.policy.at[write_slots].set(policy, mode="drop"))
    replay = replay.replace(records=records)

    keep = solved & ~ended
    max_length = state.exact_value.shape[1]
    column = jnp.where(keep, played.index, max_length).reshape(-1)  # out of range: dropped
    state = state.replace(
        exact_value=state.exact_value.at[rows.reshape(-1), column].set(value.reshape(-1), mode="drop"),
        exact_known=state.exact_known.at[rows.reshape(-1), column].set(True, mode="drop"),
    )
    if exact_policy:
        trajectory = state.trajectory
        state = state.replace(trajectory=trajectory.replace(
            policy=trajectory.policy.at[rows.reshape(-1), column].set(policy, mode="drop")))
    return state, replay, jnp.sum(solved, dtype=jnp.int32)


def play_moves(game: Game, evaluate: search_lib.Evaluator, search_config: search_lib.SearchConfig,
               state: SelfPlayState, replay: ReplayBuffer, key: jax.Array, num_moves: int, *,
               temperature: float = 1.0, temperature_drop_move: int = 0, final_temperature: float = 0.0,
               constrain: Callable[[Any], Any] = lambda x: x, exact_value_budget: int = 0,
               exact_policy_targets: bool = False):
    """``num_moves`` moves in every game (a ``lax.scan``). Returns ``(state, replay, stats)``
    with ``stats`` summed over the moves. With a ``state`` made for exact value targets
    (``init(..., exact_value_targets=True)``) the positions played are then solved
    (:func:`apply_exact_values`, within ``exact_value_budget`` solver iterations;
    ``exact_policy_targets``: their policy targets too)."""

    def body(carry, move_key):
        state, replay = carry
        state, replay, stats, played = _play_move(
            game, evaluate, search_config, state, replay, move_key,
            temperature=temperature, temperature_drop_move=temperature_drop_move,
            final_temperature=final_temperature, constrain=constrain,
        )
        return (state, replay), (stats, played)

    (state, replay), (stats, played) = jax.lax.scan(body, (state, replay), jax.random.split(key, num_moves))
    stats = jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
    if played is not None:
        state, replay, exact_targets = apply_exact_values(game, state, replay, played, exact_value_budget,
                                                          exact_policy=exact_policy_targets)
        state = constrain(state)
        stats = stats.replace(exact_targets=exact_targets)
    return state, replay, stats
