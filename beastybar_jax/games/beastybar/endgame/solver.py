"""An exact endgame solver: alpha-beta over the engine's own ``step``, on device.

Once the opponent's deck is empty and the mover's holds at most one card
(``positions.is_solvable``), the rest of the game is a finite deterministic
perfect-information game. ``solve`` computes, for a batch of such positions, the
final point margin (mover minus opponent) under best play by both sides, and
the margin after each legal action. Minimax commutes with monotone maps, so the
game-theoretic result is ``sign(margin)``, and an action keeps the best result
iff the sign of its margin equals the position's.

How (all fixed shapes, one ``lax.while_loop``, no Python recursion; on a GPU the loop tests its
condition every ``GPU_CHECK_EVERY`` iterations, a host round trip there):

* **Alpha-beta** (negamax, fail-soft) with an explicit stack per search: each
  stack level holds the engine ``State``, a bitmask of actions not yet tried,
  the window (alpha, beta) and the best value so far.
* **Margin bounds**: a position's final margin lies between ``margin now -
  the opponent's best possible gain`` and ``margin now + the mover's``, where a
  player gains at most the points of their best unscored cards that fit in the
  bar places still reachable (2 per five-animal check, and a check needs 3 new
  cards). A child whose bounds fall outside its window, or meet, is not
  expanded.
* **Lanes**: ``num_lanes`` searches run side by side, each on one position; a
  lane whose search ends takes the next unsolved position (a work queue over
  the solvable positions), so the loop runs about ``total nodes / num_lanes``
  times instead of ``batch x largest tree``. Every iteration first closes up to
  ``pops_per_step`` finished nodes per lane (cheap: no engine call) and then
  expands one child per lane with one batched ``step``. All state lives in the
  loop carry and changes by in-place scatters; there is no vmap of a while loop.
* **Root children**: to get every action's value the root never narrows its own
  window below a per-mode *floor*; ``mode`` trades exactness for work (see
  ``MODES``).
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import engine as game
from beastybar_jax.games.tracing import traced_for_gpu
from beastybar_jax.games.beastybar.endgame.positions import MAX_PLIES, is_solvable
from beastybar_jax.games.beastybar.endgame.positions import plies_left_bound as positions_plies_bound
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.actions import ACTION_ACTING_SPECIES as _ACTION_ACTING
from beastybar_jax.games.beastybar.actions import ACTION_CARD_SPECIES as _ACTION_CARD
from beastybar_jax.games.beastybar.actions import ACTION_PARAM as _ACTION_PARAM

NUM_ACTIONS = game.NUM_ACTIONS
INF = 1000  # beyond any point margin (|margin| <= 38)
GPU_CHECK_EVERY = 16  # iterations between the loop's tests of its condition on a GPU (search)
STACK_DEPTH = MAX_PLIES  # internal nodes lie at depths 0..8; depth 9 is always finished

MODES = {
    "results": "the result (win/draw/loss) of the position and of every legal action is exact; "
               "margins are bounds on the right side of 0 (exact for draws). The cheapest.",
    "best": "the position's margin, its result and its best action(s) are exact; every other action's "
            "margin is an upper bound (so its result is known when that bound is below 0)",
    "margins": "the margin, hence the result, of every legal action is exact (the most work)",
}


class SolverConfigError(ValueError):
    """An invalid solver setting."""


@dataclasses.dataclass(frozen=True)
class SolverConfig:
    """Static settings of ``solve``.

    Attributes:
      mode: what to compute exactly, one of ``MODES``.
      num_lanes: searches run side by side (at most one per position and action).
        Each loop iteration steps every lane once, and the loop runs at least as
        long as the largest single search (a few thousand nodes for the biggest
        endgames), so more lanes only pay when there is work for all of them.
        0 (default): ``clip(N // 8, 64, 4096)`` for a batch of ``N`` positions.
      pops_per_step: finished nodes a lane may close per iteration before expanding.
      use_bounds: prune with the margin bounds (module docstring); off only to
        measure what they save.
      max_iterations: stop after this many loop iterations (0: run to the end).
        Positions not finished by then come back with ``solved=False``, so a
        training step can bound its time.
      smallest_first: take the positions smallest first (fewest cards left, then
        fewest moves) instead of largest first. With ``max_iterations`` this solves
        the most positions within the budget (the largest ones, which would hold
        lanes for thousands of iterations, are the ones left unsolved); without a
        limit it lengthens the tail.
      engine_moves: list moves with ``game.legal_action_mask`` instead of its
        bit-operation restatement (slower; to cross-check).
    """

    mode: str = "results"
    num_lanes: int = 0
    pops_per_step: int = 2
    use_bounds: bool = True
    max_iterations: int = 0
    smallest_first: bool = False
    engine_moves: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise SolverConfigError(f"solver mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.num_lanes < 0 or self.pops_per_step < 1 or self.max_iterations < 0:
            raise SolverConfigError(
                "pops_per_step must be positive, num_lanes and max_iterations >= 0; got "
                f"{self.num_lanes}, {self.pops_per_step}, {self.max_iterations}")


@chex.dataclass(frozen=True)
class Solution:
    """Solved values of ``N`` positions, each from its player to move.

    Margins are final bar points of the player to move minus the opponent's under
    best play by both (minimax of the margin). Which entries are exact depends on
    the mode (``MODES``); every field is 0 / False where ``solved`` is False.

    Attributes:
      solved: ``bool[N]`` the position is solvable (``is_solvable``) and was solved.
      result: ``int32[N]`` +1 win, 0 draw, -1 loss under best play (exact).
      margin: ``int32[N]`` the margin; exact where ``margin_exact``, otherwise a
        bound with the sign of ``result`` (at least it for a win, at most for a loss).
      margin_exact: ``bool[N]``.
      action_result: ``int32[N, A]`` the result after each action where
        ``action_result_known``.
      action_result_known: ``bool[N, A]``.
      action_margin: ``int32[N, A]`` the margin after each action; exact where
        ``action_exact``, otherwise a bound: an upper bound, or in mode results a
        lower bound for a win.
      action_exact: ``bool[N, A]``.
      legal: ``bool[N, A]`` the legal actions.
      nodes: ``int32[N]`` positions the search stepped into, plus the root: the cost.
    """

    solved: chex.Array
    result: chex.Array
    margin: chex.Array
    margin_exact: chex.Array
    action_result: chex.Array
    action_result_known: chex.Array
    action_margin: chex.Array
    action_exact: chex.Array
    legal: chex.Array
    nodes: chex.Array

    @property
    def result_optimal_actions(self) -> chex.Array:
        """``bool[N, A]`` the actions known to keep the position's result (all of them
        in modes results and margins; in mode best, at least the best actions)."""
        return self.action_result_known & (self.action_result == self.result[..., None])

    @property
    def best_actions(self) -> chex.Array:
        """``bool[N, A]`` the actions known to reach the position's exact margin (at
        least one per solved position in modes best and margins)."""
        return (self.action_exact & self.margin_exact[..., None]
                & (self.action_margin == self.margin[..., None]))


# ----------------------------------------------------------------------------- bounds

_POINTS = jnp.asarray(C.POINTS, jnp.int32)


def _best_points(unscored, places):
    """``int32[]`` the most points ``places`` cards among the ``unscored`` (bool[12]) can make."""
    counts = [jnp.sum(unscored & (_POINTS == p)) for p in (4, 3, 2)]
    total, left = jnp.zeros((), jnp.int32), places
    for points, count in zip((4, 3, 2), counts):
        taken = jnp.clip(left, 0, count)
        total, left = total + points * taken, left - taken
    return total


def margin_now(state: game.State) -> jax.Array:
    """``int32[]`` bar points of the player to move minus the opponent's."""
    scores = state.scores
    mover = state.current_player.astype(jnp.int32)
    return jnp.where(mover == 0, scores[0] - scores[1], scores[1] - scores[0]).astype(jnp.int32)


