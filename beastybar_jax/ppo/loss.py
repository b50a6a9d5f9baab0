"""PPO's targets and loss: advantages along each seat's own decisions, then the clipped
policy loss, the value loss and the entropy bonus.

Two players, alternating moves, one outcome at the end. A learner's trajectory is its
own decisions in one game; the opponent's moves between two of them are part of the
environment (they are never trained on unless the opponent is the learner itself, in
self-play, where each seat is a trajectory of its own). For a decision ``t`` of seat
``p`` whose next decision of ``p`` in the same game is ``t'``:

    delta_t = r_t + gamma * V(t') - V(t)        A_t = delta_t + gamma * lambda * A_t'

where ``V`` is the network's value at ``p``'s own decisions (the expected outcome for the
player to move, from ``p``'s observation), and ``r_t = 0``. When the game ends before
``p`` decides again (whoever made the last move), ``r_t`` is ``p``'s final outcome
(+1 / 0 / -1, ``state.rewards[p]``: the sign is each seat's own, so no negation is ever
needed) and ``V(t') = A_t' = 0``. Discounting counts the learner's decisions, not the
opponent's moves.

Truncation: a decision whose successor (the seat's next decision or the game's end)
lies beyond the rollout cannot be given an advantage from observed data; it gets
weight 0 in the loss, and its value bootstraps the decision before it (the
standard truncated lambda-return). The game itself carries over to the next
iteration, whose decisions are trained normally. So a seat's trajectory never mixes
two games, never uses a value estimated for the opponent's turn, and every trained
decision's target uses only values at that seat's own turns and real outcomes.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from beastybar_jax.config.ppo import PPOConfig
from beastybar_jax.ppo.rollout import Transitions, masked_logits


@chex.dataclass(frozen=True)
class Targets:
    """What the learner fits, ``[T, B]``.

    Attributes:
      advantage: GAE advantage of each decision (0 where ``weight`` is 0).
      returns: the lambda-return, ``advantage + value``: the value head's target.
      weight: ``float32`` 1 for learner decisions with a known successor, else 0.
      aux_target: the final score margin / 10 for the decision's player, where the
        decision's game ended within the rollout.
      aux_weight: ``float32`` 1 where ``aux_target`` is known and ``weight`` is 1.
    """

    advantage: chex.Array
    returns: chex.Array
    weight: chex.Array
    aux_target: chex.Array
    aux_weight: chex.Array


@chex.dataclass(frozen=True)
class Batch:
    """Rows of a rollout for one optimizer step (``[N]`` leading axis)."""

    observation: chex.Array
    legal_mask: chex.Array
    action: chex.Array
    log_prob: chex.Array
    value: chex.Array
    advantage: chex.Array
    returns: chex.Array
    weight: chex.Array
    aux_target: chex.Array
    aux_weight: chex.Array


def advantages(transitions: Transitions, gamma: float, gae_lambda: float) -> Targets:
    """GAE along each seat's own decisions, one reverse ``lax.scan`` over the ``T`` moves
    with a carry per (game slot, seat). See the module docstring for the conventions."""
    num_players = transitions.outcome.shape[-1]
    batch = transitions.value.shape[1]
    seats = jnp.arange(num_players)

    def backward(carry, t: Transitions):
        next_value, next_advantage, reward, has_successor, end_margin, end_seen = carry  # each [B, P]
        # This move ended the game: for every seat, what follows is the outcome.
        done = t.done[:, None]
        next_value = jnp.where(done, 0.0, next_value)
        next_advantage = jnp.where(done, 0.0, next_advantage)
        reward = jnp.where(done, t.outcome, reward)
        has_successor = has_successor | done
        end_margin = jnp.where(done, t.margin, end_margin)
        end_seen = end_seen | done

        mine = (seats[None, :] == t.player[:, None])  # [B, P]: the mover's seat
        pick = lambda x: jnp.sum(jnp.where(mine, x, 0), axis=1)  # noqa: E731
        known = pick(has_successor.astype(jnp.int32)) > 0
        delta = pick(reward) + gamma * pick(next_value) - t.value
        decision = t.learner
        advantage = jnp.where(decision & known, delta + gamma * gae_lambda * pick(next_advantage), 0.0)
        weight = (decision & known).astype(jnp.float32)
        aux_known = pick(end_seen.astype(jnp.int32)) > 0
        out = Targets(advantage=advantage, returns=advantage + t.value, weight=weight,
                      aux_target=pick(end_margin), aux_weight=weight * aux_known.astype(jnp.float32))

        # A learner decision becomes its seat's successor for the decisions before it.
        update = mine & decision[:, None]
        carry = (jnp.where(update, t.value[:, None], next_value),
                 jnp.where(update, advantage[:, None], next_advantage),
                 jnp.where(update, 0.0, reward),
                 has_successor | update,
                 end_margin, end_seen)
        return carry, out

    zeros = jnp.zeros((batch, num_players), jnp.float32)
    false = jnp.zeros((batch, num_players), bool)
    _, targets = jax.lax.scan(backward, (zeros, zeros, zeros, false, zeros, false), transitions, reverse=True)
    return targets


def _weighted_mean(x, weight, count):
    return jnp.sum(weight * x) / count


def loss_fn(params, network, batch: Batch, config: PPOConfig, aux_score_head: bool = True):
    """Clipped policy loss + ``value_loss_weight`` x value MSE - ``entropy_weight`` x
    entropy (+ ``aux_loss_weight`` x score-margin MSE), means over the rows with weight
    that the network scored (``NetworkOutput.scored``; ``unscored_rows``: the share of the others).

    Returns ``(loss, metrics)``."""
    output = network.apply(params, batch.observation)
    log_policy = jax.nn.log_softmax(masked_logits(output.policy_logits, batch.legal_mask), axis=-1)
    log_prob = jnp.take_along_axis(log_policy, batch.action[:, None], axis=-1)[:, 0]
    weight, aux_rows = batch.weight, batch.aux_weight
    if output.scored is not None:
        weight, aux_rows = weight * output.scored, aux_rows * output.scored
    count = jnp.maximum(jnp.sum(weight), 1.0)

    advantage = batch.advantage
    if config.normalize_advantages:
        mean = _weighted_mean(advantage, weight, count)
        std = jnp.sqrt(_weighted_mean(jnp.square(advantage - mean), weight, count))
        advantage = (advantage - mean) / (std + 1e-8)
    log_ratio = jnp.where(weight > 0, log_prob - batch.log_prob, 0.0)
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - config.clip_epsilon, 1.0 + config.clip_epsilon)
    policy_loss = -_weighted_mean(jnp.minimum(ratio * advantage, clipped * advantage), weight, count)
    value_loss = _weighted_mean(jnp.square(output.value - batch.returns), weight, count)
    policy = jnp.exp(log_policy)
    entropy_per_row = -jnp.sum(jnp.where(batch.legal_mask, policy * log_policy, 0.0), axis=-1)
    entropy = _weighted_mean(entropy_per_row, weight, count)
    aux_count = jnp.maximum(jnp.sum(aux_rows), 1.0)
    aux_loss = _weighted_mean(jnp.square(output.score_margin - batch.aux_target), aux_rows, aux_count)
    aux_weight = config.aux_loss_weight if aux_score_head else 0.0

    loss = (policy_loss + config.value_loss_weight * value_loss - config.entropy_weight * entropy
            + aux_weight * aux_loss)
    metrics = dict(
        loss=loss, policy_loss=policy_loss, value_loss=value_loss, aux_loss=aux_loss, policy_entropy=entropy,
        approx_kl=_weighted_mean((ratio - 1.0) - log_ratio, weight, count),
        clip_fraction=_weighted_mean((jnp.abs(ratio - 1.0) > config.clip_epsilon).astype(jnp.float32), weight,
                                     count),
    )
    if output.scored is not None:
        metrics["unscored_rows"] = 1.0 - jnp.mean(output.scored.astype(jnp.float32))
    if not aux_score_head:  # a loss of weight 0: not part of ``loss``, so not reported
        del metrics["aux_loss"]
    return loss, metrics
