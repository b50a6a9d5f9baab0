"""Agents that search or use a trained network: ``mcts-N`` and network agents.

``mcts-N`` is the network-free yardstick: the same information-set fair search as
training (``beastybar_jax.search.run_search``: worlds drawn with ``sample_world``
for the mover, never the true hidden cards) with ``N`` simulations, a uniform
prior and, as the value of a leaf, the outcome of one uniformly random playout
from it. Network agents play the trained policy's argmax over legal moves, or run
the same search with the network as evaluator.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax import search as search_lib
from beastybar_jax.agents.base import Agent, SearchSetup, random_best, uniform_choice
from beastybar_jax.games.base import Game
from beastybar_jax.config.search import SearchConfig


# Odd 32-bit multipliers for the state fingerprint (fixed, arbitrary).
_FINGERPRINT_MULTIPLIERS = np.random.default_rng(20261122).integers(1, 2**31, size=256, dtype=np.uint32) * 2 + 1


def state_fingerprint(state) -> jax.Array:
    """``uint32[]`` a hash of one state's arrays, to give each evaluated state its own
    playout randomness (the mctx evaluator receives states, not keys)."""
    leaves = [jnp.ravel(x).astype(jnp.int32).astype(jnp.uint32) for x in jax.tree.leaves(state)]
    flat = jnp.concatenate(leaves)
    multipliers = jnp.asarray(_FINGERPRINT_MULTIPLIERS[: flat.shape[0]])
    return jnp.sum(flat * multipliers, dtype=jnp.uint32)


def random_playout_value(game: Game, state, key: jax.Array) -> jax.Array:
    """``float32[]`` the outcome (+1/0/-1) for ``state``'s player to move after uniformly
    random legal moves to the end (``game.max_game_length`` steps of a ``lax.scan``; stepping a
    finished game changes nothing)."""
    player = state.current_player.astype(jnp.int32)

    def turn(s, k):
        return game.step(s, uniform_choice(game.legal_action_mask(s), k)), None

    final, _ = jax.lax.scan(turn, state, jax.random.split(key, game.max_game_length))
    return final.rewards[player].astype(jnp.float32)


def random_playout_evaluator(game: Game, key: jax.Array, num_playouts: int = 1) -> search_lib.Evaluator:
    """An evaluator with uniform prior logits and, as value, the mean outcome of
    ``num_playouts`` random playouts. Each state's playouts use
    ``fold_in(key, fingerprint(state))``, so different states (and different keys)
    get independent playouts."""

    def value_of(state):
        state_key = jax.random.fold_in(key, state_fingerprint(state))
        keys = jax.random.split(state_key, num_playouts)
        values = jax.vmap(lambda k: random_playout_value(game, state, k))(keys)
        return jnp.mean(values)

    def evaluate(states):
        batch = states.current_player.shape[0]
        return jnp.zeros((batch, game.num_actions), jnp.float32), jax.vmap(value_of)(states)

    return evaluate


def _search_one(game: Game, evaluate, config: SearchConfig, state, key):
    """The search's action for one unbatched state (a batch of one inside)."""
    batched = jax.tree.map(lambda x: x[None], state)
    return search_lib.run_search(game, evaluate, batched, key, config, add_noise=False).action[0]


def _search_batch(game: Game, evaluate, config: SearchConfig, states, keys):
    """The search's actions for states ``[B]``: one batched search (keyed by ``keys[0]``;
    each state gets its own worlds and Gumbel draws from it)."""
    return search_lib.run_search(game, evaluate, states, keys[0], config, add_noise=False).action


def mcts_agent(num_simulations: int, *, num_determinizations: int = 1, algorithm: str = "gumbel",
               num_playouts: int = 1, game: Game, name: str | None = None) -> Agent:
    """Search with ``num_simulations`` per world, ``num_determinizations`` worlds, a uniform
    prior and random-playout values; evaluation play (no exploration noise)."""
    config = SearchConfig(algorithm=algorithm, num_simulations=int(num_simulations),
                          num_determinizations=int(num_determinizations),
                          max_num_considered_actions=game.num_actions)

    def act(state, key):
        search_key, playout_key = jax.random.split(key)
        evaluate = random_playout_evaluator(game, playout_key, num_playouts)
        return _search_one(game, evaluate, config, state, search_key)

    def act_batch(states, keys):
        search_key, playout_key = jax.random.split(keys[0])
        evaluate = random_playout_evaluator(game, playout_key, num_playouts)
        return _search_batch(game, evaluate, config, states, search_key[None])

    setup = SearchSetup(lambda key: random_playout_evaluator(game, key, num_playouts), config,
                        num_playouts=int(num_playouts))
    return Agent(name or f"mcts-{num_simulations}", act, setup, act_batch, game=game.name)


def network_agent(network, params, *, search: SearchConfig | None = None, name: str = "network",
                  game: Game) -> Agent:
    """A trained network as an agent.

    Args:
      network: a ``PolicyValueNet`` (``network.apply(params, obs[B, O])``).
      params: its variables. May be traced (e.g. inside a jitted training step).
      search: ``None``: play the argmax of the policy logits over legal actions
        (ties at random). A ``SearchConfig``: run ``run_search`` with the network
        as evaluator, evaluation play (no noise).
      name: the agent's name in tables.

    Raises ``TypeError`` for a ``search`` that is not a ``SearchConfig`` (``search=32``
    failed later, deep in the first move).
    """
    if search is not None and not isinstance(search, SearchConfig):
        raise TypeError(f"network_agent's search is a SearchConfig (e.g. SearchConfig(num_simulations=32)) or "
                        f"None for the raw policy; got {search!r}")
    evaluate = search_lib.network_evaluator(game, network, params)
    setup = SearchSetup(lambda key: evaluate, search, learned_prior=True)
    if search is None:
        def act_batch(states, keys):
            observations = jax.vmap(game.observe)(states, states.current_player)
            logits = network.apply(params, observations).policy_logits.astype(jnp.float32)
            legal = jax.vmap(game.legal_action_mask)(states)
            return jax.vmap(lambda x, m, k: random_best(x, m, k, tolerance=0.0))(logits, legal, keys)

        def act(state, key):
            return act_batch(jax.tree.map(lambda x: x[None], state), key[None])[0]
    else:
        def act(state, key):
            return _search_one(game, evaluate, search, state, key)

        def act_batch(states, keys):
            return _search_batch(game, evaluate, search, states, keys)

    return Agent(name, act, setup, act_batch, game=game.name)


def search_config_with(config: SearchConfig, **changes) -> SearchConfig:
    """``config`` with fields replaced (validated by ``SearchConfig``)."""
    return config.replace(**changes)
