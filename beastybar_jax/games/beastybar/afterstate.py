"""Afterstate features: one ply of calculation handed to the network.

For each of the 31 actions of the player to move, the result of playing it that the
player can know before playing: the queue after it, the cards that entered the bar
and went to THAT'S IT, the points won, and whether the game ends there and how.
The engine computes them (``core.step`` vmapped over the legal actions) on a state rebuilt
from the mover's observation (:func:`known_state`): the mover's hand, the queue, the
bars and THAT'S IT as they are, and only the *numbers* of the other cards. That is all
a move's immediate result depends on: the draw that ends a turn changes the mover's
hand and deck only (not kept here), and whether the game ends depends on the numbers
of cards left. Being a function of the observation, the features cannot use hidden
cards; ``tests/test_afterstates.py`` checks that they equal those of the true state
(:func:`from_state`) and a hand computation.

The network reads them as :func:`legal_afterstates`: one row per *legal* action only,
at most ``MAX_LEGAL_ACTIONS`` (15) of the 31, with the actions' ids. Computing and
scoring 15 rows instead of 31 about halves the features' cost, most of an iteration's
time with ``network.afterstates`` (docs/performance.md, "Training iterations"). For a
batch the network asks :func:`compact_afterstates` for the same rows as one list per
group of observations, without the unused slots: about 6 rows a position instead of 15.
:func:`afterstate_features` spreads them over all 31 actions (the table below).

Layout of one action's ``float32[AFTERSTATE_SIZE]`` row, from the mover's side
(all zero for an illegal action, and all rows zero when the observer is not to move):

====  ==========================================================================
0     1 (the action is legal)
1     the queue after the move, ``[4, 14]`` as in the observation (species
      one-hot, mine, theirs; front first): 56 floats
57    my cards entering the bar, by species (12)
69    the opponent's cards entering the bar (12)
81    my cards going to THAT'S IT (12)
93    the opponent's cards going to THAT'S IT (12)
105   my points entering the bar / 10, the opponent's / 10
107   the game ends with this move; its outcome for me (+1 / 0 / -1) if so
====  ==========================================================================
"""

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.base import AfterstateLists, as_player
from beastybar_jax.games.beastybar import actions as A
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar import core
from beastybar_jax.games.tracing import traced_for_gpu
from beastybar_jax.games.beastybar.observe import QUEUE_TOKENS, split_observation
from beastybar_jax.games.beastybar.state import State

AFTERSTATE_SIZE = 109
# The most legal actions a position can have: a hand of parrot (4 targets), kangaroo
# (2 hops), chameleon (8: copying a parrot's 4 targets, a kangaroo's 2 hops and two more
# species, with those four in the queue) and one more card.
MAX_LEGAL_ACTIONS = 15
# Built with NumPy and put on the device once: an eager jnp op here would compile a program at import.
_SPECIES, _ACTIONS = jax.device_put((np.arange(C.NUM_SPECIES, dtype=np.int32),
                                     np.arange(A.NUM_ACTIONS, dtype=np.int32)))


def _first_n(mask, n):
    """``bool[12]``: the first ``n`` species where ``mask`` holds."""
    return mask & (jnp.cumsum(mask) <= n)


