"""The game state: a frozen pytree of small integer arrays (104 bytes per game)."""

import chex
import jax.numpy as jnp

from beastybar_jax.games.beastybar import cards as C


@chex.dataclass(frozen=True)
class State:
    """One Beasty Bar game. Batched states carry a leading batch axis ``[B, ...]``.

    Attributes:
      queue: ``int8[5]`` cards front first (``owner * 12 + species``), ``-1`` empty.
        At most 4 are occupied between turns.
      hand: ``bool[2, 12]`` the species each player holds.
      deck: ``int8[2, 8]`` each player's undrawn species in draw order, ``-1`` padded
        at the back.
      bar: ``bool[2, 12]`` cards that entered the bar, by owner and species.
      thats_it: ``bool[2, 12]`` cards sent to THAT'S IT, by owner and species.
      current_player: ``int8[]`` the player to move (0 or 1).
      turn: ``int8[]`` number of turns played.
      terminated: ``bool[]`` the game is over.
      rewards: ``float32[2]`` the final outcome (+1 win, 0 draw, -1 loss) once
        ``terminated``, else zeros. Stepping a finished game keeps it.
    """

    queue: chex.Array
    hand: chex.Array
    deck: chex.Array
    bar: chex.Array
    thats_it: chex.Array
    current_player: chex.Array
    turn: chex.Array
    terminated: chex.Array
    rewards: chex.Array

    @property
    def scores(self) -> chex.Array:
        """``int32[..., 2]`` points of each player's cards in the bar."""
        return jnp.sum(self.bar * jnp.asarray(C.POINTS), axis=-1)

    @property
    def deck_sizes(self) -> chex.Array:
        """``int32[..., 2]`` undrawn cards per player."""
        return jnp.sum(self.deck >= 0, axis=-1)

    @property
    def queue_length(self) -> chex.Array:
        """``int32[...]`` cards in the queue."""
        return jnp.sum(self.queue >= 0, axis=-1)
