"""The reference project's hand-written opponents, re-implemented from their
decision rules (docs/evaluating.md, "The baselines"), so our win rates compare with theirs.

Each agent applies every legal move to a world the mover may know (``one_ply``:
``game.step`` on ``game.sample_world`` for the mover, i.e. on-play ability,
recurring phase and five-animal check), scores the resulting table, and plays
the best move. The 31 moves are scored at once with ``vmap``. The card the
mover draws is hidden from them, so no score reads it: hands are taken after
the play, before the draw. Nothing a score reads depends on the sampled hidden
cards, so the agents are deterministic except in ties, which they break as the
reference does: uniformly at random among the moves within 1e-6 of the best.

Every score is an exact multiple of ``1 / HEURISTIC_GRID`` (heuristic) or
``1 / OUTCOME_GRID`` (outcome_heuristic): the coefficients are decimals and the
only fractions are ``index / queue length`` with lengths 1..5. We compute in
float32 and snap the result to that grid, so moves the reference scores equal
(in float64, where rounding noise is far below its 1e-6 tie tolerance) are
bit-equal here too, and distinct scores stay at least 1/3000 apart; without the
snap, float32 rounding (~1e-5 at these magnitudes) would decide ties.
``tests/test_heuristic_rules.py`` checks that the unsnapped scores lie on the grid.

The rules follow the reference's code as docs/evaluating.md states it; in particular:
- heuristic lion: +2 only if the queue's first card after the move is the
  mover's lion -- a lion that went on into the bar in the five-animal check
  does not count. Places (lion, kangaroo, giraffe) are places in the queue
  after the move; a played kangaroo or giraffe cannot reach the bar in its own
  move (it lands at place 2 or later of a five-card queue);
- heuristic snake: bonus when the mover has more cards in the queue after the
  move than before it;
- heuristic zebra: opponent hippo/crocodile looked for in the queue after the
  move;
- outcome_heuristic: +1.5 per opponent crocodile/hippo/lion/zebra/giraffe that
  left the queue, into the bar or THAT'S IT (count in the queue before minus
  after, at least 0);
- outcome_heuristic monkey: +15 if the opponent's hippos/crocodiles in the
  queue decreased, and independently +12 if an opponent monkey was in the
  queue before the move.

Where the written rules leave a detail open we chose, and document:
- "the species played" is the card's species: a chameleon gets the chameleon
  bonus, never the copied species' bonus;
- "queue length" in the material formula is the length after the move;
  outcome_heuristic's "visible cards" (queue + bar + THAT'S IT) and the
  parrot's "index / length" are read before the move.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.choice import random_best
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar import core
from beastybar_jax.games.beastybar.observe import sample_world
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.beastybar.actions import ACTION_ACTING_SPECIES, ACTION_CARD_SPECIES, ACTION_PARAM

def one_ply(state: State, key: jax.Array) -> tuple[State, State, jax.Array]:
    """Every move of the player to move, applied to a world the mover may know.

    The table after a move (queue, bar, THAT'S IT) does not depend on hidden
    cards, but ``game.step`` also draws the mover's next card, which the mover
    cannot know. So the moves are applied to ``observe.sample_world`` for the
    mover, and callers must not score by the drawn card (use
    ``hand_after_play``).

    Returns:
      ``(world, after, mask)``: the sampled world (unbatched), the states after
      each action (batched ``[A]``; illegal actions give forfeited states, so
      mask them), and ``bool[A]`` the legal actions.
    """
    world = sample_world(state, state.current_player, key)
    actions = jnp.arange(len(ACTION_CARD_SPECIES), dtype=jnp.int32)
    after = jax.vmap(core.step, in_axes=(None, 0))(world, actions)
    return world, after, core.legal_action_mask(state)


def hand_after_play(state: State) -> jax.Array:
    """``bool[A, 12]`` the mover's hand after each action, before drawing."""
    hand = state.hand[state.current_player]
    played = jnp.asarray(ACTION_CARD_SPECIES)[:, None] == jnp.arange(C.NUM_SPECIES)[None, :]
    return hand[None, :] & ~played


# Built with NumPy and put on the device once: an eager jnp op here would compile a program at import.
_POINTS, _CARD_SPECIES, _ACTING_SPECIES, _PARAM, _SLOT, _OUTCOME_QUEUE_WEIGHTS, _BIG_FIVE, _RECURRING = jax.device_put((
    C.POINTS.astype(np.float32), ACTION_CARD_SPECIES, ACTION_ACTING_SPECIES, ACTION_PARAM,
    np.arange(C.QUEUE_SLOTS, dtype=np.int32), np.array([0.53, 0.37, 0.25, 0.27, 0.10], np.float32),
    np.isin(np.arange(C.NUM_SPECIES), [C.CROCODILE, C.HIPPO, C.LION, C.ZEBRA, C.GIRAFFE]),
    np.isin(np.arange(C.NUM_SPECIES), [C.HIPPO, C.CROCODILE, C.GIRAFFE])))

HEURISTIC_BAR_WEIGHTS = {"heuristic": 2.0, "aggressive": 3.0, "defensive": 1.0}
# Denominators of the exact scores: heuristic coefficients are tenths and its queue
# weight is 1.1 - 0.8 * index / length (length 1..5), so sixhundredths; outcome's
# are thousandths (1.5 x 0.6 x 0.53 = 0.477) and 0.5 x index / length, so 1/3000.
HEURISTIC_GRID = 600.0
OUTCOME_GRID = 3000.0


def _points(mask):
    """Points of a ``bool[..., 12]`` species mask."""
    return jnp.sum(mask * _POINTS, axis=-1)


def _snap(scores, grid):
    """``scores`` rounded to the nearest multiple of ``1 / grid`` (see the module docstring)."""
    return jnp.round(scores * grid) / grid


def _queue_parts(queue, mover):
    """For a ``[5]`` queue: (present, own, opponent, species, points) per slot."""
    queue = queue.astype(jnp.int32)
    present = queue >= 0
    species = jnp.where(present, queue % C.NUM_SPECIES, 0)
    own = present & (queue // C.NUM_SPECIES == mover)
    opponent = present & ~own
    return present, own, opponent, species, jnp.where(present, _POINTS[species], 0.0)


class _Move:
    """What every move does to the table, from the mover's side. Arrays are ``[A, ...]``."""

    def __init__(self, world: State, after: State):
        self.world, self.after = world, after
        p = world.current_player.astype(jnp.int32)
        o = 1 - p
        self.mover = p
        self.bar_gain_own = _points(after.bar[:, p] & ~world.bar[p])
        self.bar_gain_opp = _points(after.bar[:, o] & ~world.bar[o])
        self.new_thats_it_own = after.thats_it[:, p] & ~world.thats_it[p]  # [A, 12]
        self.new_thats_it_opp = after.thats_it[:, o] & ~world.thats_it[o]
        self.lost_own = _points(self.new_thats_it_own)
        self.lost_opp = _points(self.new_thats_it_opp)
        card = p * C.NUM_SPECIES + _CARD_SPECIES  # [A]
        at = after.queue.astype(jnp.int32) == card[:, None]  # [A, 5]
        # place of the played card in the queue after the move; -1 if it left the
        # queue (into the bar, or THAT'S IT): a lion that went on into the bar is
        # not "the first card of the queue".
        self.place = jnp.where(jnp.any(at, 1), jnp.argmax(at, 1), -1)
        # the parrot's target (by card or by a chameleon copying a parrot), before the move
        before = world.queue.astype(jnp.int32)
        target = before[jnp.clip(_PARAM, 0, C.QUEUE_SLOTS - 1)]
        self.target_present = (_ACTING_SPECIES == C.PARROT) & (target >= 0)
        self.target_own = target // C.NUM_SPECIES == p
        self.target_species = jnp.where(target >= 0, target % C.NUM_SPECIES, 0)
        self.target_points = _POINTS[self.target_species]
        self.length_before = jnp.sum(before >= 0)


def heuristic_scores(world: State, after: State, bar_weight: float) -> jax.Array:
    """``float32[A]`` the reference ``heuristic`` score of each move (material + species bonus)."""
    m = _Move(world, after)
    p, o = m.mover, 1 - m.mover
    # Material after the move.
    material = bar_weight * (_points(after.bar[:, p]) - _points(after.bar[:, o]))
    present, own, opp, species, pts = jax.vmap(_queue_parts, in_axes=(0, None))(after.queue, p)
    length = jnp.maximum(jnp.sum(present, axis=1, keepdims=True), 1)
    f = 1.0 - _SLOT[None, :] / length
    queue_weight = 1.1 * f + 0.3 * (1.0 - f)
    material += jnp.sum(queue_weight * pts * (own.astype(jnp.float32) - opp), axis=1)
    material += -0.5 * _points(after.thats_it[:, p]) + 0.5 * _points(after.thats_it[:, o])
    material += 0.1 * _points(hand_after_play(world))

    s = _CARD_SPECIES
    bonus = jnp.zeros(len(ACTION_CARD_SPECIES), jnp.float32)
    skunk = jnp.where(m.lost_opp >= 5, 3.0, jnp.where(m.lost_opp >= 3, 1.5,
                      jnp.where((m.lost_opp == 0) & (m.lost_own > 0), -2.0, 0.0)))
    bonus += jnp.where(s == C.SKUNK, skunk, 0.0)
    parrot = jnp.where(m.target_own, -0.5, 0.5) * m.target_points
    bonus += jnp.where((s == C.PARROT) & m.target_present, parrot, 0.0)
    bonus += jnp.where((s == C.LION) & (m.place == 0), 2.0, 0.0)
    bonus += jnp.where((s == C.MONKEY) & (m.lost_opp >= 4), 2.5, 0.0)
    seal = jnp.where(m.bar_gain_own > m.bar_gain_opp, 1.5, jnp.where(m.bar_gain_own < m.bar_gain_opp, -1.0, 0.0))
    bonus += jnp.where(s == C.SEAL, seal, 0.0)
    _, own_before, _, _, _ = _queue_parts(world.queue, p)
    more_in_queue = jnp.sum(own, 1) > jnp.sum(own_before)  # the mover's own cards, after vs before
    snake = 0.5 * jnp.sum(jnp.where(own & (_SLOT[None, :] < 2), pts, 0.0), axis=1)
    bonus += jnp.where((s == C.SNAKE) & more_in_queue, snake, 0.0)
    big_opp_after = jnp.any(opp & ((species == C.HIPPO) | (species == C.CROCODILE)), axis=1)
    bonus += jnp.where(s == C.ZEBRA, jnp.where(big_opp_after, 1.5, -0.5), 0.0)
    bonus += jnp.where((s == C.KANGAROO) & (m.place >= 0) & (m.place <= 1), 1.0, 0.0)
    giraffe = jnp.where(m.place == 0, 1.5, jnp.where(m.place == 1, 0.5, 0.0))
    bonus += jnp.where(s == C.GIRAFFE, giraffe, 0.0)
    bonus += jnp.where(s == C.CROCODILE, 0.3 * m.lost_opp, 0.0)
    bonus += jnp.where(s == C.CHAMELEON, 0.1 * (_ACTING_SPECIES + 1), 0.0)
    return _snap(material + bonus, HEURISTIC_GRID)


def _outcome_queue_value(queue, mover):
    _, own, opp, _, pts = _queue_parts(queue, mover)
    return jnp.sum(_OUTCOME_QUEUE_WEIGHTS * pts * (own - 0.6 * opp), axis=-1)


def outcome_scores(world: State, after: State) -> jax.Array:
    """``float32[A]`` the reference ``outcome_heuristic`` score of each move."""
    m = _Move(world, after)
    p = m.mover
    score = 3.0 * m.bar_gain_own - 2.0 * m.bar_gain_opp - 2.5 * m.lost_own + 2.0 * m.lost_opp
    value_after = jax.vmap(_outcome_queue_value, in_axes=(0, None))(after.queue, p)
    score += 1.5 * (value_after - _outcome_queue_value(world.queue, p))
    _, own_after, opp_after, species_after, _ = jax.vmap(_queue_parts, in_axes=(0, None))(after.queue, p)
    _, _, opp_before, species_before, _ = _queue_parts(world.queue, p)
    score += jnp.where(jnp.any(own_after[:, :2], axis=1), 2.0, 0.0)
    # opponent's big five that left the queue, into the bar or THAT'S IT
    big_five_before = jnp.sum(opp_before & _BIG_FIVE[species_before])
    big_five_after = jnp.sum(opp_after & _BIG_FIVE[species_after], axis=1)
    score += 1.5 * jnp.maximum(big_five_before - big_five_after, 0)

    s = _CARD_SPECIES
    index_fraction = 1.0 - _PARAM / jnp.maximum(m.length_before, 1)
    parrot_opp = (0.4 * m.target_points + 1.5 * _BIG_FIVE[m.target_species]
                  + 1.0 * _RECURRING[m.target_species] + 0.5 * index_fraction)
    parrot = jnp.where(m.target_own, -0.8 * m.target_points, parrot_opp)
    score += jnp.where((s == C.PARROT) & m.target_present, parrot, 0.0)
    score += jnp.where(s == C.SKUNK, 0.5 * (m.lost_opp - m.lost_own), 0.0)

    big_before = jnp.sum(opp_before & ((species_before == C.HIPPO) | (species_before == C.CROCODILE)))
    big_after = jnp.sum(opp_after & ((species_after == C.HIPPO) | (species_after == C.CROCODILE)), axis=1)
    opp_monkey = jnp.any(opp_before & (species_before == C.MONKEY))
    monkey = jnp.where(big_after < big_before, 15.0, 0.0) + jnp.where(opp_monkey, 12.0, 0.0)
    score += jnp.where(s == C.MONKEY, monkey, 0.0)

    visible = jnp.sum(world.queue >= 0) + jnp.sum(world.bar) + jnp.sum(world.thats_it)
    early = (s == C.HIPPO) | (s == C.CROCODILE) | (s == C.GIRAFFE)
    late = (s == C.PARROT) | (s == C.SKUNK) | (s == C.CROCODILE)
    score += jnp.where(early & (visible <= 3), 0.5, 0.0)
    score += jnp.where(late & (visible >= 8), 0.3, 0.0)
    return _snap(score, OUTCOME_GRID)


def make_heuristic_act(bar_weight: float):
    """``act`` of the material + bonus heuristic with the given bar weight."""

    def act(state: State, key: jax.Array) -> jax.Array:
        world_key, tie_key = jax.random.split(key)
        world, after, mask = one_ply(state, world_key)
        return random_best(heuristic_scores(world, after, bar_weight), mask, tie_key)

    return act


def outcome_heuristic_act(state: State, key: jax.Array) -> jax.Array:
    world_key, tie_key = jax.random.split(key)
    world, after, mask = one_ply(state, world_key)
    return random_best(outcome_scores(world, after), mask, tie_key)


def heuristic_act(name: str = "heuristic"):
    """``act`` of ``heuristic`` (bar weight 2), ``aggressive`` (3) or ``defensive`` (1)."""
    if name not in HEURISTIC_BAR_WEIGHTS:
        raise ValueError(f"unknown heuristic {name!r}; expected one of {', '.join(HEURISTIC_BAR_WEIGHTS)}")
    return make_heuristic_act(HEURISTIC_BAR_WEIGHTS[name])


def greedy_act(state: State, key: jax.Array) -> jax.Array:
    """The move with the best bar-points difference (mover minus opponent) right
    after it; ties (most turns: no card enters the bar) broken at random."""
    world_key, tie_key = jax.random.split(key)
    world, after, mask = one_ply(state, world_key)
    mover = world.current_player.astype(jnp.int32)
    scores = after.scores  # [A, 2]
    margin = (scores[:, mover] - scores[:, 1 - mover]).astype(jnp.float32)
    return random_best(margin, mask, tie_key)


# Beasty Bar's own agents for the registry (Game.agents.baselines): name -> factory() -> act.
AGENTS = (
    ("greedy", lambda: greedy_act),
    ("heuristic", lambda: heuristic_act("heuristic")),
    ("aggressive", lambda: heuristic_act("aggressive")),
    ("defensive", lambda: heuristic_act("defensive")),
    ("outcome_heuristic", lambda: outcome_heuristic_act),
)
