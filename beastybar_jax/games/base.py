"""The game interface: the :class:`Game` record and the input checks every game shares.

Everything above the game layer (search, self-play, the learners, agents, the arena,
checkpoints and the command lines) takes a :class:`Game`: a bundle of pure functions
over a small state, pgx-style. Each game lives in its own room under
:mod:`beastybar_jax.games` and is registered in :mod:`beastybar_jax.games.registry`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np


class TokenLayout(NamedTuple):
    """Where the game's tokens (cards, board cells) sit in its flat observation:
    ``num_tokens`` consecutive blocks of ``features`` floats starting at index ``start``.
    An all-zero block is an empty place. The attention torso of
    :mod:`beastybar_jax.network` reads its tokens from here."""

    start: int
    num_tokens: int
    features: int


@chex.dataclass(frozen=True)
class AfterstateLists:
    """A batch's afterstate rows as lists without the unused slots
    (``Game.compact_afterstates``): ``C`` move rows, ``R`` reply rows (``R`` = 0 without
    replies), ``Q`` answer rows (``Q`` = 0 without answers).

    Attributes:
      rows: ``float32[C, F]`` the result of each listed move.
      owners: ``int32[C]`` the observation of each move row (``N``: unused row).
      actions: ``int32[C]`` its action (``A``: unused).
      reply_rows: ``float32[R, F]`` the result of each listed reply of the opponent.
      reply_owners: ``int32[R]`` the move row replied to (``C``: unused row).
      reply_actions: ``int32[R]`` the reply's action (``A``: unused).
      answer_rows: ``float32[Q, F]`` the result of each listed answer of the observer to
        a reply (``Q`` = 0 without answers).
      answer_owners: ``int32[Q]`` the reply row answered (``R``: unused row).
      answer_actions: ``int32[Q]`` the answer's action (``A``: unused).
      complete: ``bool[]`` every legal move and reply got its row; where false, the
        caller must use the per-observation slots (``legal_afterstates``, ``legal_replies``,
        ``legal_answers``).
    """

    rows: chex.Array
    owners: chex.Array
    actions: chex.Array
    reply_rows: chex.Array
    reply_owners: chex.Array
    reply_actions: chex.Array
    answer_rows: chex.Array
    answer_owners: chex.Array
    answer_actions: chex.Array
    complete: chex.Array


class Yardstick(NamedTuple):
    """Solved positions of a game: ground truth to score an agent's moves against
    (``Game.endgame_suite``; for Beasty Bar, :mod:`beastybar_jax.games.beastybar.endgame.suite`).

    ``states``: host states with a leading axis ``[N]``. ``score(actions)``: for one
    chosen action per position (``int[N]``), ``{metric name: float}`` comparing them
    with best play (e.g. the share that keeps the game-theoretic result)."""

    states: Any
    score: Callable[[Any], dict]


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
    # render_action(action, state before it or None, viewer or None) -> str.
    render_action: Optional[Callable[..., str]] = None
    # describe_move(state before, state after, action, viewer) -> str: what the move did,
    # told from viewer's side (play.py). None: play.py shows the table after the move.
    describe_move: Optional[Callable[..., str]] = None
    # points(state) -> int[num_players]: the players' points, for games that count points
    # (play.py's final score line). None: only the result is told.
    points: Optional[Callable[[Any], Any]] = None
    # The network's auxiliary head predicts score_margin / score_margin_scale (keep it near [-1, 1]).
    score_margin_scale: float = 1.0
    # Optional ground truth from an exact solver (None: the game has none).
    # endgame_suite(num_positions) -> Yardstick: that many solved positions spread over the
    # game's fixed suite (0: all); training-time evaluation (``eval_endgames``) and the CLIs.
    endgame_suite: Optional[Callable[[int], Yardstick]] = None
    # exact_values(states [N], budget) -> (bool[N] solved, float32[N] value): the exact
    # game-theoretic value, for the player to move, of the positions the solver can solve
    # within ``budget`` (a static work limit; 0: no limit), in the scale of ``rewards``.
    # Pure and jittable (AlphaZero's ``exact_value_targets``).
    exact_values: Optional[Callable[[Any, int], tuple]] = None
    # exact_actions(states [N], budget) -> (bool[N] solved, float32[N] value, bool[N, A]
    # keeps): ``exact_values`` plus the legal actions that keep the exact result
    # (AlphaZero's ``exact_policy_targets``). Pure and jittable.
    exact_actions: Optional[Callable[[Any, int], tuple]] = None
    # Optional one ply of calculation for the network (``network.afterstates``):
    # legal_afterstates(observation float32[O]) -> (float32[K, afterstate_size], int32[K]):
    # for each legal action of the player to move (the observer), the result of playing it
    # as far as it is known before playing, and the action's id; K bounds the number of
    # legal actions, unused rows are zero with id A (all unused when the observer is not
    # to move). A function of the observation, so it cannot use hidden cards; pure and
    # jittable (the network calls it on its input).
    legal_afterstates: Optional[Callable[[jax.Array], tuple]] = None
    afterstate_size: int = 0
    # Optional, with legal_afterstates: a second ply (``network.replies``).
    # legal_replies(observation float32[O]) -> (float32[K, R, afterstate_size], int32[K, R]):
    # for each of legal_afterstates' K move slots, the opponent's legal replies to it as far
    # as the observer knows them (none where the observer cannot know the opponent's hand),
    # each row the reply's own result, with the reply's id; unused rows zero with id A.
    legal_replies: Optional[Callable[[jax.Array], tuple]] = None
    # Optional, with legal_replies: a third ply (``network.answers``).
    # legal_answers(observation float32[O]) -> (float32[K, R, Q, afterstate_size], int32[K, R, Q]):
    # for each reply slot of legal_replies, the observer's legal answers to it as far as the
    # observer knows them (none where their own next hand is not known); unused rows zero with id A.
    legal_answers: Optional[Callable[[jax.Array], tuple]] = None
    # Optional, with legal_afterstates: the same rows for a batch as lists, without the
    # unused ones (cheaper where most positions have far fewer than K legal moves).
    # compact_afterstates(observations float32[N, O], capacity C, reply_capacity R,
    # answer_capacity Q) -> AfterstateLists: the legal moves of all N observations in order,
    # the first C of them, (R > 0, with legal_replies) the replies to those moves, the first R
    # of them, and (Q > 0, with legal_answers) the answers to those replies, the first Q.
    # afterstate_capacity(N) -> (C, (R, ...)) or (C, (R, ...), ((R, Q), ...)): the capacities
    # the network asks for: the reply capacities in turn where the lists overflow (then the
    # slots), and for network.answers the (reply, answer) capacity pairs in turn.
    compact_afterstates: Optional[Callable[..., AfterstateLists]] = None
    afterstate_capacity: Optional[Callable[[int], tuple]] = None
    # The game's own agents, for the agents registry (beastybar_jax.agents.make_agent):
    # ((registry name, factory() -> act(state, key) -> int32[] action), ...). Agents that
    # play every game (random, mcts-N, checkpoints) live in beastybar_jax.agents.
    agents: tuple = ()
    # ((name, wrap(fallback act) -> act), ...): agents built around another agent, asked
    # for as "<name>+<agent spec>" (Beasty Bar's "solver+heuristic"); wrap(fallback
    # act_batch, batched=True) gives the agent's act_batch.
    agent_wrappers: tuple = ()
    # The registry name of the game's strongest baseline (evaluation's and play.py's default).
    default_opponent: str = "random"
    # For a person's eyes (the web app). table_view(state, viewer or None) -> dict: the table
    # as JSON with a "kind" the page knows how to draw, holding only what ``viewer`` may know
    # (None: a spectator of a finished game). None: the page shows ``render_state``'s text.
    table_view: Optional[Callable[[Any, Optional[int]], dict]] = None
    # move_group(action) -> str: what the player clicks first for ``action`` (moves sharing
    # a group are told apart by a second click). None: one click per move.
    move_group: Optional[Callable[[int], str]] = None
    # exact_moves(state, key) -> dict (jittable): "solved" (bool[]), "result", "margin" and per
    # action "action_result", "action_margin", "action_exact", under perfect play, for the
    # player to move; exact_applies(state) -> bool: whether it solves ``state``, from what
    # both players see. None: the game has no exact analysis.
    exact_moves: Optional[Callable[[Any, jax.Array], dict]] = None
    exact_applies: Optional[Callable[[Any], bool]] = None
    # Trained networks shipped with the game: ((registry name, directory), ...), each
    # directory an exported network (beastybar_jax.checkpoint.save_exported: config.json +
    # params.msgpack), played as "<name>" or "<name>@sims=<N>" (Beasty Bar's "champion").
    networks: tuple = ()

# The registered games (beastybar_jax.games.registry builds them; get_game loads them).
GAME_NAMES = ("beastybar", "tictactoe")


class UnknownGameError(ValueError):
    """A game name that is not registered."""


class GameInputError(ValueError):
    """An action or player id a game function cannot take: a non-integer dtype (found
    at trace time under ``jit``), or a concrete player id out of range."""


def _require_integer(x, what: str, num: int) -> None:
    dtype = np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
    if not np.issubdtype(dtype, np.integer):
        raise GameInputError(f"{what} must be an integer id in 0..{num - 1}, got dtype {dtype}: round it or cast "
                             f"it to an integer type first (e.g. int(a), a.astype(jnp.int32))")


def as_action(action, num_actions: int) -> jax.Array:
    """``action`` as an ``int32`` id for a game's ``step``: any id outside
    ``0..num_actions-1`` becomes -1 (an illegal action, which forfeits), whatever its
    integer width, so an ``int64`` 2**32 + 8 is not action 8. Raises
    :class:`GameInputError` for a non-integer dtype (a float 8.9 is not action 8;
    bools are not ids), at trace time under ``jit``."""
    if isinstance(action, (bool, np.bool_)):
        _require_integer(np.asarray(action), "action", num_actions)
    if isinstance(action, int):  # a Python int of any size
        return jnp.int32(action if 0 <= action < num_actions else -1)
    _require_integer(action, "action", num_actions)
    if isinstance(action, jax.Array):  # traced or on a device: compare in its own dtype
        return jnp.where((action >= 0) & (action < num_actions), action, -1).astype(jnp.int32)
    action = np.asarray(action)  # numpy: range-check before JAX narrows int64 to int32
    return jnp.asarray(np.where((action >= 0) & (action < num_actions), action, -1).astype(np.int32))


def as_player(player, num_players: int) -> jax.Array:
    """``player`` as an ``int32`` id for ``observe``, ``sample_world`` and
    ``score_margin``. A concrete id outside ``0..num_players-1`` raises
    :class:`GameInputError`; a traced one is not checked (no runtime cost in the hot
    loops), and the result for it is unspecified. Non-integer dtypes raise."""
    if isinstance(player, (bool, np.bool_)):
        _require_integer(np.asarray(player), "player", num_players)
    if isinstance(player, int):
        value = player
    else:
        _require_integer(player, "player", num_players)
        if isinstance(player, jax.core.Tracer):
            return jnp.asarray(player).astype(jnp.int32)
        value = np.asarray(player)
    if np.any((value < 0) | (value >= num_players)):
        raise GameInputError(f"player must be in 0..{num_players - 1}, got {value}")
    return jnp.asarray(np.asarray(value).astype(np.int32))
