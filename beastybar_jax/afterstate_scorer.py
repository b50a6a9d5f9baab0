"""The afterstate scorer: one to three plies of the game's own lookahead inside the
policy-value network (``network.afterstates``), Beasty Bar's lever for a small network
that plays well from its raw policy.

With ``network.afterstates`` set, the network also computes the game's afterstate features
from its input (:class:`~beastybar_jax.games.base.Afterstates`: ``legal(observation) ->
([K, F], [K])``, for each legal action the known result of playing it, by the game's
engine, and the action's id; for a batch, ``compact`` gives the same rows as lists without
the empty slots). A per-move MLP shared by all actions reads ``[afterstate_a, torso
features]`` and adds a logit per action to the policy head's (an illegal action gets what
the MLP gives an all-zero row), and the value and score heads also see the max over the
legal moves of its hidden units: one ply of calculation inside the network, where the raw
policy can use it. With ``replies: true`` as well, the opponent's legal replies to each
move, where the observer knows their hand (``Afterstates.replies``: Beasty Bar's opponent
deck is empty), go through a per-reply MLP that reads the move's first hidden layer, and
the min and max of its units over the replies enter the move's second layer: a second ply.
With ``answers: true`` too, the observer's own answers to each reply, where both decks are
empty (``Afterstates.answers``), go through a per-answer MLP the same way, and their min
and max enter the reply's second layer: a third ply.

:mod:`beastybar_jax.network` attaches the scorer where the config asks for it; only a game
with an ``afterstates`` capability (Beasty Bar) can have one.
"""

from __future__ import annotations

import functools
from typing import Annotated, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
from pydantic import Field, model_validator

from beastybar_jax.games.base import Afterstates, Game
from beastybar_jax.validation import ConfigError, ConfigModel, Int, check

_HEAD_INIT = nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")


class AfterstateConfig(ConfigModel):
    """The scorer's size and depth (``network.afterstates:`` in a config; ``false`` or
    absent: no scorer, ``true``: these defaults).

    Attributes:
      width: hidden size of the per-move (per-reply, per-answer) MLPs.
      replies: also score each move from the opponent's known replies to it (a second ply).
      answers: also score each reply from the mover's known answers to it (a third ply);
        needs ``replies``.
    """

    location: ClassVar[str] = "network.afterstates"

    width: Annotated[Int, Field(ge=1)] = 32
    replies: bool = False
    answers: bool = False

    @model_validator(mode="after")
    def _plies_in_order(self):
        check(not self.answers or self.replies, self.key("answers"),
              "scores the mover's answers to each of the opponent's replies: it needs "
              "network.afterstates.replies: true")
        return self


def check_game(config: AfterstateConfig, game: Game) -> None:
    """Raise :class:`ConfigError` unless ``game`` gives what ``config`` asks for."""
    check(game.has("afterstates"), "network.afterstates",
          f"needs a game with afterstate features (Game.afterstates); {game.name} has none: set it to false")
    check(not config.replies or game.has("afterstates.replies"), "network.afterstates.replies",
          f"needs a game with reply features (Afterstates.replies); {game.name} has none: set it to false")
    check(not config.answers or game.has("afterstates.answers"), "network.afterstates.answers",
          f"needs a game with answer features (Afterstates.answers); {game.name} has none: set it to false")
    if (game.afterstates.compact is None) != (game.afterstates.capacity is None):
        raise ConfigError(f"{game.name}'s Afterstates gives compact and capacity together, or neither")


def score_moves(config: AfterstateConfig, afterstates: Afterstates, num_actions: int, observation, features,
                tier: int | str | None = None):
    """``(move logits [..., A], pooled move features [..., width], scored)`` for observations
    ``[..., O]`` and their torso features ``[..., D]`` (inside a flax module: the scorer's
    parameters are the submodule ``afterstates``). ``tier``: see :class:`AfterstateScorer`;
    ``scored`` (``bool[...]``, with ``tier=MIXED``; else None): the rows it scored."""
    flat = observation.reshape(-1, observation.shape[-1])
    move_logits, pooled, scored = AfterstateScorer(config, num_actions, afterstates, tier, name="afterstates")(
        flat, features.reshape(flat.shape[0], features.shape[-1]))
    # Sizes spelled out: an empty batch has no -1 to infer.
    return (move_logits.reshape(*observation.shape[:-1], move_logits.shape[-1]),
            pooled.reshape(*observation.shape[:-1], pooled.shape[-1]),
            None if scored is None else scored.reshape(observation.shape[:-1]))


