"""Agents: legal moves under jit + vmap, information-set fairness, greedy's choice,
and the registry's specs and errors.

Compile time dominates on CPU, so every agent acts once, in a jitted function of its own
(``actions_on``), on one batch of positions shared by the module's tests.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers.tiny_training import FAST_COMPILE
from beastybar_jax.games import beastybar as game
from beastybar_jax.agents import Agent, AgentSpecError, batch_act, make_agent, network_agent, split_options
from beastybar_jax.games.beastybar.solver_agent import solver_act
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.network import NetworkConfig, init_params, make_network
from beastybar_jax.search import SearchConfig

NUM_GAMES = 8
TURNS = (0, 5, 11, 17, 21)  # positions taken from these turns of random games
SIMPLE = ("random", "greedy", "heuristic", "aggressive", "defensive", "outcome_heuristic")


@pytest.fixture(scope="module")
def network_and_params():
    network = make_network(NetworkConfig(width=16, depth=1, aux_score_head=False), game.NUM_ACTIONS)
    return network, init_params(network, jax.random.key(0), game.OBSERVATION_SIZE)


ALL = (*SIMPLE, "mcts-4", "network", "solver+network")


@pytest.fixture(scope="module")
def agents(network_and_params):
    network, params = network_and_params
    agents = {name: make_agent(name) for name in SIMPLE}
    agents["mcts-4"] = make_agent("mcts-4")
    agents["network"] = network_agent(network, params, game=game.BEASTYBAR)
    # The solver where the position is solvable (the turn-17 and turn-21 positions), the network elsewhere.
    network_act = agents["network"]
    agents["solver+network"] = Agent("solver+network", solver_act(network_act.act), None,
                                     solver_act(network_act.act_batch, batched=True))
    return agents


def random_positions(key) -> game.State:
    """``[len(TURNS) * NUM_GAMES]`` unfinished positions from random play."""

    def turn(states, k):
        mask = jax.vmap(game.legal_action_mask)(states)
        actions = jax.random.categorical(k, jnp.where(mask, 0.0, -jnp.inf))
        return jax.vmap(game.step)(states, actions), states

    init_key, play_key = jax.random.split(key)
    states = jax.vmap(game.init)(jax.random.split(init_key, NUM_GAMES))
    _, history = jax.lax.scan(turn, states, jax.random.split(play_key, max(TURNS) + 1))
    picked = jax.tree.map(lambda x: x[jnp.asarray(TURNS)], history)
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), picked)


def _position(queue, hand0, hand1, deck0=(), deck1=(), mover=0):
    """A hand-made state: ``queue`` as (owner, species) pairs front first."""
    def mask(species):
        m = np.zeros(C.NUM_SPECIES, bool)
        m[list(species)] = True
        return m

    q = np.full(C.QUEUE_SLOTS, -1, np.int8)
    for i, (owner, species) in enumerate(queue):
        q[i] = owner * C.NUM_SPECIES + species
    deck = np.full((2, C.DECK_SIZE), -1, np.int8)
    deck[0, :len(deck0)] = deck0
    deck[1, :len(deck1)] = deck1
    return game.State(
        queue=jnp.asarray(q), hand=jnp.asarray(np.stack([mask(hand0), mask(hand1)])),
        deck=jnp.asarray(deck), bar=jnp.zeros((2, C.NUM_SPECIES), bool),
        thats_it=jnp.zeros((2, C.NUM_SPECIES), bool), current_player=jnp.asarray(mover, jnp.int8),
        turn=jnp.asarray(8, jnp.int8), terminated=jnp.asarray(False), rewards=jnp.zeros(2, jnp.float32))


# Player 0 to move; queue: own giraffe (3 points), own skunk (4), opponent's seal,
# opponent's monkey. Filling the queue to five sends the front two -- 7 points of
# player 0 -- into the bar: the zebra and both kangaroo hops do. The parrot removes a
# card instead (queue of four, nothing enters) and the lion throws out the monkey and
# takes the front (queue of four). So greedy must play zebra or kangaroo.
POINTS_POSITION = _position(queue=[(0, C.GIRAFFE), (0, C.SKUNK), (1, C.SEAL), (1, C.MONKEY)],
                            hand0=[C.PARROT, C.ZEBRA, C.LION, C.KANGAROO],
                            hand1=[C.HIPPO, C.SNAKE, C.CROCODILE, C.CHAMELEON],
                            deck0=[C.SEAL], deck1=[C.GIRAFFE])
POINTS_MOVES = {game.action_id(C.ZEBRA), game.action_id(C.KANGAROO, param=1), game.action_id(C.KANGAROO, param=2)}
POINTS_COPIES = 4  # the position appears this many times, each with its own key


@pytest.fixture(scope="module")
def actions_on(agents):
    """Positions (random ones, then copies of POINTS_POSITION), their
    hidden-information twins, and every agent's actions on both, with the same key
    for a position and its twin. One compiled function per agent (XLA's passes cost more
    than linearly in a program's size: one program for all agents compiles slower),
    compiled without XLA's backend optimisations (only the results matter)."""
    fast = functools.partial(jax.jit, compiler_options=FAST_COMPILE)

    @fast
    def positions(key):
        position_key, twin_key, act_key = jax.random.split(key, 3)
        states = random_positions(position_key)
        extra = jax.tree.map(lambda x: jnp.stack([x] * POINTS_COPIES), POINTS_POSITION)
        states = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), states, extra)
        n = states.current_player.shape[0]
        # Twins: the same positions with everything the mover cannot see redealt.
        twins = jax.vmap(lambda s, k: game.sample_world(s, s.current_player, k))(
            states, jax.random.split(twin_key, n))
        both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), states, twins)
        keys = jax.random.split(act_key, n)
        observations = jax.vmap(game.observe)(both, both.current_player)
        return (states, twins, both, jnp.concatenate([keys, keys]), jax.vmap(game.legal_action_mask)(states),
                observations[:n], observations[n:])

    states, twins, both, keys, legal, observations, twin_observations = positions(jax.random.key(7))
    n = legal.shape[0]
    actions, twin_actions, batched = {}, {}, {}
    for name, agent in agents.items():
        chosen = jax.device_get(fast(jax.vmap(agent.act))(both, keys))
        actions[name], twin_actions[name] = chosen[:n], chosen[n:]
        if agent.act_batch is not None:  # the agent's own batched act (one network call, one batched search)
            # on the positions and, separately with the same keys, on their twins
            act = fast(lambda states, twins, keys, agent=agent: (batch_act(agent)(states, keys),
                                                                 batch_act(agent)(twins, keys)))
            batched[name] = jax.device_get(act(states, twins, keys[:n]))
    return (*jax.device_get((states, twins)), actions, twin_actions, *jax.device_get(
        (legal, observations, twin_observations)), batched)


