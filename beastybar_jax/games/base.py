"""The game interface: the :class:`Game` record, the step protocol and the input checks
every game shares.

Everything above the game layer (search, self-play, the learners, agents, the arena,
checkpoints and the command lines) takes a :class:`Game`: a bundle of pure functions
over a small state, pgx-style. Its core is what every layer needs (the rules, what a
player observes, the worlds a player may imagine); what only some layers use comes in
optional capability records that a layer asks for by name (``game.solver``,
``game.afterstates``, ``game.has("solver.exact_values")``):

- :class:`UI`: names, text and the table a person sees (``play.py``, the web app);
- :class:`Agents`: the game's own agents and shipped networks (the agents registry);
- :class:`Solver`: exact play (the web app's analysis, ``evaluate.py --decided``,
  AlphaZero's exact targets, the yardstick of solved positions);
- :class:`Afterstates`: one to three plies of the game's own lookahead, read by the
  network's afterstate scorer (:mod:`beastybar_jax.afterstate_scorer`);
- :class:`TokenLayout`: the observation as tokens, for the attention torso.

A game gives its rules as ``play(state, action)`` for a legal action of an unfinished
game; :meth:`Game.step` wraps them in the protocol every game shares, written once here
(:func:`protocol_step`, as pgx's ``Env.step``): the action check, the forfeit of an
illegal action, the frozen finished game. Each game lives in its own room under
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


class UI(NamedTuple):
    """What a person sees (``play.py``, the web app, notebooks). Every field is optional:
    a game without them is shown by action ids and its state's text.

    Attributes:
      action_names: readable action names, index = action id.
      render_state: ``render_state(state, viewer or None) -> str``; ``viewer`` hides what
        that player cannot see.
      render_action: ``render_action(action, state before it or None, viewer or None) -> str``.
      describe_move: ``describe_move(state before, state after, action, viewer) -> str``:
        what the move did, told from viewer's side (None: ``play.py`` shows the table).
      points: ``points(state) -> int[num_players]`` for games that count points (the
        final score line). None: only the result is told.
      table_view: ``table_view(state, viewer or None) -> dict``: the table as JSON with a
        ``"kind"`` the web page knows how to draw, holding only what ``viewer`` may know
        (None: a spectator of a finished game). None: the page shows ``render_state``.
      move_group: ``move_group(action) -> str``: what the player clicks first for
        ``action`` (moves sharing a group are told apart by a second click). None: one
        click per move.
    """

    action_names: tuple = ()
    render_state: Optional[Callable[..., str]] = None
    render_action: Optional[Callable[..., str]] = None
    describe_move: Optional[Callable[..., str]] = None
    points: Optional[Callable[[Any], Any]] = None
    table_view: Optional[Callable[[Any, Optional[int]], dict]] = None
    move_group: Optional[Callable[[int], str]] = None


class Agents(NamedTuple):
    """The game's own agents, for the agents registry (:func:`beastybar_jax.agents.make_agent`);
    agents that play every game (random, mcts-N, checkpoints) live there.

    Attributes:
      baselines: ``((registry name, factory() -> act(state, key) -> int32[]), ...)``.
      wrappers: ``((name, wrap(fallback act) -> act), ...)``: agents built around another
        agent, asked for as ``"<name>+<agent spec>"`` (Beasty Bar's ``solver+heuristic``);
        ``wrap(fallback act_batch, batched=True)`` gives the agent's ``act_batch``.
      networks: trained networks shipped with the game, ``((registry name, directory), ...)``,
        each directory an exported network (:func:`beastybar_jax.checkpoint.save_exported`),
        played as ``"<name>"`` or ``"<name>@sims=<N>"`` (Beasty Bar's ``champion``).
      default_opponent: the registry name of the strongest baseline (evaluation's and
        ``play.py``'s default).
    """

    baselines: tuple = ()
    wrappers: tuple = ()
    networks: tuple = ()
    default_opponent: str = "random"


class Yardstick(NamedTuple):
    """Solved positions of a game: ground truth to score an agent's moves against
    (``Solver.endgame_suite``; for Beasty Bar, :mod:`beastybar_jax.games.beastybar.endgame.suite`).

    ``states``: host states with a leading axis ``[N]``. ``score(actions)``: for one
    chosen action per position (``int[N]``), ``{metric name: float}`` comparing them
    with best play (e.g. the share that keeps the game-theoretic result)."""

    states: Any
    score: Callable[[Any], dict]


class Solver(NamedTuple):
    """Exact play, where the game has a solver.

    Attributes:
      exact_moves: ``exact_moves(state, key) -> dict`` (jittable): ``"solved"`` (``bool[]``),
        ``"result"``, ``"margin"`` and per action ``"action_result"``, ``"action_margin"``,
        ``"action_exact"``, under perfect play, for the player to move (the web app's analysis).
      exact_applies: ``exact_applies(state) -> bool``: whether ``exact_moves`` solves
        ``state``, from what both players see.
      exact_values: ``exact_values(states [N], budget, lanes=0) -> (bool[N] solved, float32[N] value)``:
        the game-theoretic value, for the player to move, of the positions the solver can
        solve within ``budget`` (a static work limit; 0: no limit), in the scale of
        ``rewards``; ``lanes`` (static): positions searched side by side (0: the solver's
        choice). Pure and jittable (``evaluate.py --decided``, AlphaZero's exact targets).
      exact_actions: ``exact_actions(states [N], budget, lanes=0) -> (solved, value, bool[N, A] keeps)``:
        ``exact_values`` plus the legal actions that keep the exact result. Pure and jittable.
      endgame_suite: ``endgame_suite(num_positions) -> Yardstick``: that many solved
        positions spread over the game's fixed suite (0: all), for training-time
        evaluation (``eval_endgames``) and the command lines.
    """

    exact_moves: Callable[[Any, jax.Array], dict]
    exact_applies: Callable[[Any], bool]
    exact_values: Optional[Callable[..., tuple]] = None
    exact_actions: Optional[Callable[..., tuple]] = None
    endgame_suite: Optional[Callable[[int], Yardstick]] = None


@chex.dataclass(frozen=True)
class AfterstateLists:
    """A batch's afterstate rows as lists without the unused slots
    (``Afterstates.compact``): ``C`` move rows, ``R`` reply rows (``R`` = 0 without
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
      needed: ``int32[3]`` the rows the lists need: the legal moves, the replies to the
        listed moves, the answers to the listed replies (a list with room for fewer left
        some out).
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
    needed: chex.Array

    @property
    def complete(self) -> jax.Array:
        """``bool[]`` (``[...]`` for lists with leading axes): every legal move, reply and
        answer got its row; where false, the caller must use the per-observation slots
        (``legal``, ``replies``, ``answers``)."""
        room = jnp.asarray([self.rows.shape[-2], self.reply_rows.shape[-2], self.answer_rows.shape[-2]])
        return jnp.all(self.needed <= room, axis=-1)


class Afterstates(NamedTuple):
    """One to three plies of the game's own lookahead, as functions of an observation (so
    they cannot use hidden cards; pure and jittable: the network calls them on its input).

    Attributes:
      legal: ``legal(observation float32[O]) -> (float32[K, size], int32[K])``: for each
        legal action of the player to move (the observer), the result of playing it as far
        as it is known before playing, and the action's id; ``K`` bounds the number of legal
        actions, unused rows are zero with id ``A`` (all unused when the observer is not to
        move).
      size: ``F``, the floats of one afterstate row.
      compact: ``compact(observations float32[N, O], C, R, Q) -> AfterstateLists``: the same
        rows for a batch as lists without the unused ones: the legal moves of all ``N``
        observations in order, the first ``C`` of them, (``R`` > 0, with ``replies``) the
        replies to those moves, the first ``R``, and (``Q`` > 0, with ``answers``) the
        answers to those replies, the first ``Q``. None: the slots only.
      capacity: ``capacity(N) -> (C, (R, ...))`` or ``(C, (R, ...), ((R, Q), ...))``, with
        ``compact``: the capacities the scorer asks for: the moves', the reply capacities a
        search tries in turn where the lists overflow (then the slots), and for answers the
        (reply, answer) pairs in turn; each at least the one before (a batch that fits one
        fits the next). The learners use the first only, leaving out the rows of a group that
        overflows it: it should hold batches that mix positions of every turn, with room to
        spare (``afterstate_scorer.MIXED``).
      replies: a second ply, ``replies(observation) -> (float32[K, R, size], int32[K, R])``:
        for each move slot, the opponent's legal replies as far as the observer knows them
        (none where the observer cannot know the opponent's hand); unused rows zero with id ``A``.
      answers: a third ply, with ``replies``: ``answers(observation) -> (float32[K, R, Q, size],
        int32[K, R, Q])``: for each reply slot, the observer's legal answers as far as the
        observer knows them (none where their own next hand is not known).
      plies: optional, ``plies(observation, n) -> ((rows, ids), ...)``: ``legal``,
        ``replies`` and ``answers``, the first ``n`` of them, in one computation (a ply's
        successors feed the next instead of being stepped again): the scorer uses it when given.
      max_moves: ``K``, the row slots of each ply (the most legal actions a position has),
        when every ply has ``K`` slots a row: the scorer then initializes its parameters
        from zero rows of those shapes without tracing the game's functions. 0: unknown.
    """

    legal: Callable[[jax.Array], tuple]
    size: int
    compact: Optional[Callable[..., AfterstateLists]] = None
    capacity: Optional[Callable[[int], tuple]] = None
    replies: Optional[Callable[[jax.Array], tuple]] = None
    answers: Optional[Callable[[jax.Array], tuple]] = None
    plies: Optional[Callable[[jax.Array, int], tuple]] = None
    max_moves: int = 0


class Game(NamedTuple):
    """A game: the functions search, self-play, the learners, agents and the CLIs need,
    and the capabilities some of them ask for.

    Every function acts on a single (unbatched) state; vmap them for batches. States
    must expose ``current_player`` (int), ``terminated`` (bool) and ``rewards``
    (``float32[num_players]``, the final outcome once terminated) and ``replace``
    (a frozen chex dataclass).

    The core (12 fields):
      name: the registry name.
      num_actions: ``A``; observation_size: ``O``; num_players: 2 for the games here.
      max_game_length: no game lasts more turns; sizes per-game buffers and scans.
      init: ``init(key) -> state``, a new game.
      play: ``play(state, action) -> state``, the rules: one legal action of an unfinished
        game (``action`` an ``int32`` id). Callers use :meth:`step`.
      observe: ``observe(state, player) -> float32[O]``, what ``player`` sees.
      legal_action_mask: ``legal_action_mask(state) -> bool[A]``, all False once terminated.
      sample_world: ``sample_world(state, player, key) -> state``: a world consistent with
        what ``player`` knows (hidden cards re-dealt), for search.
      score_margin: ``score_margin(state, player) -> float32[]``, ``player``'s points
        minus the opponent's (the outcome for games without points).
      score_margin_scale: the network's auxiliary head predicts ``score_margin /
        score_margin_scale`` (keep it near [-1, 1]).

    The capabilities: ``tokens`` (:class:`TokenLayout`), ``ui`` (:class:`UI`), ``agents``
    (:class:`Agents`), ``solver`` (:class:`Solver`), ``afterstates`` (:class:`Afterstates`);
    None (``ui``, ``agents``: empty) where the game has none.
    """

    name: str
    num_actions: int
    observation_size: int
    num_players: int
    max_game_length: int
    init: Callable[[jax.Array], Any]
    play: Callable[[Any, jax.Array], Any]
    observe: Callable[[Any, jax.Array], jax.Array]
    legal_action_mask: Callable[[Any], jax.Array]
    sample_world: Callable[[Any, jax.Array, jax.Array], Any]
    score_margin: Callable[[Any, jax.Array], jax.Array]
    score_margin_scale: float = 1.0
    # capabilities
    tokens: Optional[TokenLayout] = None
    ui: UI = UI()
    agents: Agents = Agents()
    solver: Optional[Solver] = None
    afterstates: Optional[Afterstates] = None

    def step(self, state, action):
        """Play ``action`` (an integer id) for the player to move: :func:`protocol_step`
        around the game's ``play``."""
        return protocol_step(self.play, self.legal_action_mask, self.num_actions, self.num_players, state, action)

    def has(self, capability: str) -> bool:
        """Whether the game gives ``capability``: a record (``"solver"``) or one of its
        functions (``"solver.exact_values"``, ``"afterstates.replies"``)."""
        record, _, part = capability.partition(".")
        value = getattr(self, record)
        return value is not None and (not part or getattr(value, part) is not None)


CORE_FIELDS = Game._fields[:Game._fields.index("tokens")]
"""The fields every game gives (the rest are capabilities)."""

# The registered games (beastybar_jax.games.registry builds them; get_game loads them).
GAME_NAMES = ("beastybar", "tictactoe")


class UnknownGameError(ValueError):
    """A game name that is not registered."""


class GameInputError(ValueError):
    """An action or player id a game function cannot take: a non-integer dtype (found
    at trace time under ``jit``), or a concrete player id out of range."""


def protocol_step(play, legal_action_mask, num_actions: int, num_players: int, state, action):
    """The step every game shares (pgx's ``Env.step``), around the game's rules ``play``.

    A finished game is returned unchanged. An illegal action ends the game with the mover
    losing (-1, the others +1) and leaves the table as it was; so does an id outside
    ``0..num_actions-1``, of any integer width (an ``int64`` 2**32 + 8 is not 8). A
    non-integer action (a float) raises :class:`GameInputError`, at trace time under jit.
    ``play`` always runs (on action 0 for an id out of range): under ``jit`` both sides
    of a select are computed anyway."""
    action = as_action(action, num_actions)  # -1 when out of range
    safe_action = jnp.clip(action, 0, num_actions - 1)
    legal = (action >= 0) & jnp.any(legal_action_mask(state) & (jnp.arange(num_actions) == safe_action))
    played = play(state, safe_action)
    mover_loses = jnp.where(jnp.arange(num_players) == state.current_player, -1.0, 1.0).astype(jnp.float32)
    forfeited = state.replace(terminated=jnp.ones((), dtype=bool), rewards=mover_loses)
    next_state = jax.tree.map(lambda p, f: jnp.where(legal, p, f), played, forfeited)
    return jax.tree.map(lambda old, new: jnp.where(state.terminated, old, new), state, next_state)


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