AFTERSTATE_GROUP = 128
"""Observations per list of afterstate rows (:class:`AfterstateScorer`)."""

LEAST_TIER = "afterstates_least_tier"
"""The name under which a scorer with a tier ``k`` sows ``int32[]``, the first of its tiers
whose lists hold every row of the batch (:func:`num_tiers` - 1, the slots, hold every batch).
Where tier ``k``'s replies overflowed, the answers to the replies left out are not counted:
then it is a first tier later than ``k`` that may still be too small."""


def num_tiers(config: AfterstateConfig | None, afterstates: Afterstates | None, num: int,
              observation_size: int) -> int:
    """How many ways a batch of ``num`` observations can be scored: the game's list
    capacities in turn, then the slots (1: the slots only). A scorer with ``tier=k``
    scores the ``k``-th way, without an ``nn.cond``."""
    if config is None:
        return 1
    plan = AfterstateScorer.plan(config, afterstates, num, observation_size)
    return 1 if plan is None else len(plan[2]) + 1


MIXED = "mixed"
"""The scorer's tier for batches that mix positions of every turn (the learners'): the
first list tier, the rows of a group whose lists overflow it not scored (the learners
leave them out)."""


class AfterstateScorer(nn.Module):
    """Observations ``[N, O]`` and their torso features ``[N, D]`` -> ``[N, A]`` move
    logits, ``[N, width]`` pooled move features (max over the legal moves) and, with
    ``tier=MIXED``, ``bool[N]`` the rows scored (else None).

    Each legal move's afterstate row (the game's :class:`~beastybar_jax.games.base.Afterstates`) goes through
    a per-move MLP that also reads the torso features; every action without a row (the
    illegal ones) gets the logit of an all-zero row. With ``replies``
    the opponent's known replies to each move go through a per-reply MLP that also reads
    the move's first hidden layer, and the min and max of its units over the replies
    (with a flag: any replies) enter the move's second layer: a second ply. With
    ``answers`` the mover's known answers to each reply go through a per-answer
    MLP that reads the reply's first hidden layer, and their summary enters the reply's
    second layer the same way: a third ply.

    Where the game can compact them (``Afterstates.compact``), the rows of each
    group of ``AFTERSTATE_GROUP`` observations come as lists (about 6 move rows a
    position instead of the 15 slots of ``Afterstates.legal``, and replies only
    where there are some instead of 15 x 15 slots). The game's capacities
    (``Afterstates.capacity``) are tiers of growing room, for searches, whose batches sit
    at one turn of lockstep games and need little room early and much late.

    Without a ``tier``, where a group's lists overflow, the batch tries the next tier,
    then the per-observation slots, under ``nn.cond`` (only the branch taken runs), so
    the outputs are the same either way. ``tier=k`` scores the batch the ``k``-th way
    (:func:`num_tiers`: the list tiers, then the slots) and sows under ``intermediates`` /
    :data:`LEAST_TIER` the first tier whose lists hold every row: where that is later than
    ``k``, the outputs are not the network's, and the caller must score again at a later
    tier. The search does so once per search, outside its simulation loop, where a
    ``cond`` would stop the GPU for the host at every simulation, and starts self-play's
    next search at the tier this one needed (``search/determinized.py``). ``tier=MIXED`` (the learners,
    ``network.for_training``) is for batches that mix positions of every turn: the first
    list tier (the game's capacities put the one for such batches first, with room to
    spare), and where a group's lists overflow, its rows come back not scored, for the
    learners to leave out: no ``nn.cond`` to the slots, which on a GPU would stop the
    update loop for the host at every update. One list size, not the chain: each size is
    a copy of the game's engine in the learner's program (docs/performance.md, "The search
    on a GPU").

    While parameters are initialized, a game that declares ``Afterstates.max_moves`` gets
    zero rows of the plies' shapes: the parameters depend on shapes only, and the game's
    engine is not traced."""

    config: AfterstateConfig
    num_actions: int
    afterstates: Afterstates  # the game's
    tier: int | str | None = None  # k, MIXED or None (see above)

    def setup(self):
        self.afterstate_in = nn.Dense(self.config.width)
        self.context_in = nn.Dense(self.config.width, use_bias=False)
        self.move_hidden = nn.Dense(self.config.width)
        self.move_logit = nn.Dense(1, kernel_init=_HEAD_INIT)
        if self.config.replies:
            self.reply_in = nn.Dense(self.config.width)
            self.reply_context = nn.Dense(self.config.width, use_bias=False)
            self.reply_hidden = nn.Dense(self.config.width)
            # Zero: a network with replies starts as the one without them.
            self.reply_to_move = nn.Dense(self.config.width, use_bias=False, kernel_init=nn.initializers.zeros_init())
        if self.config.answers:
            self.answer_in = nn.Dense(self.config.width)
            self.answer_context = nn.Dense(self.config.width, use_bias=False)
            self.answer_hidden = nn.Dense(self.config.width)
            # Zero: a network with answers starts as the one without them.
            self.answer_to_reply = nn.Dense(self.config.width, use_bias=False, kernel_init=nn.initializers.zeros_init())

    @staticmethod
    def plan(config: AfterstateConfig, afterstates: Afterstates, num: int, observation_size: int):
        """``(group, capacity, tiers)`` for a batch of ``num`` observations: lists of
        ``capacity`` moves for each ``group`` of observations and the (reply, answer)
        capacities to try in turn; None where the batch is scored in slots (no lists, an
        empty batch, or lists that would save nothing, as for one observation)."""
        if afterstates.compact is None or num == 0:  # an empty batch has no lists to build
            return None
        # Lists for each group of AFTERSTATE_GROUP observations, not for the batch: a
        # list stays on one device where a batch is split over devices in multiples of it.
        group = min(num, AFTERSTATE_GROUP)
        capacity, reply_capacities, *answer_pairs = afterstates.capacity(group)
        slots = afterstates.max_moves or jax.eval_shape(
            afterstates.legal, jax.ShapeDtypeStruct((observation_size,), jnp.float32))[1].shape[-1]
        if capacity >= group * slots:  # no saving
            return None
        # Lists with room for the replies (and answers) of a usual batch first; where they
        # overflow, lists with room for more (the game's reply capacities in turn, or with
        # answers its (reply, answer) pairs), then the slots.
        if not config.replies:
            tiers = ((0, 0),)
        elif not config.answers:
            tiers = tuple((r, 0) for r in reply_capacities)
        else:
            if not answer_pairs:
                raise ValueError("network.afterstates.answers: the game's Afterstates.capacity gives no (reply, answer) "
                                 "capacity pairs")
            tiers = tuple(answer_pairs[0])
        # Whether a batch fits is tested at one tier; that it fits every later one is assumed.
        if any(later < earlier for before, after in zip(tiers, tiers[1:]) for earlier, later in zip(before, after)):
            raise ValueError(f"Afterstates.capacity: each tier must have at least the room of the one before; "
                             f"got (reply, answer) capacities {tiers} for {group} observations")
        return group, capacity, tiers

    def __call__(self, observations, features):
        num = observations.shape[0]
        plan = self.plan(self.config, self.afterstates, num, observations.shape[-1])
        one_tier = isinstance(self.tier, int)
        if not (one_tier or self.tier in (None, MIXED)):
            raise ValueError(f"AfterstateScorer.tier: an int, {MIXED!r} or None, not {self.tier!r}")
        scored = jnp.ones((num,), bool) if self.tier == MIXED else None
        if plan is None:
            if one_tier:
                self.sow("intermediates", LEAST_TIER, jnp.zeros((), jnp.int32))
            return (*self.in_slots(observations, features), scored)
        group, capacity, tiers = plan
        groups = -(-num // group)
        padded = groups * group  # all-zero padding observations (Beasty Bar: not to move, so no rows)
        grouped = lambda x: jnp.pad(x, ((0, padded - num), (0, 0))).reshape(groups, group, -1)  # noqa: E731

        def least_tier(needed):
            """The first tier whose lists hold ``needed`` ``int32[G, 3]`` rows a group."""
            most = jnp.max(needed, axis=0)
            fits = [(most[0] <= capacity) & (most[1] <= replies) & (most[2] <= answers) for replies, answers in tiers]
            return jnp.argmax(jnp.stack(fits + [jnp.ones((), bool)])).astype(jnp.int32)

        if one_tier and self.tier >= len(tiers):
            plies = self.plies(observations)
            used = [jnp.sum(ids.reshape(num, -1) < self.num_actions, axis=1, dtype=jnp.int32) for _, ids in plies]
            per_observation = jnp.stack(used + [jnp.zeros_like(used[0])] * (3 - len(used)), axis=-1)  # [N, 3]
            self.sow("intermediates", LEAST_TIER, least_tier(jnp.sum(grouped(per_observation), axis=1)))
            return (*self.in_slots(observations, features, plies), None)

        def lists_of(tier, scorer, observations):
            return jax.vmap(lambda o: scorer.afterstates.compact(o, capacity, *tiers[tier]))(grouped(observations))

        def score(lists, scorer, observations, features):
            logits, pooled = jax.vmap(scorer.score_lists)(lists, grouped(features))
            return logits.reshape(padded, -1)[:num], pooled.reshape(padded, -1)[:num]

        if one_tier:  # no choice: the first tier that holds every row is told, not acted on
            lists = lists_of(self.tier, self, observations)
            self.sow("intermediates", LEAST_TIER, least_tier(lists.needed))
            return (*score(lists, self, observations, features), None)
        if self.tier == MIXED:  # the first tier; the rows of an overflowing group not scored
            lists = lists_of(0, self, observations)
            scored = jnp.repeat(lists.complete, group, total_repeat_length=padded)[:num]
            return (*score(lists, self, observations, features), scored)

        def in_lists(tier, last, scorer, observations, features):
            lists = lists_of(tier, scorer, observations)
            if tier < last:
                overflow = functools.partial(in_lists, tier + 1, last)
            else:
                overflow = lambda scorer, observations, features: scorer.in_slots(observations, features)  # noqa: E731
            # Only the branch taken runs.
            return nn.cond(jnp.all(lists.complete), functools.partial(score, lists), overflow, scorer, observations,
                           features)

        return (*in_lists(0, len(tiers) - 1, self, observations, features), None)

    def first(self, rows, context):
        """The per-move MLP's first hidden layer for ``rows`` ``[..., F]`` given their
        observations' ``context_in(features)`` (broadcast against them)."""
        return nn.relu(self.afterstate_in(rows) + context)

    def reply_first(self, reply_rows, move_first):
        """The per-reply MLP's first hidden layer for ``reply_rows`` ``[..., F]`` given
        their moves' first hidden layers."""
        return nn.relu(self.reply_in(reply_rows) + self.reply_context(move_first))

    def reply_units(self, reply_first, answer_summary=None):
        """The per-reply MLP's output units, with the answers' ``summary`` if any."""
        if answer_summary is None:
            return nn.relu(self.reply_hidden(reply_first))
        return nn.relu(self.reply_hidden(reply_first) + self.answer_to_reply(answer_summary))

    def answer_units(self, answer_rows, reply_first):
        """The per-answer MLP's output units for ``answer_rows`` ``[..., F]`` given their
        replies' first hidden layers."""
        return nn.relu(self.answer_hidden(nn.relu(self.answer_in(answer_rows) + self.answer_context(reply_first))))

    @staticmethod
    def summary(units, mask, segments):
        """``[..., 2 * width + 1]`` per parent row (a move or a reply): the min and max
        over its children (replies or answers) of their ``units``, and whether it has any
        (zero without). ``mask`` marks the used child rows; ``segments(x, fill, reduce)``
        reduces per-child values ``x`` per parent."""
        has = segments(mask.astype(units.dtype)[..., None], 0.0, "max")  # [..., 1]
        lowest = jnp.where(has > 0, segments(jnp.where(mask[..., None], units, jnp.inf), jnp.inf, "min"), 0.0)
        highest = segments(jnp.where(mask[..., None], units, 0.0), 0.0, "max")  # relu outputs are >= 0
        return jnp.concatenate([lowest, highest, has], axis=-1)

    def second(self, first, summary=None):
        """The per-move MLP's second hidden layer, with the replies' ``summary`` if any."""
        if summary is None:
            return nn.relu(self.move_hidden(first))
        return nn.relu(self.move_hidden(first) + self.reply_to_move(summary))

    def plies(self, observations) -> tuple:
        """The slots of the plies the config asks for: ``((rows [N, K, F], ids [N, K]),
        (reply rows, ids)?, (answer rows, ids)?)``; zero rows while parameters are
        initialized (where the game declares ``max_moves``)."""
        depth = 1 + self.config.replies + self.config.answers
        k, num = self.afterstates.max_moves, observations.shape[0]
        if k and self.is_initializing():
            shapes = [(num,) + (k,) * (ply + 1) for ply in range(depth)]
            return tuple((jnp.zeros(shape + (self.afterstates.size,), jnp.float32),
                          jnp.full(shape, self.num_actions, jnp.int32)) for shape in shapes)
        if self.afterstates.plies is not None:
            return jax.vmap(lambda o: self.afterstates.plies(o, depth))(observations)
        functions = (self.afterstates.legal, self.afterstates.replies, self.afterstates.answers)[:depth]
        return tuple(jax.vmap(f)(observations) for f in functions)

    def in_slots(self, observations, features, plies=None):
        """The scorer on per-observation slots (``Afterstates.legal``: rows
        ``[N, K, F]``, ids ``[N, K]``; ``Afterstates.replies``: ``[N, K, R, F]``,
        ``[N, K, R]``; ``Afterstates.answers``: ``[N, K, R, Q, F]``, ``[N, K, R, Q]``),
        ``plies`` (:meth:`plies`) if already built."""
        plies = self.plies(observations) if plies is None else plies
        afterstates, actions = plies[0]
        # One extra all-zero row: the logit of the actions that have none.
        rows = jnp.concatenate([afterstates, jnp.zeros_like(afterstates[..., :1, :])], axis=-2)  # [N, K + 1, F]
        first = self.first(rows, self.context_in(features)[..., None, :])
        summary = None
        if self.config.replies:
            reply_rows, replies = plies[1]  # [N, K, R, F], [N, K, R]
            reduce = lambda x, fill, how: getattr(jnp, how)(x, axis=-2)  # noqa: E731
            reply_first = self.reply_first(reply_rows, first[..., :-1, None, :])  # [N, K, R, W]
            answer_summary = None
            if self.config.answers:
                answer_rows, answers = plies[2]  # [N, K, R, Q, F], [N, K, R, Q]
                answer_summary = self.summary(self.answer_units(answer_rows, reply_first[..., None, :]),
                                              answers < self.num_actions, reduce)
            summary = self.summary(self.reply_units(reply_first, answer_summary), replies < self.num_actions, reduce)
            summary = jnp.concatenate([summary, jnp.zeros_like(summary[..., :1, :])], axis=-2)  # the zero row's: none
        h = self.second(first, summary)
        row_logits = self.move_logit(h)[..., 0]  # [N, K + 1]
        at = actions[..., :, None] == jnp.arange(self.num_actions)  # [N, K, A]
        has_row = jnp.any(at, axis=-2)
        logits = jnp.sum(jnp.where(at, row_logits[..., :-1, None], 0.0), axis=-2)
        logits = jnp.where(has_row, logits, row_logits[..., -1:])
        used = (actions < self.num_actions)[..., None]
        pooled = jnp.max(jnp.where(used, h[..., :-1, :], 0.0), axis=-2)  # relu outputs are >= 0
        return logits, pooled

    def score_lists(self, lists, features):
        """The scorer on one group's lists (``Afterstates.compact``:
        :class:`~beastybar_jax.games.base.AfterstateLists` of ``C`` moves, ``R``
        replies and ``Q`` answers); features ``[N, D]``."""
        num, capacity = features.shape[0], lists.rows.shape[0]
        context = self.context_in(features)  # [N, W]
        first = self.first(lists.rows, context[jnp.minimum(lists.owners, num - 1)])  # [C, W]
        summary = None
        if self.config.replies:
            def per_parent(owners, parents):
                def reduce(x, fill, how):
                    return getattr(jnp.full((parents, x.shape[-1]), fill, x.dtype).at[owners], how)(x, mode="drop")
                return reduce

            owners, replies = lists.reply_owners, lists.reply_rows.shape[0]
            reply_first = self.reply_first(lists.reply_rows, first[jnp.minimum(owners, capacity - 1)])  # [R, W]
            answer_summary = None
            if self.config.answers:
                answered = lists.answer_owners
                units = self.answer_units(lists.answer_rows, reply_first[jnp.minimum(answered, replies - 1)])
                answer_summary = self.summary(units, answered < replies, per_parent(answered, replies))
            summary = self.summary(self.reply_units(reply_first, answer_summary), owners < capacity,
                                   per_parent(owners, capacity))
        h = self.second(first, summary)  # [C, W]
        row_logits = self.move_logit(h)[..., 0]  # [C]
        zero = self.first(jnp.zeros((num, lists.rows.shape[-1]), lists.rows.dtype), context)
        zero_logits = self.move_logit(self.second(zero, None if summary is None else jnp.zeros(
            (num, summary.shape[-1]), summary.dtype)))  # [N, 1]: the all-zero row's
        logits = jnp.broadcast_to(zero_logits, (num, self.num_actions)).at[lists.owners, lists.actions].set(
            row_logits, mode="drop")
        pooled = jnp.zeros((num, h.shape[-1]), h.dtype).at[lists.owners].max(h, mode="drop")  # relu outputs >= 0
        return logits, pooled
