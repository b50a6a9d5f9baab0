"""A game as a bundle of pure functions, so search and training take it as a parameter."""

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from beastybar_jax.game import actions, cards, core, observe, render, state


class TokenLayout(NamedTuple):
    """Where the game's tokens (cards, board cells) sit in its flat observation:
    ``num_tokens`` consecutive blocks of ``features`` floats starting at index ``start``.
    An all-zero block is an empty place. The attention torso of
    :mod:`beastybar_jax.network` reads its tokens from here."""

    start: int
    num_tokens: int
    features: int


class Game(NamedTuple):
    """The functions search, self-play, the learners, agents and the CLIs need from a game.

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
    # Optional: token layout of the observation (None: the attention torso is unavailable).
    observation_tokens: Optional[TokenLayout] = None
    # Readable action names, index = action id (play.py, logs, notebooks).
    action_names: tuple = ()
    # render_state(state, viewer or None) -> str; viewer hides what that player cannot see.
    render_state: Optional[Callable[..., str]] = None
    # render_action(action, state before it or None) -> str.
    render_action: Optional[Callable[..., str]] = None


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


_QUEUE_START, _QUEUE_END = observe.OBSERVATION_LAYOUT["queue"]
BEASTYBAR_TOKENS = TokenLayout(_QUEUE_START, observe.QUEUE_TOKENS, observe.QUEUE_FEATURES)
assert BEASTYBAR_TOKENS.num_tokens * BEASTYBAR_TOKENS.features == _QUEUE_END - _QUEUE_START

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
    observation_tokens=BEASTYBAR_TOKENS,
    action_names=actions.ACTION_NAMES,
    render_state=render.render_state,
    render_action=render.render_action,
)
