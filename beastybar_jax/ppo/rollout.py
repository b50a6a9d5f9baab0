"""Rollouts: ``B`` games advanced ``T`` moves side by side, one ``lax.scan`` over moves.

Every step of the scan is one move in every game slot, made by whoever is to move
there: the learner (the current policy network) or the slot's opponent. Each slot
always faces the same kind of opponent (the static split of
:meth:`~beastybar_jax.config.ppo.PPOConfig.opponent_slots`):

- ``self``: the learner holds every seat; every move is a learner decision;
- ``pool``: the slots are cut into ``pool_size`` equal groups, group ``g`` playing
  snapshot ``g`` of the device-resident ring of past parameters (one batched forward
  pass per group, ``vmap`` over the ring), sampling from its policy;
- an agents registry spec (``heuristic``, ``checkpoint:<run>``, ``mcts-16``...):
  ``batch_act(agent)`` over that kind's slots.

Against pool and registry opponents the learner's seat is drawn at random for each
new game. The learner sees only ``game.observe(state, mover)`` and the legal mask
(:func:`policy_step` takes nothing else), so it never uses cards its player cannot
know; registry agents keep the same contract.

A game that ends restarts in the same step with ``game.init`` (and a new seat), so
every slot plays a live game at every step, and games in progress carry over to the
next iteration. The games a slot may restart with are dealt for every step at once
before the scan, and the statistics summed after it from what each step records: the
scan's body is the moves alone (fewer kernels a step on a GPU), with the same keys,
so the same games. Every move is recorded (``[T, B]`` :class:`Transitions`) with who
made it; :func:`beastybar_jax.ppo.loss.advantages` then follows each seat's own
decisions. Nothing here is specific to Beasty Bar.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.agents.base import batch_act
from beastybar_jax.games.base import Game
from beastybar_jax.config.ppo import POOL, SELF, PPOConfig
from beastybar_jax.network import precast

MASKED_LOGIT = -1e9  # illegal actions' logit: exp() underflows to exactly 0 in float32


@chex.dataclass(frozen=True)
class Games:
    """The ``B`` games in progress.

    Attributes:
      states: the game states, batched ``[B]``; never finished (a game that ends is
        replaced at once).
      learner_seat: ``int32[B]`` the learner's seat in slots facing a frozen opponent
        (pool or registry agent); ignored in self-play slots, where every seat is the learner's.
      length: ``int32[B]`` moves played in each slot's current game.
    """

    states: Any
    learner_seat: chex.Array
    length: chex.Array


@chex.dataclass(frozen=True)
class Transitions:
    """Every move of a rollout, ``[T, B]`` (``P`` players, ``O`` observation floats, ``A`` actions).

    Attributes:
      observation: ``float32[T, B, O]`` what the mover saw.
      legal_mask: ``bool[T, B, A]`` the mover's legal actions.
      action: ``int32[T, B]`` the move made.
      log_prob: ``float32[T, B]`` log-probability of ``action`` under the learner's
        policy that sampled it (meaningful where ``learner``).
      value: ``float32[T, B]`` the learner's value of the position for the mover.
      player: ``int32[T, B]`` the mover's seat.
      learner: ``bool[T, B]`` the move was a learner decision (trained on).
      done: ``bool[T, B]`` the game ended with this move (the slot restarted).
      outcome: ``float32[T, B, P]`` the final outcome per seat where ``done``, else 0.
      margin: ``float32[T, B, P]`` the final ``score_margin / game.score_margin_scale`` per seat
        where ``done`` (the network's aux target, as in AlphaZero), else 0.
    """

    observation: chex.Array
    legal_mask: chex.Array
    action: chex.Array
    log_prob: chex.Array
    value: chex.Array
    player: chex.Array
    learner: chex.Array
    done: chex.Array
    outcome: chex.Array
    margin: chex.Array


@chex.dataclass(frozen=True)
class RolloutStats:
    """Totals over one rollout (scalars, and ``[K]`` per opponent kind of the slot split).

    Attributes:
      moves: moves played (``B`` per step).
      learner_moves: learner decisions among them.
      games_finished: games that ended.
      finished_game_length: summed length (moves) of the games that ended.
      draws: finished games that were drawn.
      games_by_kind: ``int32[K]`` finished games per opponent kind.
      learner_wins_by_kind: ``int32[K]`` of those, won by the learner (0 for ``self``).
      learner_outcome_by_kind: ``float32[K]`` summed learner outcome (+1 / 0 / -1; 0 for ``self``).
    """

    moves: chex.Array
    learner_moves: chex.Array
    games_finished: chex.Array
    finished_game_length: chex.Array
    draws: chex.Array
    games_by_kind: chex.Array
    learner_wins_by_kind: chex.Array
    learner_outcome_by_kind: chex.Array


@dataclasses.dataclass(frozen=True)
class OpponentSlots:
    """One kind of opponent and the contiguous game slots ``[start, start + count)`` it holds.

    ``act(states[n], observation[n, O], legal_mask[n, A], pool, key) -> int32[n]`` its
    moves in those slots (``pool``: the ring of snapshots, ``[pool_size, ...]``
    parameters); ``None`` for ``self`` (the learner moves for every seat)."""

    name: str
    start: int
    count: int
    act: Optional[Callable] = None


def masked_logits(logits: jax.Array, legal_mask: jax.Array) -> jax.Array:
    return jnp.where(legal_mask, logits.astype(jnp.float32), MASKED_LOGIT)


def policy_step(network, params, observation: jax.Array, legal_mask: jax.Array, key: jax.Array):
    """The learner's move from what the mover knows, and nothing else.

    Args:
      observation: ``float32[B, O]`` ``game.observe`` for each mover.
      legal_mask: ``bool[B, A]``.

    Returns:
      ``(action int32[B], log_prob float32[B], value float32[B])``: an action drawn from
      the policy's softmax over legal actions, its log-probability and the value head.
    """
    output = network.apply(params, observation)
    log_policy = jax.nn.log_softmax(masked_logits(output.policy_logits, legal_mask), axis=-1)
    action = jax.random.categorical(key, log_policy, axis=-1).astype(jnp.int32)
    log_prob = jnp.take_along_axis(log_policy, action[:, None], axis=-1)[:, 0]
    return action, log_prob, output.value.astype(jnp.float32)


def init_games(game: Game, key: jax.Array, num_games: int) -> Games:
    """``num_games`` new games, the learner's seat drawn for each."""
    deal_key, seat_key = jax.random.split(key)
    return Games(
        states=jax.vmap(game.init)(jax.random.split(deal_key, num_games)),
        learner_seat=jax.random.randint(seat_key, (num_games,), 0, game.num_players, jnp.int32),
        length=jnp.zeros((num_games,), jnp.int32),
    )


def make_opponents(config: PPOConfig, num_games: int, game: Game, network, make_agent: Callable[[str], Any]
                   ) -> tuple[OpponentSlots, ...]:
    """The slot split of ``config`` with each kind's ``act``.

    ``make_agent(spec) -> Agent`` builds registry agents (the caller passes the registry,
    so this module needs no agents import)."""
    slots, start = [], 0
    for name, count in config.opponent_slots(num_games):
        if name == SELF:
            act = None
        elif name == POOL:
            act = _pool_act(network, config.pool_size, count)
        else:
            act = _agent_act(make_agent(name), count)
        slots.append(OpponentSlots(name=name, start=start, count=count, act=act))
        start += count
    return tuple(slots)


def _pool_act(network, pool_size: int, count: int):
    group = count // pool_size

    def act(states, observation, legal_mask, pool, key):
        del states
        observation = observation.reshape((pool_size, group) + observation.shape[1:])
        legal_mask = legal_mask.reshape((pool_size, group) + legal_mask.shape[1:])
        logits = jax.vmap(lambda params, obs: network.apply(params, obs).policy_logits)(pool, observation)
        action = jax.random.categorical(key, masked_logits(logits, legal_mask), axis=-1)
        return action.reshape(count).astype(jnp.int32)

    return act


def _agent_act(agent, count: int):
    def act(states, observation, legal_mask, pool, key):
        del observation, legal_mask, pool
        return batch_act(agent)(states, jax.random.split(key, count)).astype(jnp.int32)

    return act


def play(game: Game, network, params, pool, opponents: tuple[OpponentSlots, ...], games: Games, key: jax.Array,
         num_moves: int, constrain: Callable[[Any], Any] = lambda x: x):
    """``num_moves`` moves in every game slot (a ``lax.scan``).

    Returns ``(games, transitions [T, B], stats)`` with ``stats`` summed over the moves."""
    num_games = games.length.shape[0]
    num_players = game.num_players
    kind_of_slot = np.concatenate([np.full(o.count, i, np.int32) for i, o in enumerate(opponents)])
    if kind_of_slot.shape[0] != num_games:
        raise ValueError(f"the opponent slots cover {kind_of_slot.shape[0]} games, the rollout has {num_games}")
    kind_one_hot = jnp.asarray(kind_of_slot[:, None] == np.arange(len(opponents))[None, :], jnp.float32)  # [B, K]
    self_slot = jnp.asarray(np.isin(kind_of_slot, [i for i, o in enumerate(opponents) if o.act is None]))
    seats = jnp.arange(num_players)
    # The weights the network casts at every call, cast once: not at every move.
    params = precast(network, params, game.observation_size)
    pool = None if pool is None else precast(network, pool, game.observation_size, stacked=True)
    inference = network.for_inference()  # never differentiated: an MLP torso as one kernel on a GPU

    def opponent_moves(states, observation, legal_mask, key):
        keys = jax.random.split(key, len(opponents))
        parts = []
        for o, k in zip(opponents, keys):
            if o.act is None:
                parts.append(jnp.zeros((o.count,), jnp.int32))
                continue
            part = lambda x: x[o.start:o.start + o.count]  # noqa: E731
            parts.append(o.act(jax.tree.map(part, states), part(observation), part(legal_mask), pool, k))
        return jnp.concatenate(parts)

    def one_move(games: Games, inputs):
        key, fresh = inputs
        policy_key, opponent_key, _ = jax.random.split(key, 3)  # the third dealt ``fresh`` before the scan
        states = games.states
        mover = states.current_player.astype(jnp.int32)
        observation = jax.vmap(game.observe)(states, mover)  # [B, O]
        legal_mask = jax.vmap(game.legal_action_mask)(states)  # [B, A]
        action, log_prob, value = policy_step(inference, params, observation, legal_mask, policy_key)
        learner = self_slot | (mover == games.learner_seat)
        action = jnp.where(learner, action, opponent_moves(states, observation, legal_mask, opponent_key))

        after = jax.vmap(game.step)(states, action)
        done = after.terminated
        length = games.length + 1
        outcome = after.rewards.astype(jnp.float32)  # [B, P], zeros unless done
        margin = jax.vmap(lambda s: jax.vmap(lambda p: game.score_margin(s, p))(seats))(after)
        margin = jnp.where(done[:, None], margin.astype(jnp.float32) / game.score_margin_scale, 0.0)

        restart = lambda new, old: jnp.where(done.reshape((-1,) + (1,) * (old.ndim - 1)), new, old)  # noqa: E731
        next_games = Games(states=jax.tree.map(restart, fresh.states, after),
                           learner_seat=restart(fresh.learner_seat, games.learner_seat),
                           length=jnp.where(done, 0, length))
        record = Transitions(observation=observation, legal_mask=legal_mask, action=action, log_prob=log_prob,
                             value=value, player=mover, learner=learner, done=done, outcome=outcome, margin=margin)
        return constrain(next_games), (record, (length, games.learner_seat))

    keys = jax.random.split(key, num_moves)
    fresh = jax.vmap(lambda k: init_games(game, jax.random.split(k, 3)[2], num_games))(keys)  # [T, B]
    games, (transitions, (length, learner_seat)) = jax.lax.scan(one_move, games, (keys, fresh))
    return games, transitions, _stats(transitions, length, learner_seat, kind_one_hot, self_slot, num_players)


def _stats(transitions: Transitions, length, learner_seat, kind_one_hot, self_slot, num_players) -> RolloutStats:
    """:class:`RolloutStats` of a rollout's ``[T, B]`` records (``length``: moves into each
    slot's game after the step; ``learner_seat``: the learner's seat during it)."""
    done, outcome = transitions.done, transitions.outcome
    seats = jnp.arange(num_players)
    learner_outcome = jnp.sum(jnp.where(seats == learner_seat[..., None], outcome, 0.0), axis=-1)  # [T, B]
    counted = done & ~self_slot
    by_kind = lambda x: jnp.sum(kind_one_hot * jnp.sum(x.astype(jnp.float32), axis=0)[:, None], axis=0)  # noqa: E731
    return RolloutStats(
        moves=jnp.asarray(done.size, jnp.int32),
        learner_moves=jnp.sum(transitions.learner, dtype=jnp.int32),
        games_finished=jnp.sum(done, dtype=jnp.int32),
        finished_game_length=jnp.sum(jnp.where(done, length, 0), dtype=jnp.int32),
        draws=jnp.sum(done & jnp.all(outcome == 0, axis=-1), dtype=jnp.int32),
        games_by_kind=by_kind(done).astype(jnp.int32),
        learner_wins_by_kind=by_kind(counted & (learner_outcome > 0)).astype(jnp.int32),
        learner_outcome_by_kind=by_kind(jnp.where(counted, learner_outcome, 0.0)),
    )

