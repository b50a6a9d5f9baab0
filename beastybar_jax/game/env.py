"""A game as a bundle of pure functions, so search and training take it as a parameter."""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from beastybar_jax.game import actions, cards, core, observe, state


class Game(NamedTuple):
    """The functions search, self-play and the learner need from a game.

    Every function acts on a single (unbatched) state; vmap them for batches.
    States must expose ``current_player`` (int), ``terminated`` (bool) and
    ``rewards`` (``float32[num_players]``, final outcome once terminated).
    """

    name: str
    num_actions: int
    observation_size: int
    num_players: int
    max_game_length: int  # no game lasts more turns; sizes per-game buffers and scans
    init: Callable[[jax.Array], Any]                 # key -> state
    step: Callable[[Any, jax.Array], Any]            # state, action -> state
    observe: Callable[[Any, jax.Array], jax.Array]   # state, player -> float32[O]
    legal_action_mask: Callable[[Any], jax.Array]    # state -> bool[A]
    sample_world: Callable[[Any, jax.Array, jax.Array], Any]  # state, player, key -> state
    score_margin: Callable[[Any, jax.Array], jax.Array]       # state, player -> float32[]


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


BEASTYBAR = Game(
    name="beastybar",
    num_actions=actions.NUM_ACTIONS,
    observation_size=observe.OBSERVATION_SIZE,
    num_players=cards.NUM_PLAYERS,
    max_game_length=cards.NUM_CARDS,  # one card per turn
    init=core.init,
    step=core.step,
    observe=observe.observe,
    legal_action_mask=core.legal_action_mask,
    sample_world=observe.sample_world,
    score_margin=_score_margin,
)