def margin_bounds(state: game.State) -> tuple[jax.Array, jax.Array]:
    """``(lowest, highest)`` final margin the player to move can end with (ONE state).

    Cards enter the bar two at a time, when the queue reaches five: the first check
    needs ``5 - queue`` more cards, every later one 3, so at most ``(queue + cards
    to play - 2) // 3`` checks remain. Each player gains at most their best unscored
    cards that fit in those places. A finished game's bounds are its margin.
    """
    now = margin_now(state)
    to_play = jnp.sum(state.hand) + jnp.sum(state.deck >= 0)
    cards = state.queue_length + to_play
    places = jnp.where(cards >= 5, 2 * ((cards - 2) // 3), 0)
    places = jnp.where(state.terminated, 0, places)
    unscored = ~state.bar & ~state.thats_it  # [2, 12] in hand, deck or queue
    mover = state.current_player.astype(jnp.int32)
    mine = jnp.where(mover == 0, unscored[0], unscored[1])
    theirs = jnp.where(mover == 0, unscored[1], unscored[0])
    return now - _best_points(theirs, places), now + _best_points(mine, places)


# ----------------------------------------------------------------------------- packed states

# The search stack holds positions as 5 int32 words (about 5x smaller than
# ``State``), lossless for every position below a solvable one, where each deck
# holds at most its first card:
#   0: queue cards + 1 in 5 bits per slot (bits 0-24), player to move (25), finished (26)
#   1-3: hand, bar and THAT'S IT as 24 bits (owner * 12 + species)
#   4: first deck card + 1 of each player (4 bits each), turn (bits 8-12)
WORDS = 5
_CARD_BITS, _SLOT_SHIFTS = jax.device_put((np.left_shift(1, np.arange(C.NUM_CARDS, dtype=np.int32)),
                                            5 * np.arange(C.QUEUE_SLOTS, dtype=np.int32)))


def _card_bits(mask):
    return jnp.sum(jnp.where(mask.reshape(C.NUM_CARDS), _CARD_BITS, 0))


def _card_mask(word):
    return ((word >> jnp.arange(C.NUM_CARDS, dtype=jnp.int32)) & 1).astype(bool).reshape(C.NUM_PLAYERS, C.NUM_SPECIES)


def pack(state: game.State) -> jax.Array:
    """``int32[5]`` words of ONE state whose decks hold at most one card each."""
    queue = jnp.sum((state.queue.astype(jnp.int32) + 1) << _SLOT_SHIFTS)
    flags = (state.current_player.astype(jnp.int32) << 25) | (state.terminated.astype(jnp.int32) << 26)
    first = state.deck[:, 0].astype(jnp.int32) + 1
    tail = first[0] | (first[1] << 4) | (state.turn.astype(jnp.int32) << 8)
    return jnp.stack([queue | flags, _card_bits(state.hand), _card_bits(state.bar), _card_bits(state.thats_it), tail])


def unpack(words: jax.Array) -> game.State:
    """The ``State`` of ``pack``'s words (``int32[5]``)."""
    queue = ((words[0] >> _SLOT_SHIFTS) & 31) - 1
    first = ((words[4] >> jnp.asarray([0, 4])) & 15) - 1
    deck = jnp.full((C.NUM_PLAYERS, C.DECK_SIZE), -1, jnp.int32).at[:, 0].set(first)
    bar = _card_mask(words[2])
    terminated = ((words[0] >> 26) & 1).astype(bool)
    scores = jnp.sum(bar * _POINTS, axis=-1)
    outcome = jnp.sign(scores[0] - scores[1]).astype(jnp.float32)
    return game.State(
        queue=queue.astype(jnp.int8),
        hand=_card_mask(words[1]),
        deck=deck.astype(jnp.int8),
        bar=bar,
        thats_it=_card_mask(words[3]),
        current_player=((words[0] >> 25) & 1).astype(jnp.int8),
        turn=((words[4] >> 8) & 31).astype(jnp.int8),
        terminated=terminated,
        rewards=jnp.where(terminated, jnp.stack([outcome, -outcome]), 0.0),
    )


# ----------------------------------------------------------------------------- search

# Search order: bit i of an untried-moves mask stands for action ORDER[i]. Strongest
# animals first (action ids run from the skunk to the lion): in measured endgames
# this visits ~10% fewer nodes than the opposite order.
ORDER = np.arange(NUM_ACTIONS, dtype=np.int32)[::-1].copy()
_BIT_WEIGHTS = (1 << np.arange(NUM_ACTIONS, dtype=np.int64)).astype(np.int32)


def _move_bits(legal):
    """``int32[...]`` the ``bool[..., A]`` mask as bits in search order."""
    return jnp.sum(jnp.where(legal[..., ORDER], jnp.asarray(_BIT_WEIGHTS), 0), axis=-1)


def _legal_bits(words):
    """``int32[L]`` the legal moves of packed positions ``[W, L]`` as bits in search
    order: ``game.legal_action_mask`` restated with bit operations on the words
    (the engine's version costs a third of a search iteration on a CPU; tests check
    the two agree, and ``SolverConfig(engine_moves=True)`` uses the engine's)."""
    head, hand = words[0], words[1]
    mover = (head >> 25) & 1
    finished = ((head >> 26) & 1) == 1
    own_hand = (hand >> (C.NUM_SPECIES * mover)) & 0xFFF
    cards = [((head >> (5 * slot)) & 31) - 1 for slot in range(C.QUEUE_SLOTS)]
    length = sum((card >= 0).astype(jnp.int32) for card in cards)
    in_queue = jnp.zeros_like(head)  # species present, as bits (both players' cards of a species may be there)
    for card in cards:
        in_queue = in_queue | jnp.where(card >= 0, jnp.left_shift(1, card % C.NUM_SPECIES), 0)
    bits = jnp.zeros_like(head)
    for position, action in enumerate(ORDER.tolist()):
        species = int(_ACTION_CARD[action])
        acting = int(_ACTION_ACTING[action])
        param = int(_ACTION_PARAM[action])
        ok = ((own_hand >> species) & 1) == 1
        if acting == C.PARROT:
            ok = ok & (param < length)
        elif acting == C.KANGAROO:
            ok = ok & jnp.where(length == 0, param == 0, (param >= 1) & (param <= jnp.minimum(2, length)))
        if species == C.CHAMELEON:
            ok = ok & (((in_queue >> acting) & 1) == 1)
        bits = bits | jnp.where(ok & ~finished, 1 << position, 0)
    return bits


def _lowest_bit(bits):
    """Index of the lowest set bit of each ``int32`` (32 for 0)."""
    return jax.lax.population_count((bits & -bits) - 1)


MODE_IDS = {name: i for i, name in enumerate(MODES)}


def _root_window(mode, best):
    """``(floor, cap)``: the root-side values an action's search must tell apart,
    given the mode (an id of ``MODE_IDS``, possibly traced) and the best exact value
    among the action's siblings so far (``-INF`` before the first). A value at or
    below the floor, or at or above the cap, comes back as a bound."""
    results, best_mode = mode == MODE_IDS["results"], mode == MODE_IDS["best"]
    floor = jnp.where(results, -1, jnp.where(best_mode, best, -INF))
    cap = jnp.where(results, 1, INF)
    return floor.astype(jnp.int32), jnp.broadcast_to(cap, floor.shape).astype(jnp.int32)


def _task_queue(states, root_legal, solvable, by_rounds, smallest_first=False):
    """``(tasks int32[N * A], num_tasks)``: one task per solvable position and legal
    action, as ``position * A + order index``, biggest positions (most cards, then
    most moves) first so that the largest searches do not start last.

    ``by_rounds``: round robin over the positions instead (every position's first
    action in search order, then every second one, ...), so a position's later
    actions start with its earlier ones' values known: a narrower window in mode
    best, at the price of a longer tail."""
    num_positions = root_legal.shape[0]
    legal = root_legal[:, ORDER]  # [N, A] in search order
    rank = jnp.cumsum(legal, axis=1) - 1
    size = 32 * jax.vmap(positions_plies_bound)(states) + jnp.sum(legal, axis=1)
    size = jnp.where(smallest_first, -size, size)
    position_rank = jnp.argsort(jnp.argsort(-jnp.where(solvable, size, -(1 << 20)), stable=True), stable=True)
    key = jnp.where(by_rounds, rank * num_positions + position_rank[:, None],
                    position_rank[:, None] * NUM_ACTIONS + rank)
    key = jnp.where(legal, key, NUM_ACTIONS * num_positions)
    return jnp.argsort(key.reshape(-1), stable=True).astype(jnp.int32), jnp.sum(legal)


_PLAYER_BITS = (0xFFF, 0xFFF << 12)
_POINT_BITS = {p: int(sum(1 << (o * C.NUM_SPECIES + sp) for o in range(2) for sp in range(C.NUM_SPECIES)
                          if C.POINTS[sp] == p)) for p in (4, 3, 2)}
assert sorted(set(C.POINTS.tolist())) == [2, 3, 4]
_UNGENERATED = jax.device_put(np.int32(-(1 << 31)))  # untried-moves flag: the node's moves are not listed yet


def _count(x):
    return jax.lax.population_count(x)


def _evaluate_words(words):
    """``(finished, margin now, lowest, highest)`` final margin for the player to move,
    of packed positions ``[W, L]``: ``margin_bounds`` on the bit words, a few
    population counts per position instead of reductions over ``[2, 12]`` masks."""
    head, hand, bar, thats_it, tail = words
    finished = ((head >> 26) & 1) == 1
    mover = (head >> 25) & 1

    def points(cards, player, places=None):
        total, left = jnp.zeros_like(cards), places
        for p in (4, 3, 2):
            count = _count(cards & _POINT_BITS[p] & _PLAYER_BITS[player])
            if places is None:
                total = total + p * count
            else:
                taken = jnp.clip(left, 0, count)
                total, left = total + p * taken, left - taken
        return total

    score_0, score_1 = points(bar, 0), points(bar, 1)
    now = jnp.where(mover == 0, score_0 - score_1, score_1 - score_0)
    unscored = ~(bar | thats_it)
    to_play = _count(hand) + ((tail & 15) != 0) + (((tail >> 4) & 15) != 0)
    queue_length = sum(((head >> (5 * slot)) & 31) != 0 for slot in range(C.QUEUE_SLOTS))
    cards = queue_length + to_play
    places = jnp.where((cards >= 5) & ~finished, 2 * ((cards - 2) // 3), 0)
    gain_0, gain_1 = points(unscored, 0, places), points(unscored, 1, places)
    mine = jnp.where(mover == 0, gain_0, gain_1)
    theirs = jnp.where(mover == 0, gain_1, gain_0)
    return finished, now, now - theirs, now + mine


def lanes_for(config: SolverConfig, num_positions: int) -> int:
    """The number of lanes ``search`` runs for a batch of ``num_positions``."""
    lanes = config.num_lanes or int(np.clip(num_positions // 8, 64, 4096))
    return min(lanes, num_positions * NUM_ACTIONS)


def _keep(tree, one, lanes_axis=-1):
    """``tree`` (integer / bool arrays, lanes on ``lanes_axis``) unchanged, computed once.

    XLA on CPU fuses cheap element-wise producers into every consumer, so a long
    per-lane computation feeding several consumers (e.g. ``[depth, L]`` updates)
    would be redone in each, and per depth (``jax.lax.optimization_barrier`` does
    not stop that: the CPU compiler drops it). Dividing by ``one`` (1, but unknown
    to the compiler) makes each leaf the output of an expensive op, which XLA
    computes once and does not duplicate."""
    def keep(x):
        if x.dtype == jnp.bool_:
            return jax.lax.div(x.astype(jnp.int32), one) != 0
        return jax.lax.div(x, one.astype(x.dtype))
    del lanes_axis
    return jax.tree.map(keep, tree)


def search(states: game.State, config: SolverConfig = SolverConfig(), mode=None,
           max_iterations=None) -> tuple[Solution, jax.Array]:
    """``solve``, and the number of loop iterations it took (``int32[]``).

    ``mode`` (an id of ``MODE_IDS``) and ``max_iterations`` override the config's;
    they may be traced, so one compiled function serves every mode and limit (the
    tests use that)."""
    num_positions = states.current_player.shape[0]
    num_lanes = lanes_for(config, num_positions)
    depth_ids = jnp.arange(STACK_DEPTH)[:, None]  # [D, 1]
    bit_ids = jnp.arange(NUM_ACTIONS)[:, None]  # [A, 1]
    order = jnp.asarray(ORDER)
    none = num_positions  # "no position": out of range, so its scatters are dropped
    no_entry = num_positions * NUM_ACTIONS

    solvable = jax.vmap(is_solvable)(states)
    root_legal = jax.vmap(game.legal_action_mask)(states) & solvable[:, None]
    roots = jax.vmap(pack)(states)  # [N, W]
    mode = MODE_IDS[config.mode] if mode is None else mode
    tasks, num_tasks = _task_queue(states, root_legal, solvable, by_rounds=mode == MODE_IDS["best"],
                                   smallest_first=config.smallest_first)
    one = jnp.where(num_tasks >= 0, 1, 2).astype(jnp.int32)  # 1, but not a compile-time constant (``_keep``)

    def lanes_zeros(*shape):
        return jnp.zeros(shape + (num_lanes,), jnp.int32)

    carry = dict(
        stack=lanes_zeros(STACK_DEPTH, WORDS),
        untried=lanes_zeros(STACK_DEPTH),  # search-order bits, or _UNGENERATED
        alpha=lanes_zeros(STACK_DEPTH) - INF,
        beta=lanes_zeros(STACK_DEPTH) + INF,
        best=lanes_zeros(STACK_DEPTH) - INF,
        depth=lanes_zeros(),
        position=lanes_zeros() + none,
        action=lanes_zeros(),
        exact=jnp.zeros((num_lanes,), bool),
        nodes=lanes_zeros(),
        next_task=jnp.zeros((), jnp.int32),
        iterations=jnp.zeros((), jnp.int32),  # run so far (on a GPU the last few may have had nothing to do)
        busy_until=lanes_zeros(),  # the iterations run until each lane fell idle
        position_best=jnp.full((num_positions,), -INF, jnp.int32),  # best exact action value so far
        tasks_left=jnp.sum(root_legal, axis=1, dtype=jnp.int32),
        out_margin=jnp.zeros((num_positions * NUM_ACTIONS,), jnp.int32),
        out_exact=jnp.zeros((num_positions * NUM_ACTIONS,), bool),
        out_nodes=jnp.zeros((num_positions,), jnp.int32),
    )

    limit = config.max_iterations if max_iterations is None else max_iterations

    def busy(c):
        """The lanes with a search to work on, while the budget lasts."""
        return (c["position"] < none) & ((limit <= 0) | (c["iterations"] < limit))

    def take_tasks(c, free):
        """Give each ``free`` lane the next task (a position and one of its actions)."""
        index = c["next_task"] + jnp.cumsum(free) - 1
        task = tasks[jnp.clip(index, 0, no_entry - 1)]
        has_task = free & (index < num_tasks)
        position = jnp.where(has_task, task // NUM_ACTIONS, none)
        bit = task % NUM_ACTIONS
        root = roots[jnp.clip(position, 0, num_positions - 1)].T  # [W, L]
        c = dict(c)
        c["stack"] = c["stack"].at[0].set(jnp.where(free, root, c["stack"][0]))
        c["untried"] = c["untried"].at[0].set(jnp.where(free, jnp.left_shift(1, bit), c["untried"][0]))
        c["best"] = c["best"].at[0].set(jnp.where(free, -INF, c["best"][0]))
        c["depth"] = jnp.where(free, 0, c["depth"])
        c["position"] = jnp.where(free, position, c["position"])
        c["action"] = jnp.where(free, order[bit], c["action"])
        c["exact"] = jnp.where(free, False, c["exact"])
        c["nodes"] = jnp.where(free, 0, c["nodes"])
        c["next_task"] = jnp.minimum(index[-1] + 1, num_tasks)  # next_task + sum(free), from the running sum
        return c

    def window_now(c):
        """Each lane's root window from its position's best exact value so far."""
        best = c["position_best"][jnp.clip(c["position"], 0, num_positions - 1)]
        return _root_window(mode, best)

    def close_nodes(c):
        """Lanes whose top node is done (no untried move, or a cutoff) pass its value
        up; a finished task writes its action's value and takes the next task."""
        depth = c["depth"]
        here = depth_ids == depth  # [D, L]
        at = lambda x: jnp.sum(jnp.where(here, x, 0), axis=0)
        floor, cap = window_now(c)
        beta = jnp.where(depth == 1, -floor, at(c["beta"]))  # the root action's window narrows
        active = busy(c)
        done = active & ((at(c["untried"]) == 0) | (at(c["alpha"]) >= beta))
        value = at(c["best"])  # for the node's player to move
        finished = done & (depth == 0)
        up = done & (depth > 0)
        value, up, finished, floor, cap = _keep((value, up, finished, floor, cap), one)
        parent = up & (depth_ids == depth - 1)
        c = dict(c)
        c["best"] = jnp.where(parent, jnp.maximum(c["best"], -value), c["best"])
        c["alpha"] = jnp.where(parent & (depth > 1), jnp.maximum(c["alpha"], -value), c["alpha"])
        c["exact"] = jnp.where(up & (depth == 1), (-value > floor) & (-value < cap), c["exact"])
        c["depth"] = jnp.where(up, depth - 1, depth)

        entry = jnp.where(finished, c["position"] * NUM_ACTIONS + c["action"], no_entry)
        c["out_margin"] = c["out_margin"].at[entry].set(value, mode="drop")
        c["out_exact"] = c["out_exact"].at[entry].set(c["exact"], mode="drop")
        row = jnp.where(finished, c["position"], none)
        c["out_nodes"] = c["out_nodes"].at[row].add(c["nodes"], mode="drop")
        c["tasks_left"] = c["tasks_left"].at[row].add(-1, mode="drop")
        if not (isinstance(mode, int) and mode == MODE_IDS["results"]):  # that mode's window never reads it
            c["position_best"] = c["position_best"].at[row].max(value, mode="drop")
        return take_tasks(c, finished)

    def expand(c):
        """Every lane with an untried move at its top node steps it."""
        depth = c["depth"]
        here = depth_ids == depth
        at = lambda x: jnp.sum(jnp.where(here, x, 0), axis=0)
        floor, cap = window_now(c)
        active = busy(c)
        alpha = at(c["alpha"])
        beta = jnp.where(depth == 1, -floor, at(c["beta"]))
        words = _keep(jnp.sum(jnp.where(here[:, None, :], c["stack"], 0), axis=0), one)  # [W, L]
        state = jax.vmap(unpack, in_axes=1)(words)
        # A node's moves are listed when it is first expanded, from the state that
        # ``step`` checks anyway (XLA computes the mask once for both).
        untried = at(c["untried"])
        if config.engine_moves:
            moves = _move_bits(jax.vmap(game.legal_action_mask)(state))
        else:
            moves = _legal_bits(words)
        untried = _keep(jnp.where(untried == _UNGENERATED, moves, untried), one)
        expanding = active & (untried != 0) & (alpha < beta)
        bit = _lowest_bit(untried)
        action = jnp.sum(jnp.where(bit_ids == bit, order[:, None], 0), axis=0)
        child = jax.vmap(game.step)(state, action)
        child_words = _keep(jax.vmap(pack, out_axes=1)(child), one)
        at_root = depth == 0
        # The child's window, from its own mover's side.
        child_alpha = jnp.where(at_root, -cap, -beta)
        child_beta = jnp.where(at_root, -floor, -alpha)
        terminal, final, low, high = _keep(_evaluate_words(child_words), one)
        if not config.use_bounds:
            low = jnp.where(terminal, final, -INF)
            high = jnp.where(terminal, final, INF)
        fail_low = high <= child_alpha
        leaf = terminal | fail_low | (low >= child_beta) | (low == high)
        leaf_value = jnp.where(terminal, final, jnp.where(fail_low, high, low))
        push = expanding & ~leaf
        scored = expanding & leaf
        for_me = -leaf_value
        exact = terminal | (low == high) | ((for_me > floor) & (for_me < cap))
        (push, scored, for_me, exact, expanding, untried, bit, child_words, child_alpha, child_beta) = _keep(
            (push, scored, for_me, exact, expanding, untried, bit, child_words, child_alpha, child_beta), one)

        c = dict(c)
        c["untried"] = jnp.where(here & expanding, untried & ~jnp.left_shift(1, bit), c["untried"])
        c["nodes"] = c["nodes"] + expanding
        # A leaf child: its value goes to this node at once.
        c["best"] = jnp.where(here & scored, jnp.maximum(c["best"], for_me), c["best"])
        c["alpha"] = jnp.where(here & scored & ~at_root, jnp.maximum(c["alpha"], for_me), c["alpha"])
        c["exact"] = jnp.where(scored & at_root, exact, c["exact"])
        # Any other child is pushed and searched.
        below = push & (depth_ids == depth + 1)
        c["stack"] = jnp.where(below[:, None, :], child_words[None], c["stack"])
        c["untried"] = jnp.where(below, _UNGENERATED, c["untried"])
        c["alpha"] = jnp.where(below, child_alpha, c["alpha"])
        c["beta"] = jnp.where(below, child_beta, c["beta"])
        c["best"] = jnp.where(below, -INF, c["best"])
        c["depth"] = jnp.where(push, depth + 1, depth)
        return c

    def body(c):
        """One iteration; it changes nothing once every lane is idle or the budget is spent."""
        # Lanes only fall idle, so the loop ran as long as its last busy lane (no scalar
        # reduction here: on a GPU it would be one block's kernel, fused with the lanes' work).
        busy_until = jnp.where(busy(c), c["iterations"] + 1, c["busy_until"])
        for _ in range(config.pops_per_step):
            c = close_nodes(c)
        c = expand(c)
        return dict(c, iterations=c["iterations"] + 1, busy_until=busy_until)

    def running(c):
        return jnp.any(busy(c))

    carry = take_tasks(carry, jnp.ones((num_lanes,), bool))
    if traced_for_gpu():
        # On a GPU a while_loop's condition is a host round trip (~80 us idle an iteration in an
        # h100.yaml iteration's 500): test it every GPU_CHECK_EVERY iterations, the others a
        # static loop; the iterations past the end change nothing.
        chunk = lambda c: jax.lax.fori_loop(0, GPU_CHECK_EVERY, lambda _, c: body(c), c)  # noqa: E731
        carry = jax.lax.while_loop(running, chunk, carry)
    else:
        carry = jax.lax.while_loop(running, body, carry)
    solved = solvable & (carry["tasks_left"] == 0)
    legal = root_legal & solved[:, None]
    action_margin = jnp.where(legal, carry["out_margin"].reshape(num_positions, NUM_ACTIONS), 0)
    action_exact = legal & carry["out_exact"].reshape(num_positions, NUM_ACTIONS)
    # Non-exact values are bounds on the right side: at most the floor (which is
    # below 0 or at most an exact sibling's value), or at least the cap (1).
    floor_below_zero = action_margin < 0
    known = action_exact | floor_below_zero | ((action_margin > 0) & (mode == MODE_IDS["results"]))
    margin = jnp.max(jnp.where(legal, action_margin, -INF), axis=1)
    lower_bounds = legal & ~action_exact & (action_margin > 0) & (mode == MODE_IDS["results"])
    best_is_exact = (jnp.any(legal & action_exact & (action_margin == margin[:, None]), axis=1)
                     & ~jnp.any(lower_bounds, axis=1))
    solution = Solution(
        solved=solved,
        result=jnp.where(solved, jnp.sign(margin), 0),
        margin=jnp.where(solved, margin, 0),
        margin_exact=solved & best_is_exact,
        action_result=jnp.where(legal & known, jnp.sign(action_margin), 0),
        action_result_known=legal & known,
        action_margin=action_margin,
        action_exact=action_exact,
        legal=legal,
        nodes=jnp.where(solved, carry["out_nodes"] + 1, 0),
    )
    return solution, jnp.max(carry["busy_until"])


def solve(states: game.State, config: SolverConfig = SolverConfig()) -> Solution:
    """Exact values of a batch of positions (``State`` with a leading axis ``[N]``).

    Pure and jittable (``config`` is static); unsolvable positions are skipped and
    marked ``solved=False``. See the module docstring for the method.

    Layout: per-lane arrays keep the lanes on the minor axis (``[depth, L]``,
    ``[depth, word, L]``) and are read and written at each lane's depth with
    one-hot selects, which vectorize on CPU where per-lane scatters would not.
    """
    return search(states, config)[0]


def exact_values(states: game.State, budget: int = 0, lanes: int = 0) -> tuple[jax.Array, jax.Array]:
    """``(solved bool[N], value float32[N])``: the game-theoretic result (+1 / 0 / -1,
    the scale of ``State.rewards``) for the player to move of every solvable position
    of a batch, as the game interface's ``exact_values`` hook (training targets).

    ``budget`` (static): at most this many loop iterations (0: no limit). The
    positions are taken smallest first, so a budget leaves only the largest ones
    (before the last draw, up to ~20,000 nodes) unsolved; those come back with
    ``solved=False`` and value 0. ``lanes`` (static): ``SolverConfig.num_lanes``."""
    config = SolverConfig(mode="results", num_lanes=int(lanes), max_iterations=int(budget), smallest_first=True)
    solution = solve(states, config)
    return solution.solved, solution.result.astype(jnp.float32)


def exact_actions(states: game.State, budget: int = 0, lanes: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(solved bool[N], value float32[N], keeps bool[N, A])``: :func:`exact_values` and,
    for each solved position, the legal actions that keep its result (the game
    interface's ``exact_actions`` hook: exact policy targets). Same budget and lanes."""
    config = SolverConfig(mode="results", num_lanes=int(lanes), max_iterations=int(budget), smallest_first=True)
    solution = solve(states, config)
    keeps = solution.result_optimal_actions & solution.legal & solution.solved[:, None]
    return solution.solved, solution.result.astype(jnp.float32), keeps


# ----------------------------------------------------------------------------- one position at a time


@functools.lru_cache(maxsize=None)
def batched_solver(config: SolverConfig = SolverConfig()):
    """``solve`` with ``config`` as a function of a batch ``[N]``, whose ``jax.vmap``
    (any number of times) is ``solve`` on all the states at once, flattened, through
    ``jax.custom_batching.custom_vmap``: one shared work queue instead of a vmapped
    while loop that would run every position as long as the longest."""

    @jax.custom_batching.custom_vmap
    def solve_batch(states):
        return solve(states, config)

    @solve_batch.def_vmap
    def _vmap_rule(axis_size, in_batched, states):
        (batched,) = in_batched  # one flag per leaf of the one argument
        states = jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + x.shape), states, batched)
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), states)
        solution = solve_batch(flat)
        solution = jax.tree.map(lambda x: x.reshape((axis_size, -1) + x.shape[1:]), solution)
        return solution, jax.tree.map(lambda _: True, solution)

    return solve_batch


def solve_position(state: game.State, config: SolverConfig = SolverConfig()) -> Solution:
    """``solve`` of ONE state (fields without the batch axis). Under ``jax.vmap`` the
    positions of the batch are solved together (``batched_solver``), so agents,
    which act on one state and are vmapped over games, can call it."""
    solution = batched_solver(config)(jax.tree.map(lambda x: x[None], state))
    return jax.tree.map(lambda x: x[0], solution)