def test_a_network_agents_search_is_a_search_config(network_and_params):
    network, params = network_and_params
    with pytest.raises(TypeError, match=r"SearchConfig \(e.g. SearchConfig\(num_simulations=32\)\)"):
        network_agent(network, params, search=32, game=game.BEASTYBAR)


def test_positions_are_varied_and_unfinished(actions_on):
    states, twins, _, _, _, obs, twin_obs, _ = actions_on
    assert not states.terminated.any()
    assert len(set(states.turn.tolist())) == len(TURNS) + 1
    # the twins differ in hidden cards somewhere, yet show the mover the same table
    assert (twins.deck != states.deck).any()
    np.testing.assert_array_equal(obs, twin_obs)


@pytest.mark.parametrize("name", ALL)
def test_agent_plays_legal_moves(actions_on, name):
    _, _, actions, _, legal, _, _, _ = actions_on
    chosen = actions[name]
    assert chosen.dtype == np.int32
    assert legal[np.arange(len(chosen)), chosen].all(), f"{name} chose an illegal action"


@pytest.mark.parametrize("name", ALL)
def test_agent_uses_only_what_the_mover_may_know(actions_on, name):
    _, _, actions, twin_actions = actions_on[:4]
    np.testing.assert_array_equal(actions[name], twin_actions[name])


