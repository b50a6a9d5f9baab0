"""Hand-built Beasty Bar positions from readable parts (the rules' tests, the afterstate
tests) and the invariants every state between turns keeps: ``position(queue=[(0, "lion")], hands=(("seal",), ()))``, ``act("parrot", param=2)``."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import cards as C


def card(owner: int, name: str) -> int:
    return owner * C.NUM_SPECIES + C.species_id(name)


def act(name: str, acting: str | None = None, param: int = 0) -> int:
    """Action id: ``act("parrot", param=2)``, ``act("chameleon", "seal")``."""
    return game.action_id(C.species_id(name), None if acting is None else C.species_id(acting), param)


def position(queue=(), hands=((), ()), decks=((), ()), bar=((), ()), mover=0, turn=10, thats_it=None):
    """A state from readable parts. ``queue``: ``[(owner, species name)]`` front
    first; ``hands``/``bar``: species names per player; ``decks``: species names in
    draw order per player. Cards placed nowhere go to THAT'S IT, so every card is
    somewhere."""
    queue_cards = [card(o, s) for o, s in queue] + [-1] * (C.QUEUE_SLOTS - len(queue))
    hand = np.zeros((2, C.NUM_SPECIES), bool)
    deck = np.full((2, C.DECK_SIZE), -1, np.int8)
    bar_mask = np.zeros((2, C.NUM_SPECIES), bool)
    for p in range(2):
        for s in hands[p]:
            hand[p, C.species_id(s)] = True
        for i, s in enumerate(decks[p]):
            deck[p, i] = C.species_id(s)
        for s in bar[p]:
            bar_mask[p, C.species_id(s)] = True
    placed = np.zeros(C.NUM_CARDS, int)
    for c in queue_cards:
        if c >= 0:
            placed[c] += 1
    placed += hand.reshape(-1) + bar_mask.reshape(-1)
    for p in range(2):
        for s in deck[p]:
            if s >= 0:
                placed[p * C.NUM_SPECIES + s] += 1
    assert placed.max() <= 1, "a card is placed twice"
    out = placed.reshape(2, C.NUM_SPECIES) == 0 if thats_it is None else np.asarray(thats_it)
    return game.State(
        queue=jnp.asarray(queue_cards, jnp.int8),
        hand=jnp.asarray(hand),
        deck=jnp.asarray(deck),
        bar=jnp.asarray(bar_mask),
        thats_it=jnp.asarray(out),
        current_player=jnp.asarray(mover, jnp.int8),
        turn=jnp.asarray(turn, jnp.int8),
        terminated=jnp.asarray(False),
        rewards=jnp.zeros(2, jnp.float32),
    )


def invariants(state) -> dict:
    """``bool[]`` checks of one state between turns."""
    cards = jnp.arange(C.NUM_CARDS)
    owner, species = cards // C.NUM_SPECIES, cards % C.NUM_SPECIES
    queue = state.queue.astype(jnp.int32)
    in_queue = jnp.sum(queue[:, None] == cards[None, :], axis=0)
    in_deck = jnp.sum(
        (state.deck.astype(jnp.int32)[owner] == species[:, None]), axis=1
    )
    places = (in_queue + in_deck + state.hand.reshape(-1) + state.bar.reshape(-1)
              + state.thats_it.reshape(-1))
    occupied = queue >= 0
    deck_filled = state.deck >= 0
    bar_points = jnp.sum(jnp.where(state.bar, jnp.asarray(C.POINTS), 0), axis=-1)
    outcome = jnp.sign(bar_points[0] - bar_points[1]).astype(jnp.float32)
    mask = game.legal_action_mask(state)
    return dict(
        every_card_in_one_place=jnp.all(places == 1),
        queue_at_most_four=~occupied[4],
        queue_packed_to_the_front=jnp.all(occupied[:-1] | ~occupied[1:]),
        decks_packed_to_the_front=jnp.all(deck_filled[:, :-1] | ~deck_filled[:, 1:]),
        hand_at_most_four=jnp.all(jnp.sum(state.hand, -1) <= C.HAND_SIZE),
        full_hand_while_deck_lasts=jnp.all(~deck_filled[:, 0] | (jnp.sum(state.hand, -1) == C.HAND_SIZE)),
        at_most_24_turns=state.turn <= C.NUM_CARDS,
        rewards_zero_sum=jnp.sum(state.rewards) == 0,
        rewards_only_at_the_end=state.terminated | jnp.all(state.rewards == 0),
        scores_are_bar_points=jnp.all(state.scores == bar_points),
        rewards_follow_the_scores=~state.terminated | jnp.all(state.rewards == jnp.stack([outcome, -outcome])),
        a_legal_move_while_playing=state.terminated | jnp.any(mask),
        no_legal_move_once_over=~state.terminated | ~jnp.any(mask),
    )
