"""Information-set fair Monte Carlo tree search with mctx.

For each of ``B`` decisions, ``K`` full worlds are drawn with
``game.sample_world(state, state.current_player, key)`` (determinizations
consistent with what the mover knows), the ``B * K`` worlds are searched in one
batched mctx call, and the ``K`` root results of each decision are combined. The
true hidden cards never enter the tree.

Inside the tree the embedding is the (sampled, full-information) game state and
the recurrent function steps the engine. Signs follow mctx's convention for two
alternating players:

* ``reward`` of the edge ``parent --a--> child`` is the child's final outcome for
  the player who moved at ``parent`` (0 while the game goes on, 0 below a finished
  game);
* ``discount`` is ``-1`` when the player to move changes (always, in Beasty Bar),
  ``+1`` if the same player moves again, and ``0`` once the game is over, so
  ``Q(parent, a) = reward + discount * V(child)`` is always in the parent's mover's
  frame;
* ``value`` of a node is for its own player to move, and ``0`` at finished games
  (the outcome was already paid as the reward).

Illegal actions are masked at the root (``invalid_actions``) and at every depth
(the prior logits returned by the recurrent function give them zero probability);
a finished game, which has no legal action, gets uniform logits so every softmax
stays finite.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import chex
import jax
import jax.numpy as jnp
import mctx

from beastybar_jax.games import tracing
from beastybar_jax.games.base import Game
from beastybar_jax.network import precast
from beastybar_jax.search import mctx_patch
from beastybar_jax.config.search import DEPTH_MARGIN, SearchConfig

# Every search built here is traced with mctx's loop replaced (bitwise the same
# results, without tree-sized copies or, on a GPU, host round trips): see mctx_patch.
mctx_patch.install()

Evaluator = Callable[..., tuple[jax.Array, jax.Array]]
"""``evaluate(states[N]) -> (logits float32[N, A], value float32[N] in [-1, 1])``,
both for each state's player to move. Must be jittable."""


@chex.dataclass(frozen=True)
class SearchOutput:
    """Search results for ``B`` decisions.

    Attributes:
      action: ``int32[B]`` the search's choice, legal whenever a legal action exists
        (0 for a finished game).
      action_weights: ``float32[B, A]`` policy target: mean of the ``K`` worlds' root
        policies, zero on illegal actions, summing to 1 (all zero for a finished game).
      visit_counts: ``int32[B, A]`` root visits summed over the ``K`` worlds (zero on
        illegal actions).
      root_value: ``float32[B]`` search value for the player to move, mean over worlds.
      action_values: ``float32[B, A]`` each action's Q-value at the root for the player
        to move, averaged over the worlds weighted by their visits (0 where never
        visited); for analysis (unused by training, so compiled away there).
      passes: ``int32[B]`` how many times the batch's search ran (the same in every row):
        1, plus one for each later afterstate tier it was run again at because some
        evaluation's rows did not fit (``NetworkEvaluator.tiers``).
      least_tier: ``int32[B]`` the first tier whose rows would have held every evaluation
        of the search kept (the same in every row; 0 for an evaluator without tiers): a
        search of the batch's next positions can start there (``run_search``'s ``start_tier``).
    """

    action: chex.Array
    action_weights: chex.Array
    visit_counts: chex.Array
    root_value: chex.Array
    action_values: chex.Array = None
    passes: chex.Array = None
    least_tier: chex.Array = None


# The root's evaluation and every simulation's are of [B * K] states: as one jitted function
# JAX traces and lowers the network (with afterstates, most of a search's program) once for
# both. ``traced_as`` keys the trace by how the GPU forms are set (games.tracing), which
# the network reads when it is traced.
@functools.partial(jax.jit, static_argnums=(0, 1))
def _apply(network, traced_as, params, observations):
    """``(logits, value)``, and with a tier the first tier whose rows hold the batch."""
    if network.afterstate_tier is None:
        out, sown = network.apply(params, observations), None
    else:  # the scorer sows the first tier whose rows hold the batch
        out, sown = network.apply(params, observations, mutable=["intermediates"])
    outputs = out.policy_logits.astype(jnp.float32), out.value.astype(jnp.float32)
    if sown is None:
        return outputs
    tiers = jax.tree.leaves(sown)
    return *outputs, jnp.max(jnp.stack(tiers)) if tiers else jnp.zeros((), jnp.int32)


