"""AlphaZero's loss: the network imitates the search's policy and predicts the outcome."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from beastybar_jax.config.alphazero import AlphaZeroConfig
from beastybar_jax.alphazero.replay import Records


def loss_fn(params, network, batch: Records, config: AlphaZeroConfig, aux_score_head: bool = True):
    """Policy cross-entropy to the search target + ``value_loss_weight`` x value MSE
    (+ ``aux_loss_weight`` x score-margin MSE when the aux head is on).

    Illegal actions are masked out of the policy's softmax, so the network is only
    asked to rank legal moves. The cross-entropy is a mean over ``batch`` weighted by
    ``exact_policy_weight`` where ``batch.exact`` (1 elsewhere). Rows the network did not
    score (``NetworkOutput.scored``) are left out of every mean (``unscored_rows``: their share). Returns
    ``(loss, metrics)``; ``policy_loss`` is that weighted mean.
    """
    output = network.apply(params, batch.observation)
    logits = jnp.where(batch.legal_mask, output.policy_logits, -1e9)
    log_policy = jax.nn.log_softmax(logits, axis=-1)
    cross_entropy = -jnp.sum(jnp.where(batch.legal_mask, batch.policy * log_policy, 0.0), axis=-1)  # [N]
    policy = jnp.exp(log_policy)
    entropy = -jnp.sum(jnp.where(batch.legal_mask, policy * log_policy, 0.0), axis=-1)  # [N]
    if output.scored is None:  # every row: plain means, so runs without afterstates reproduce bit for bit
        mean = jnp.mean
    else:
        rows = output.scored.astype(jnp.float32)
        mean = lambda x: jnp.sum(rows * x) / jnp.maximum(jnp.sum(rows), 1.0)  # noqa: E731
    if config.exact_policy_weight == 1.0:
        policy_loss = mean(cross_entropy)
    else:
        weight = jnp.where(batch.exact, config.exact_policy_weight, 1.0)
        if output.scored is not None:
            weight = weight * output.scored
        policy_loss = jnp.sum(weight * cross_entropy) / jnp.maximum(jnp.sum(weight), 1e-30)
    value_loss = mean(jnp.square(output.value - batch.value))
    aux_loss = mean(jnp.square(output.score_margin - batch.score_margin))
    aux_weight = config.aux_loss_weight if aux_score_head else 0.0
    loss = policy_loss + config.value_loss_weight * value_loss + aux_weight * aux_loss
    entropy = mean(entropy)
    metrics = dict(loss=loss, policy_loss=policy_loss, value_loss=value_loss, aux_loss=aux_loss,
                   policy_entropy=entropy)
    if output.scored is not None:
        metrics["unscored_rows"] = 1.0 - jnp.mean(output.scored.astype(jnp.float32))
    if not aux_score_head:  # a loss of weight 0: not part of ``loss``, so not reported
        del metrics["aux_loss"]
    return loss, metrics