def known_state(observation: jax.Array) -> State:
    """A state with the observer as player 0, to move, holding what the observation
    shows: the observer's hand, the queue, bars and THAT'S IT; the observer's deck and
    the opponent's hand and deck hold the right *numbers* of cards (species taken from
    the cards the observer knows to be there, in species order)."""
    o = split_observation(observation)
    counts = o["counts"]
    own_deck_size = jnp.round(counts[1] * C.DECK_SIZE).astype(jnp.int32)
    their_hand_size = jnp.round(counts[2] * C.HAND_SIZE).astype(jnp.int32)
    their_deck_size = jnp.round(counts[3] * C.DECK_SIZE).astype(jnp.int32)
    unseen = o["opponent_unseen"] > 0
    their_hand = _first_n(unseen, their_hand_size)
    slots = jnp.arange(C.DECK_SIZE)
    own_deck = jnp.where(slots < own_deck_size, 0, -1)
    their_deck = jnp.where(slots < their_deck_size, 0, -1)
    queue = o["queue"]  # [4, 14]
    species = jnp.argmax(queue[:, :C.NUM_SPECIES], axis=-1)
    occupied = jnp.sum(queue[:, :C.NUM_SPECIES], axis=-1) > 0
    owner = jnp.where(queue[:, C.NUM_SPECIES] > 0, 0, 1)
    cards = jnp.where(occupied, owner * C.NUM_SPECIES + species, -1)
    own_hand = o["own_hand"] > 0
    in_reserve = jnp.sum(own_hand) + own_deck_size + their_hand_size + their_deck_size
    over = (in_reserve + jnp.sum(occupied) < 5) | (in_reserve == 0)  # as core.step ends a game
    return State(
        queue=jnp.concatenate([cards, jnp.full((C.QUEUE_SLOTS - QUEUE_TOKENS,), -1)]).astype(jnp.int8),
        hand=jnp.stack([own_hand, their_hand]),
        deck=jnp.stack([own_deck, their_deck]).astype(jnp.int8),
        bar=jnp.stack([o["own_bar"] > 0, o["opponent_bar"] > 0]),
        thats_it=jnp.stack([o["own_thats_it"] > 0, o["opponent_thats_it"] > 0]),
        current_player=jnp.zeros((), jnp.int8),
        turn=jnp.round(counts[5] * C.NUM_CARDS).astype(jnp.int8),
        terminated=over,
        rewards=jnp.zeros((C.NUM_PLAYERS,), jnp.float32),
    )


def legal_plies(observation: jax.Array, plies: int) -> tuple:
    """:func:`legal_afterstates`, and with ``plies`` 2 and 3 :func:`legal_replies` and
    :func:`legal_answers`, of one observation in one computation: each ply's successors
    are computed once and feed the next ply (the three functions apart would step the
    engine six times). Returns a ``plies``-tuple of ``(rows, actions)``."""
    counts = split_observation(observation)["counts"]
    to_move = counts[8] > 0
    state = known_state(observation)
    actions, used, after = _successors(state)  # [15]
    rows = jnp.where(used[:, None], _rows(state.bar[None], state.thats_it[None], after, True), 0.0)
    out = [(jnp.where(to_move, rows, 0.0), jnp.where(to_move, actions, A.NUM_ACTIONS))]
    if plies >= 2:  # the opponent's replies, where their hand is known (their deck empty)
        hand_known = to_move & (counts[3] == 0)
        replies, replied, answered = jax.vmap(_successors)(after)  # [15, 15]
        rows = jax.vmap(lambda before, then: _rows(before.bar[None], before.thats_it[None], then, True))(
            after, answered)
        rows = jnp.where(replied[..., None], rows, 0.0)
        valid = hand_known & used[:, None] & (replies < A.NUM_ACTIONS)
        out.append((jnp.where(valid[..., None], rows, 0.0), jnp.where(valid, replies, A.NUM_ACTIONS)))
    if plies >= 3:  # the observer's answers, where both decks are empty
        known = hand_known & (counts[1] == 0)
        answers, used3, then = jax.vmap(jax.vmap(_successors))(answered)  # [15, 15, 15]
        rows = jax.vmap(jax.vmap(lambda before, then: _rows(before.bar[None], before.thats_it[None], then, True)))(
            answered, then)
        rows = jnp.where(used3[..., None], rows, 0.0)
        valid = known & (used[:, None] & replied)[..., None] & (answers < A.NUM_ACTIONS)
        out.append((jnp.where(valid[..., None], rows, 0.0), jnp.where(valid, answers, A.NUM_ACTIONS)))
    return tuple(out)