@dataclasses.dataclass(frozen=True)
class NetworkEvaluator:
    """An :data:`Evaluator` that observes each state for its own player to move and applies
    ``network`` (a :class:`beastybar_jax.network.PolicyValueNet`) with ``params``.

    A network with the afterstate scorer may score a batch several ways (lists of the
    game's capacities in turn, then slots), each exact where its rows fit; the scorer
    picks with an ``nn.cond``, a host round trip on a GPU. :meth:`at_tier` gives an
    evaluator that scores one way only and also returns the first tier whose rows hold the
    whole batch (``(logits, value, least_tier int32[])``: where later than its own, the
    outputs are not the network's); :func:`run_search` uses it to choose once per search
    instead of once per simulation. The network is applied by one jitted function (the
    root's and the simulations' evaluations share its trace): called outside ``jit``, it
    compiles once per batch shape and computes what a compiled search computes."""

    game: Game
    network: Any
    params: Any
    tier: Optional[int] = None

    def __call__(self, states):
        observations = jax.vmap(self.game.observe)(states, states.current_player)
        network = self.network if self.tier is None else self.network.clone(afterstate_tier=self.tier)
        return _apply(network, (tracing.traced_for_gpu(), tracing.pallas_kernels()), self.params, observations)

    def tiers(self, batch_size: int) -> int:
        """How many ways a batch of ``batch_size`` states can be evaluated (1: one)."""
        tiers = getattr(self.network, "afterstate_tiers", None)
        return 1 if tiers is None else tiers(batch_size, self.game.observation_size)

    def at_tier(self, tier: int) -> "NetworkEvaluator":
        return dataclasses.replace(self, tier=tier)


def network_evaluator(game: Game, network, params, torso_kernel: Optional[str] = None) -> NetworkEvaluator:
    """The :class:`NetworkEvaluator` of ``network`` with ``params``, the weights that the
    network casts at every call cast once, here (:func:`beastybar_jax.network.precast`):
    not at every simulation; the network as applied for inference
    (``PolicyValueNet.for_inference(torso_kernel)``: by default the config's
    ``network.torso_kernel``)."""
    return NetworkEvaluator(game, network.for_inference(torso_kernel), precast(network, params, game.observation_size))


def uniform_evaluator(game: Game) -> Evaluator:
    """Zero logits and zero value: search driven by terminal outcomes only."""

    def evaluate(states):
        batch = states.current_player.shape[0]
        return jnp.zeros((batch, game.num_actions), jnp.float32), jnp.zeros((batch,), jnp.float32)

    return evaluate


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """``[N, A]`` logits with illegal actions at the most negative finite float.

    Legal logits are shifted so their max is 0; a row with no legal action (a
    finished game) becomes uniform (all zeros), so softmax never sees NaN.
    """
    logits = logits.astype(jnp.float32)
    max_legal = jnp.max(jnp.where(legal, logits, -jnp.inf), axis=-1, keepdims=True)
    max_legal = jnp.where(jnp.isfinite(max_legal), max_legal, 0.0)
    masked = jnp.where(legal, logits - max_legal, jnp.finfo(jnp.float32).min)
    return jnp.where(jnp.any(legal, axis=-1, keepdims=True), masked, 0.0)


def sample_worlds(game: Game, states, key: jax.Array, num_worlds: int):
    """``[B]`` states -> ``[B * num_worlds]`` worlds drawn with ``game.sample_world``
    for each state's player to move; world ``b * num_worlds + k`` belongs to state ``b``."""
    batch = states.current_player.shape[0]
    keys = jax.random.split(key, (batch, num_worlds))

    def worlds_of(state, state_keys):
        return jax.vmap(lambda k: game.sample_world(state, state.current_player, k))(state_keys)

    worlds = jax.vmap(worlds_of)(states, keys)
    return jax.tree.map(lambda x: x.reshape(batch * num_worlds, *x.shape[2:]), worlds)


