"""The game state: a frozen pytree of four small arrays (16 bytes per game)."""

import chex


@chex.dataclass(frozen=True)
class State:
    """One tic-tac-toe game. Batched states carry a leading batch axis ``[B, ...]``.

    Attributes:
      board: ``int8[9]`` cells in reading order (``3 * row + column``, row 0 at the
        top): ``-1`` empty, else the player whose mark it is (0 plays X, 1 plays O).
      current_player: ``int8[]`` the player to move (0 or 1).
      terminated: ``bool[]`` the game is over.
      rewards: ``float32[2]`` the final outcome (+1 win, 0 draw, -1 loss) once
        ``terminated``, else zeros. Stepping a finished game keeps it.
    """

    board: chex.Array
    current_player: chex.Array
    terminated: chex.Array
    rewards: chex.Array