def legal_afterstates(observation: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The known result of each *legal* action of the observer, from an observation
    (``observe.observe``) of a position where the observer is to move (module docstring).

    Returns:
      ``(rows float32[15, 109], actions int32[15])``: the legal actions' ids in
      ascending order, then ``NUM_ACTIONS`` (31) for unused rows, which are all zero;
      no legal action (all rows unused) when the observer is not to move or the game
      is over.
    """
    return legal_plies(observation, 1)[0]


def legal_replies(observation: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The known result of each legal *reply* of the opponent to each legal action of the
    observer: a second ply, where the opponent's hand is known to the observer (their deck
    is empty, so their hand is every opponent card not yet seen).

    Returns:
      ``(rows float32[15, 15, 109], actions int32[15, 15])``: for each move slot ``k`` of
      :func:`legal_afterstates`, the opponent's legal replies in ascending order, each
      row laid out as an afterstate row (module docstring), told from the observer's side,
      of the reply alone: the queue after it and the cards that entered the bar and THAT'S
      IT on it; then ``NUM_ACTIONS`` for unused rows, which are all zero. No replies (all
      rows unused) where the move slot is unused, the move ends the game, the opponent's
      hand is not known, or the observer is not to move.
    """
    return legal_plies(observation, 2)[1]


def legal_answers(observation: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The known result of each legal *answer* of the observer to each reply of
    :func:`legal_replies`: a third ply, where both decks are empty (the observer knows
    the opponent's hand, and their own next hand is the one they hold, less the move).

    Returns:
      ``(rows float32[15, 15, 15, 109], actions int32[15, 15, 15])``: for each move slot
      ``k`` and reply slot ``r`` of :func:`legal_replies`, the observer's legal answers
      in ascending order, each row the answer's own result from the observer's side (as
      the replies' rows); ``NUM_ACTIONS`` and zero rows for unused ones. No answers where
      the reply slot is unused or the reply ends the game, or either deck holds a card.
    """
    return legal_plies(observation, 3)[2]


def afterstate_features(observation: jax.Array) -> jax.Array:
    """``float32[31, 109]`` the known result of each action of the observer, from an
    observation of a position where the observer is to move (module docstring): the
    rows of :func:`legal_afterstates` at their actions' places, zero elsewhere."""
    return spread(*legal_afterstates(observation))


def from_state(state: State, player) -> jax.Array:
    """``float32[31, 109]`` the result of each action of the player to move in
    ``state``, told from ``player``'s side (module docstring). Reads the full state;
    :func:`legal_afterstates` is what the network sees."""
    return spread(*legal_rows(state, player))


def legal_actions(legal: jax.Array) -> jax.Array:
    """``int32[15]`` the ids where ``legal`` (``bool[31]``) holds, ascending, then
    ``NUM_ACTIONS``: a compaction by rank, without a sort or a scatter."""
    rank = jnp.cumsum(legal) - 1  # [31] place of each legal action among them
    at = legal[None, :] & (rank[None, :] == jnp.arange(MAX_LEGAL_ACTIONS)[:, None])  # [15, 31]
    return jnp.where(jnp.any(at, axis=1), jnp.sum(jnp.where(at, _ACTIONS, 0), axis=1), A.NUM_ACTIONS)


def spread(rows: jax.Array, actions: jax.Array) -> jax.Array:
    """``float32[31, F]``: row ``k`` at action ``actions[k]``, zero where no row goes
    (``actions[k] == NUM_ACTIONS`` goes nowhere)."""
    return jnp.zeros((A.NUM_ACTIONS, rows.shape[-1]), rows.dtype).at[actions].set(rows, mode="drop")


def legal_rows(state: State, player) -> tuple[jax.Array, jax.Array]:
    """``(rows float32[15, 109], actions int32[15])``: the result of each legal action of
    the player to move in ``state``, told from ``player``'s side (layout in the module
    docstring), and the actions (``NUM_ACTIONS`` and a zero row for unused rows)."""
    actions, used, after = _successors(state)
    rows = _rows(state.bar[None], state.thats_it[None], after, as_player(player, C.NUM_PLAYERS) == 0)
    return jnp.where(used[:, None], rows, 0.0), actions


def _successors(state: State) -> tuple[jax.Array, jax.Array, State]:
    """``(actions int32[15], used bool[15], after State[15])``: the legal actions of the
    player to move (:func:`legal_actions`) and the states after them (after action 0 in
    the unused slots)."""
    actions = legal_actions(core.legal_action_mask(state))
    used = actions < A.NUM_ACTIONS
    return actions, used, jax.vmap(core.step, in_axes=(None, 0))(state, jnp.where(used, actions, 0))


def compact_afterstates(observations: jax.Array, capacity: int, reply_capacity: int = 0,
                        answer_capacity: int = 0) -> AfterstateLists:
    """The rows of :func:`legal_afterstates` for a batch, without the unused ones: the
    legal moves of all ``N`` observations one after another, the first ``capacity``
    of them (a position has 4.5 legal moves on average in random play, so a few more
    than that per observation rarely overflow and cost far less than 15 each); and with
    ``reply_capacity``, the rows of :func:`legal_replies` the same way, the replies to
    all listed moves one after another; and with ``answer_capacity``, the rows of
    :func:`legal_answers`, the answers to all listed replies one after another.

    Args:
      observations: ``float32[N, 149]``.
      capacity: ``C``, the number of move rows (static).
      reply_capacity: ``R``, the number of reply rows (static; 0: no replies).
      answer_capacity: ``Q``, the number of answer rows (static; 0: no answers; needs
        ``R`` > 0).

    Returns:
      :class:`~beastybar_jax.games.base.AfterstateLists`: move row ``k`` is the result
      of action ``actions[k]`` for observation ``owners[k]``, ordered by observation, then
      action; reply row ``j`` that of the opponent's reply ``reply_actions[j]`` to move
      row ``reply_owners[j]``; answer row ``i`` that of the observer's answer
      ``answer_actions[i]`` to reply row ``answer_owners[i]``. Unused rows are zero with
      owner ``N`` (``C`` for replies, ``R`` for answers) and action ``NUM_ACTIONS``.
      ``needed`` counts the rows each list needs; where ``complete`` is false some legal
      move, reply or answer got no row, and the caller must use :func:`legal_afterstates`,
      :func:`legal_replies` and :func:`legal_answers` instead.
    """
    num = observations.shape[0]
    counts = split_observation(observations)["counts"]
    to_move = counts[:, 8] > 0
    states = jax.vmap(known_state)(observations)
    legal = jax.vmap(core.legal_action_mask)(states) & to_move[:, None]  # [N, 31]
    owners, actions = _compact(legal, capacity)
    used = owners < num
    before = jax.tree.map(lambda x: x[jnp.minimum(owners, num - 1)], states)  # [C] the owners' states
    after = jax.vmap(core.step)(before, jnp.where(used, actions, 0))
    rows = _rows(before.bar, before.thats_it, after, True)  # known_state's mover is player 0
    needed = [jnp.sum(legal, dtype=jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)]
    rows = jnp.where(used[:, None], rows, 0.0)
    none, no_rows = jnp.zeros((0,), jnp.int32), jnp.zeros((0, rows.shape[-1]))
    if reply_capacity == 0:
        return AfterstateLists(rows=rows, owners=owners, actions=actions, reply_rows=no_rows, reply_owners=none,
                               reply_actions=none, answer_rows=no_rows, answer_owners=none, answer_actions=none,
                               needed=jnp.stack(needed))
    # The opponent's replies where their hand is known (their deck empty); none to a
    # move that ends the game (no legal reply).
    hand_known = (counts[:, 3] == 0)[jnp.minimum(owners, num - 1)] & used
    reply_legal = jax.vmap(core.legal_action_mask)(after) & hand_known[:, None]  # [C, 31]
    reply_owners, reply_actions = _compact(reply_legal, reply_capacity)
    replied = reply_owners < capacity
    moved = jax.tree.map(lambda x: x[jnp.minimum(reply_owners, capacity - 1)], after)  # [R] the moves' results
    replies = jax.vmap(core.step)(moved, jnp.where(replied, reply_actions, 0))
    reply_rows = jnp.where(replied[:, None], _rows(moved.bar, moved.thats_it, replies, True), 0.0)
    needed[1] = jnp.sum(reply_legal, dtype=jnp.int32)
    answer_rows, answer_owners, answer_actions = no_rows, none, none
    if answer_capacity:
        # The observer's answers where their own deck is empty too (their next hand is known).
        own_known = (counts[:, 1] == 0)[jnp.minimum(owners, num - 1)]  # [C]
        answerable = own_known[jnp.minimum(reply_owners, capacity - 1)] & replied  # [R]
        answer_legal = jax.vmap(core.legal_action_mask)(replies) & answerable[:, None]  # [R, 31]
        answer_owners, answer_actions = _compact(answer_legal, answer_capacity)
        answered = answer_owners < reply_capacity
        base = jax.tree.map(lambda x: x[jnp.minimum(answer_owners, reply_capacity - 1)], replies)  # [Q]
        answers = jax.vmap(core.step)(base, jnp.where(answered, answer_actions, 0))
        answer_rows = jnp.where(answered[:, None], _rows(base.bar, base.thats_it, answers, True), 0.0)
        needed[2] = jnp.sum(answer_legal, dtype=jnp.int32)
    return AfterstateLists(rows=rows, owners=owners, actions=actions, reply_rows=reply_rows,
                           reply_owners=reply_owners, reply_actions=reply_actions, answer_rows=answer_rows,
                           answer_owners=answer_owners, answer_actions=answer_actions, needed=jnp.stack(needed))


def _compact(mask: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """``(owners int32[size], actions int32[size])``: the ``(row, action)`` pairs where
    ``mask`` (``bool[M, 31]``) holds, row-major, the first ``size`` of them; then owner
    ``M`` and action ``NUM_ACTIONS``. Each slot finds its row by a binary search over
    the rows' running counts and its action by rank within the row: no scatter (as
    ``jnp.nonzero``'s), which is slow on a CPU (a ``configs/champion_replies.yaml`` iteration: 0.38 s
    against 0.43 s with ``jnp.nonzero``, ``benchmark.py selfplay`` back to back, 2-core AMD
    EPYC, 2026-11-26)."""
    rows = mask.shape[0]
    counts = jnp.sum(mask, axis=1, dtype=jnp.int32)  # [M]
    ends = jnp.cumsum(counts)  # [M] slots taken by rows 0..m
    slots = jnp.arange(size, dtype=jnp.int32)
    # A scan of log2(M) steps on a CPU; where the program is traced for a GPU (games/tracing.py),
    # all comparisons at once: one kernel instead of a loop of small ones. The same result.
    method = "compare_all" if traced_for_gpu() else "scan"
    owners = jnp.searchsorted(ends, slots, side="right", method=method).astype(jnp.int32)  # M past the last pair
    row = jnp.minimum(owners, rows - 1)
    rank = slots - (ends[row] - counts[row])  # the slot's place among its row's pairs
    mine = mask[row]  # [size, 31]
    at = mine & (jnp.cumsum(mine, axis=1, dtype=jnp.int32) - 1 == rank[:, None])
    used = owners < rows
    return jnp.where(used, owners, rows), jnp.where(used, jnp.argmax(at, axis=1), A.NUM_ACTIONS).astype(jnp.int32)


def afterstate_capacity(num_observations: int) -> tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]:
    """``(C, (R1, R2), ((R, Q), ...))``: the move rows :func:`compact_afterstates` gets for
    ``N`` observations; the reply rows a network with replies tries in turn until one has
    room (then the slots); and the reply and answer rows, in pairs, that a network with
    answers tries in turn.

    Moves: 7 a position and 64 more, never more than ``MAX_LEGAL_ACTIONS`` each (where
    nothing would be saved). A position to move has 4.5 legal moves on average in random
    play; in the shipped ``champion``'s self-play a group of 128 held 844 at most.

    Replies: 12 a position and 64 more, then 48 and 64 more. Only positions where the
    opponent's deck is empty have replies, those of a game's last 9 turns. Self-play's
    games move in step (every game lasts 24 turns), so a search's batch is at one turn
    and its tree a few turns deeper; training's batches mix turns. The most replies in a
    group of 128 positions that a search scored, by the root's turn, in ``champion``'s
    self-play (4,096 games x 16 simulations; none before turn 8; the CPU, 2026-11-28):

    =======  ===  ===  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ===
    turn     8    9    10    11    12    13    14    15    16    17    18    19    20    21
    replies  73   508  1344  2945  3857  4576  4699  4996  4929  3670  2801  1821  1271  591
    =======  ===  ===  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ===

    Its training batches (groups of 128 positions drawn across games) held 5.7 replies a
    position on average and 1,154 in a group at most. So the first list serves training
    and the turns with few replies, the second turns 11-19 with a fifth to spare; the
    slots remain for what neither holds.

    Answers, with replies, in (reply, answer) pairs, sized the same way from the play of
    ``champion-cpu`` (``configs/champion.yaml``'s network, 64 games x 8 simulations, so
    groups of 64; the CPU, 2026-11-28):

    - 12 replies a position and 64 more, 36 answers a position and 64 more: training's
      batches (groups of 128 drawn across games held 705 replies and 1,789 answers on
      average, 1,173 and 3,720 at most) and the turns with few or none (0-12 and 20-23; at
      turn 20, 580 replies and 487 answers for 64 positions).
    - 48 replies a position and 64 more, 176 answers a position and 64 more: turns 13-19,
      at most 2,330 replies and 9,020 answers for 64 positions (turn 15: 36 and 141 a
      position).

    Each capacity is a copy of the engine in every program that scores with it, so there
    are few: a pair for the turns without replies too (fewer searches a move than five pairs
    sized for random play). Self-play's searches start at the capacity the previous move's
    needed. The learners score with the first capacity (``afterstate_scorer.MIXED``).
    """
    n = num_observations
    moves = min(MAX_LEGAL_ACTIONS * n, 7 * n + 64)
    replies = (12 * n + 64, 48 * n + 64)
    answers = ((12 * n + 64, 36 * n + 64), (48 * n + 64, 176 * n + 64))
    return moves, replies, answers


def _rows(bar_before: jax.Array, thats_it_before: jax.Array, after: State, is_first) -> jax.Array:
    """``float32[M, 109]`` the rows of ``M`` moves (layout in the module docstring) from
    the states after them (``after``, ``[M]``) and the bars and THAT'S IT before them
    (``bool[M or 1, 2, 12]``), told from player 0's side where ``is_first``."""
    # The queue as the observation encodes it (observe.observe), for every move at once.
    cards = after.queue[:, :QUEUE_TOKENS].astype(jnp.int32)  # [M, 4]
    moves = cards.shape[0]
    occupied = cards >= 0
    mine_card = occupied & ((cards < C.NUM_SPECIES) == is_first)
    queue = jnp.concatenate([
        occupied[..., None] & ((cards % C.NUM_SPECIES)[..., None] == _SPECIES),
        mine_card[..., None], (occupied & ~mine_card)[..., None],
    ], axis=-1).reshape(moves, -1)  # [M, 56]
    new_bar = after.bar & ~bar_before  # [M, 2, 12]
    new_gone = after.thats_it & ~thats_it_before
    mine = lambda x: jnp.where(is_first, x[:, 0], x[:, 1])  # noqa: E731
    theirs = lambda x: jnp.where(is_first, x[:, 1], x[:, 0])  # noqa: E731
    points = jnp.asarray(C.POINTS, jnp.float32)
    ends = after.terminated
    outcome = jnp.where(is_first, after.rewards[:, 0], after.rewards[:, 1])
    pieces = [
        queue.astype(jnp.float32),
        mine(new_bar).astype(jnp.float32), theirs(new_bar).astype(jnp.float32),
        mine(new_gone).astype(jnp.float32), theirs(new_gone).astype(jnp.float32),
        (jnp.sum(mine(new_bar) * points, axis=-1) / 10.0)[:, None],
        (jnp.sum(theirs(new_bar) * points, axis=-1) / 10.0)[:, None],
        ends.astype(jnp.float32)[:, None],
        jnp.where(ends, outcome, 0.0)[:, None],
    ]
    # On a GPU the pieces are computed by kernels of their own, then concatenated. Fused into the
    # concatenation, as XLA would, each of a warp's threads writes a different feature and so runs
    # every piece's computation: self-play's 32 x 6,208 reply rows took 2.6 ms on an H200, 0.59 ms
    # so (docs/performance.md, "Levers"). A CPU's program is left as it was (no faster so).
    if traced_for_gpu():
        pieces = jax.lax.optimization_barrier(pieces)
    return jnp.concatenate([jnp.ones((moves, 1), jnp.float32), *pieces], axis=-1)