def _evaluate_node(game: Game, evaluate: Evaluator, states):
    """Masked prior logits ``[N, A]`` and value ``[N]`` (0 at finished games), and with a
    one-tier evaluator (:meth:`NetworkEvaluator.at_tier`) the first tier whose rows hold
    the batch, else None."""
    logits, value, *least_tier = evaluate(states)
    if least_tier and not jnp.issubdtype(jnp.asarray(least_tier[0]).dtype, jnp.integer):
        raise TypeError(f"a one-tier evaluator returns (logits, value, least_tier int32[]): the first tier whose "
                        f"rows hold the batch; got a third output of dtype {jnp.asarray(least_tier[0]).dtype}")
    legal = jax.vmap(game.legal_action_mask)(states)
    value = jnp.where(states.terminated, 0.0, value.astype(jnp.float32))
    return mask_logits(logits, legal), value, (least_tier[0] if least_tier else None)


def make_recurrent_fn(game: Game, evaluate: Evaluator, flagged: bool = False):
    """The mctx ``recurrent_fn``: steps the engine from the embedded states. ``flagged``:
    the embeddings are ``(state, least_tier int8)``, the first tier whose rows held that
    node's evaluation (a one-tier evaluator's)."""

    def recurrent_fn(params, rng_key, action, parent):
        del params, rng_key  # the evaluator closes over its parameters
        if flagged:
            parent, _ = parent
        child = jax.vmap(game.step)(parent, action)
        prior_logits, value, least_tier = _evaluate_node(game, evaluate, child)
        mover = parent.current_player.astype(jnp.int32)
        reward = jnp.take_along_axis(child.rewards, mover[:, None], axis=-1)[:, 0]
        reward = jnp.where(parent.terminated, 0.0, reward).astype(jnp.float32)
        same_mover = child.current_player == parent.current_player
        discount = jnp.where(child.terminated | parent.terminated, 0.0, jnp.where(same_mover, 1.0, -1.0))
        output = mctx.RecurrentFnOutput(
            reward=reward, discount=discount.astype(jnp.float32), prior_logits=prior_logits, value=value)
        if flagged:
            return output, (child, jnp.broadcast_to(least_tier.astype(jnp.int8), child.current_player.shape))
        return output, child

    return recurrent_fn


def _policy_search(game: Game, evaluate: Evaluator, worlds, legal, key, config: SearchConfig, add_noise):
    """mctx's policy on the ``[N]`` worlds: ``(PolicyOutput, least_tier int32[])``, the
    first tier whose rows held every evaluation of a one-tier evaluator (0 for others)."""
    prior_logits, value, least_tier = _evaluate_node(game, evaluate, worlds)
    tiered = least_tier is not None
    recurrent_fn = make_recurrent_fn(game, evaluate, flagged=tiered)
    # With tiers, each node carries the first tier whose rows held its evaluation.
    embedding = (worlds, jnp.broadcast_to(least_tier.astype(jnp.int8), worlds.current_player.shape)) if tiered \
        else worlds
    root = mctx.RootFnOutput(prior_logits=prior_logits, value=value, embedding=embedding)
    max_depth = config.max_depth or game.max_game_length + DEPTH_MARGIN
    shared = dict(params=(), rng_key=key, root=root, recurrent_fn=recurrent_fn,
                  num_simulations=config.num_simulations, max_depth=max_depth, invalid_actions=~legal)
    if config.algorithm == "gumbel":
        policy_output = mctx.gumbel_muzero_policy(
            **shared,
            qtransform=functools.partial(
                mctx.qtransform_completed_by_mix_value,
                value_scale=float(config.value_scale),
                maxvisit_init=float(config.maxvisit_init)),
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=jnp.where(add_noise, float(config.gumbel_scale), 0.0),
        )
    else:
        policy_output = mctx.muzero_policy(
            **shared,
            dirichlet_alpha=float(config.dirichlet_alpha),
            dirichlet_fraction=jnp.where(add_noise, float(config.dirichlet_fraction), 0.0),
            pb_c_init=float(config.pb_c_init),
            pb_c_base=float(config.pb_c_base),
            temperature=jnp.where(add_noise, 1.0, 0.0),
        )
    if not tiered:
        return policy_output, jnp.zeros((), jnp.int32)
    # Every node of the tree was evaluated once (or its slot was never used).
    needed = policy_output.search_tree.embeddings[1]
    visited = policy_output.search_tree.node_visits > 0
    return policy_output, jnp.max(jnp.where(visited, needed, 0)).astype(jnp.int32)