def test_batched_agents_play_legal_fair_moves(actions_on):
    """``batch_act``: a network scores the whole batch in one call and a search runs one
    batched mctx call, with the same fairness; the raw network's moves are the same as
    one state at a time, a search's moves are its own draws (worlds from ``keys[0]``)."""
    _, _, actions, _, legal, _, _, batched = actions_on
    assert set(batched) == {"mcts-4", "network", "solver+network"}
    for name, (chosen, twin_chosen) in batched.items():
        assert legal[np.arange(len(chosen)), chosen].all(), f"{name} chose an illegal action"
        np.testing.assert_array_equal(chosen, twin_chosen)
    for name in ("network", "solver+network"):  # the same keys: the same moves
        np.testing.assert_array_equal(batched[name][0], actions[name])


def test_agents_differ(actions_on):
    """The heuristics are not random play, and random play follows its key (so the
    fairness test above cannot pass by accident of a constant agent)."""
    _, _, actions, _ = actions_on[:4]
    assert (actions["heuristic"] != actions["random"]).any()
    assert (actions["outcome_heuristic"] != actions["heuristic"]).any()
    assert len(set(actions["random"][-POINTS_COPIES:].tolist())) > 1  # same position, different keys


def test_greedy_takes_the_points(actions_on):
    _, _, actions, _ = actions_on[:4]
    for action in actions["greedy"][-POINTS_COPIES:]:
        assert int(action) in POINTS_MOVES, game.action_name(int(action))
    # the random agent, on the same position, does not always find them
    assert not set(actions["random"][-POINTS_COPIES:].tolist()) <= POINTS_MOVES


def test_registry_names_and_errors(tmp_path):
    for name in SIMPLE:
        assert make_agent(name).name == name
    assert make_agent("mcts-16").name == "mcts-16"
    assert make_agent("mcts-8@worlds=2@algo=puct").name == "mcts-8@worlds=2@algo=puct"
    assert split_options("checkpoint:runs/a@b@sims=64@worlds=2") == ("checkpoint:runs/a@b", {"sims": "64", "worlds": "2"})
    with pytest.raises(AgentSpecError, match="heuristic"):  # the message lists the known names
        make_agent("heurstic")
    with pytest.raises(ValueError, match="mcts-<N>"):
        make_agent("mcts")
    with pytest.raises(ValueError, match="positive integer"):
        make_agent("mcts-0")
    with pytest.raises(ValueError, match="unknown option"):
        make_agent("random@sims=3")
    with pytest.raises(ValueError, match="algo"):
        make_agent("mcts-8@algo=alphabeta")
    with pytest.raises(ValueError, match="no path"):
        make_agent("checkpoint:")
    with pytest.raises(ValueError, match="sims"):
        make_agent(f"checkpoint:{tmp_path}@worlds=2")
    with pytest.raises(ValueError, match="no such run directory"):  # CheckpointError is a ValueError
        make_agent(f"checkpoint:{tmp_path / 'missing'}")
    with pytest.raises(ValueError, match="holds no checkpoint"):
        make_agent(f"checkpoint:{tmp_path}")


def test_registry_checkpoint_specs(monkeypatch, network_and_params):
    """``checkpoint:<path>`` and ``@sims=`` build network agents from ``load_agent``."""

    from beastybar_jax.config import TrainConfig
    from beastybar_jax import checkpoint

    network, params = network_and_params
    loaded = []

    def fake_load(path):
        loaded.append(path)
        return checkpoint.TrainedModel(network=network, params=params, config=TrainConfig(), iteration=3, path=path)

    monkeypatch.setattr(checkpoint, "load_agent", fake_load)
    raw = make_agent("checkpoint:runs/x")
    searching = make_agent("checkpoint:runs/x@sims=64@worlds=2@algo=puct")
    assert loaded == ["runs/x", "runs/x"]
    assert raw.name == "checkpoint:runs/x" and searching.name.endswith("@algo=puct")
    # the search agent closes over the run's SearchConfig with the overrides applied
    configs = [c.cell_contents for c in searching.act.__closure__ if isinstance(c.cell_contents, SearchConfig)]
    assert configs and configs[0].num_simulations == 64
    assert configs[0].num_determinizations == 2 and configs[0].algorithm == "puct"