def _policy_value(tree: mctx.Tree, weights: jax.Array, legal: jax.Array) -> jax.Array:
    """``[N]`` value of acting with the root policy ``weights`` ``[N, A]``.

    ``sum_a weights[a] * q[a]``, where actions never visited are completed, as in
    Gumbel MuZero, by the mixed value (raw network value blended with the visited
    Q-values). For PUCT the weights are the visit frequencies, so this is close to
    the root's mean backed-up value; for Gumbel it is the value of the improved
    policy rather than the average over sequential halving's forced visits to
    poor actions.
    """
    root = jnp.full(weights.shape[:1], tree.ROOT_INDEX)
    qvalues = tree.qvalues(root)  # [N, A]
    visits = tree.children_visits[:, tree.ROOT_INDEX]
    visited = (visits > 0) & legal
    prior = jax.nn.softmax(tree.children_prior_logits[:, tree.ROOT_INDEX], axis=-1)
    prior = jnp.maximum(prior, jnp.finfo(prior.dtype).tiny)
    visited_prior = jnp.sum(jnp.where(visited, prior, 0.0), axis=-1)
    visited_q = jnp.sum(jnp.where(visited, prior * qvalues, 0.0), axis=-1) / jnp.where(
        visited_prior > 0, visited_prior, 1.0)
    num_visits = jnp.sum(jnp.where(visited, visits, 0), axis=-1)
    mixed = (tree.raw_values[:, tree.ROOT_INDEX] + num_visits * visited_q) / (num_visits + 1)
    completed = jnp.where(visited, qvalues, mixed[:, None])
    return jnp.sum(jnp.where(legal, weights * completed, 0.0), axis=-1)


def run_search(game: Game, evaluate: Evaluator, states, key: jax.Array, config: SearchConfig,
               *, add_noise: bool = True, start_tier=0) -> SearchOutput:
    """Search ``K = config.num_determinizations`` sampled worlds per state and combine.

    Args:
      game: the game's functions (``beastybar_jax.games.beastybar.BEASTYBAR``).
      evaluate: batched states ``[N]`` -> (logits ``[N, A]``, value ``[N]``), e.g.
        :func:`network_evaluator`.
      states: batched ``[B]`` true states; only ``sample_world`` for the mover sees them.
      key: PRNG key.
      config: the :class:`SearchConfig`.
      add_noise: exploration for self-play. ``False`` gives evaluation play: no
        Dirichlet noise and greedy visit counts (PUCT), ``gumbel_scale=0`` (Gumbel),
        and argmax of the combined policy for ``K > 1``. May be a traced bool, so one
        compiled function serves both.
      start_tier: with an evaluator that has tiers (an afterstate network's lists of
        growing room, :class:`NetworkEvaluator`), the first to search at: an ``int`` or an
        ``int32`` array, its largest (a previous search's ``least_tier``), clipped to the last.

    Returns:
      :class:`SearchOutput` with ``[B]`` / ``[B, A]`` fields.

    The combination over worlds: ``action_weights`` is the mean of the worlds' root
    policies renormalised on legal actions, ``visit_counts`` their sum and
    ``root_value`` the mean of the worlds' policy values (``sum_a pi(a) Q(a)``,
    unvisited actions completed by the mixed value). With ``K == 1`` the action is
    mctx's; with ``K > 1`` it is drawn from the combined ``action_weights``
    (Gumbel-max, scale ``gumbel_scale`` for Gumbel, 1 for PUCT) when ``add_noise``,
    else their argmax. A finished game gets action 0 and all-zero weights, visits
    and value.

    With tiers, the whole search runs at ``start_tier`` and again at each next tier while
    some evaluation's rows did not fit; each tier is exact where its rows fit. The choice
    is made once per search, outside its simulation loop (a ``cond`` inside would stop
    the GPU for the host every simulation).
    """
    if states.current_player.ndim != 1:
        raise ValueError(f"run_search takes a batch of states [B]; got current_player of shape "
                         f"{states.current_player.shape} (one state: jax.tree.map(lambda x: x[None], state))")
    batch = states.current_player.shape[0]
    world_key, search_key, action_key = jax.random.split(key, 3)

    worlds = sample_worlds(game, states, world_key, config.num_determinizations)  # [B*K]
    legal = jax.vmap(game.legal_action_mask)(worlds)  # [B*K, A]
    tiers = evaluate.tiers(batch * config.num_determinizations) if hasattr(evaluate, "tiers") else 1

    def search(evaluate):
        policy_output, least_tier = _policy_search(game, evaluate, worlds, legal, search_key, config, add_noise)
        return _combined(policy_output, legal, batch, config, add_noise, action_key), least_tier

    if tiers == 1:
        output, least_tier = search(evaluate)
        passes = jnp.ones((), jnp.int32)
    else:
        start = jnp.clip(jnp.max(jnp.asarray(start_tier, jnp.int32)), 0, tiers - 1)
        output = _no_output(batch, game.num_actions)
        least_tier, passes, done = jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), bool)
        for tier in range(tiers):  # each search once in the program
            run = ~done & (tier >= start)
            output, least_tier = jax.lax.cond(run, functools.partial(search, evaluate.at_tier(tier)),
                                              lambda kept=(output, least_tier): kept)
            passes = passes + run.astype(jnp.int32)
            done = done | (run & (least_tier <= tier))
    return output.replace(passes=jnp.broadcast_to(passes, (batch,)),
                          least_tier=jnp.broadcast_to(least_tier, (batch,)))


def _no_output(batch: int, num_actions: int) -> SearchOutput:
    """A :class:`SearchOutput` of zeros (the shapes of one before a search ran)."""
    return SearchOutput(action=jnp.zeros((batch,), jnp.int32),
                        action_weights=jnp.zeros((batch, num_actions), jnp.float32),
                        visit_counts=jnp.zeros((batch, num_actions), jnp.int32),
                        root_value=jnp.zeros((batch,), jnp.float32),
                        action_values=jnp.zeros((batch, num_actions), jnp.float32))


def _combined(policy_output: mctx.PolicyOutput, legal: jax.Array, batch: int, config: SearchConfig, add_noise,
              action_key: jax.Array) -> SearchOutput:
    """The ``K`` worlds' search of each decision combined at the root (:func:`run_search`)."""
    num_worlds, num_actions = config.num_determinizations, legal.shape[-1]
    summary = policy_output.search_tree.summary()

    # Combine the K worlds of each decision at the root.
    legal_any = jnp.any(legal.reshape(batch, num_worlds, num_actions), axis=1)  # [B, A]
    weights = jnp.mean(policy_output.action_weights.reshape(batch, num_worlds, num_actions), axis=1)
    weights = jnp.where(legal_any, weights, 0.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    weights = jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), 0.0)
    visit_counts = jnp.sum(summary.visit_counts.reshape(batch, num_worlds, num_actions), axis=1)
    world_visits = summary.visit_counts.reshape(batch, num_worlds, num_actions).astype(jnp.float32)
    world_q = policy_output.search_tree.qvalues(jnp.full(batch * num_worlds, policy_output.search_tree.ROOT_INDEX))
    q_sum = jnp.sum(world_visits * world_q.reshape(batch, num_worlds, num_actions), axis=1)
    action_values = jnp.where(visit_counts > 0, q_sum / jnp.maximum(visit_counts, 1), 0.0)
    # A finished game has no legal action, yet mctx still spends its simulations
    # on action 0; those visits mean nothing.
    visit_counts = jnp.where(legal_any, visit_counts, 0)
    world_values = _policy_value(policy_output.search_tree, policy_output.action_weights, legal)
    root_value = jnp.mean(world_values.reshape(batch, num_worlds), axis=1)

    if num_worlds == 1:
        action = policy_output.action
    else:
        scores = jnp.log(jnp.maximum(weights, jnp.finfo(jnp.float32).tiny))
        noise_scale = float(config.gumbel_scale) if config.algorithm == "gumbel" else 1.0
        noise_scale = jnp.where(add_noise, noise_scale, 0.0)
        scores = scores + noise_scale * jax.random.gumbel(action_key, scores.shape)
        action = jnp.argmax(jnp.where(legal_any, scores, -jnp.inf), axis=-1)

    return SearchOutput(
        action=action.astype(jnp.int32),
        action_weights=weights.astype(jnp.float32),
        visit_counts=visit_counts.astype(jnp.int32),
        root_value=root_value.astype(jnp.float32),
        action_values=jnp.where(legal_any, action_values, 0.0).astype(jnp.float32),
    )
