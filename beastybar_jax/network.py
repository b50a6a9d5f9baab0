"""The policy-value network (flax.linen): observation in, policy logits, value and
an auxiliary score-margin prediction out.

Two torsos share the same heads:

* ``"mlp"``: ``Dense(width)`` then ``depth`` pre-LayerNorm residual blocks
  (``x + Dense(relu(Dense(LayerNorm(x))))``).
* ``"attention"``: a small transformer over card tokens. The observation is cut
  into ``num_tokens`` card tokens (for Beasty Bar: the 4 queue places, each a
  species one-hot plus mine/theirs) and one *table* token, a Dense projection of
  everything else (hands, decks, bars, counts). Tokens get learned position
  embeddings and go through ``depth`` pre-LayerNorm blocks
  (``nn.MultiHeadDotProductAttention`` + MLP). A card token whose features are all
  zero is an empty queue place: it is masked out as an attention key and left out
  of the pooling, so empty places cannot influence the output.

With ``afterstates: true`` the network also computes the game's afterstate features
from its input (``Game.legal_afterstates(observation) -> ([K, F], [K])``: for each legal
action, the known result of playing it, by the game's engine, and the action's id; for a
batch, ``Game.compact_afterstates`` gives the same rows as lists without the empty slots,
see :class:`AfterstateScorer`). A per-move MLP shared by all actions reads
``[afterstate_a, torso features]`` and adds a logit per action to the policy head's (an
illegal action gets what the MLP gives an all-zero row), and the value and score heads
also see the max over the legal moves of its hidden units: one ply of calculation inside
the network, where the raw policy can use it. With ``replies: true`` as well, the
opponent's legal replies to each move, where the observer knows their hand
(``Game.legal_replies``: Beasty Bar's opponent deck is empty), go through a per-reply MLP
that reads the move's first hidden layer, and the min and max of its units over the
replies enter the move's second layer: a second ply. With ``answers: true`` too, the
observer's own answers to each reply, where both decks are empty (``Game.legal_answers``),
go through a per-answer MLP the same way, and their min and max enter the reply's second
layer: a third ply.

Which slice of the observation holds the tokens is the game's
:class:`~beastybar_jax.games.TokenLayout` (``Game.observation_tokens``: ``start``,
``num_tokens``, ``features``); :func:`make_network` takes it from the game, so the
network itself knows nothing about any game.

Computation runs in ``config.dtype`` (float32 or bfloat16); parameters are kept
in float32 and the heads run in float32, so every output is float32.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

from beastybar_jax.games.base import Game, TokenLayout

TORSOS = ("mlp", "attention")
_HEAD_INIT = nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Size and kind of the policy-value network.

    Attributes:
      torso: ``"mlp"`` (residual MLP blocks) or ``"attention"`` (transformer over
        the card tokens plus one table token built from the rest of the observation).
      width: hidden size of every layer (the attention model dimension).
      depth: number of residual blocks / attention layers.
      num_heads: attention heads (attention torso only); must divide ``width``.
      dtype: compute dtype, ``"float32"`` or ``"bfloat16"``; parameters stay float32.
      aux_score_head: predict the final score margin (own minus opponent points,
        divided by the game's ``score_margin_scale``: 10 for Beasty Bar); when off,
        ``score_margin`` is all zeros.
      afterstates: score each move also from its afterstate features (module
        docstring); needs a game with ``legal_afterstates``.
      afterstate_width: hidden size of the per-move MLP.
      replies: also score each move from the opponent's known replies to it (a second
        ply, ``Game.legal_replies``; module docstring); needs ``afterstates``.
      answers: also score each reply from the mover's known answers to it (a third ply,
        ``Game.legal_answers``; module docstring); needs ``replies``.
    """

    torso: str = "mlp"
    width: int = 256
    depth: int = 4
    num_heads: int = 4
    dtype: str = "float32"
    aux_score_head: bool = True
    afterstates: bool = False
    afterstate_width: int = 32
    replies: bool = False
    answers: bool = False

    def __post_init__(self):
        if self.torso not in TORSOS:
            raise ValueError(f"network.torso must be one of {TORSOS}, got {self.torso!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"network.dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"network.width must be a positive integer, got {self.width!r}")
        if not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"network.depth must be an integer >= 0, got {self.depth!r}")
        if not isinstance(self.afterstate_width, int) or self.afterstate_width < 1:
            raise ValueError(f"network.afterstate_width must be a positive integer, got {self.afterstate_width!r}")
        if self.replies and not self.afterstates:
            raise ValueError("network.replies scores the replies to each move's afterstate: it needs "
                             "network.afterstates: true")
        if self.answers and not self.replies:
            raise ValueError("network.answers scores the mover's answers to each of the opponent's replies: it "
                             "needs network.replies: true")
        if self.torso == "attention":
            if not isinstance(self.num_heads, int) or self.num_heads < 1:
                raise ValueError(f"network.num_heads must be a positive integer, got {self.num_heads!r}")
            if self.width % self.num_heads:
                raise ValueError(
                    f"network.width ({self.width}) must be divisible by network.num_heads "
                    f"({self.num_heads}) for the attention torso; change one of them"
                )

    @property
    def compute_dtype(self):
        return DTYPES[self.dtype]


@chex.dataclass(frozen=True)
class NetworkOutput:
    """What the network predicts for a batch of observations.

    Attributes:
      policy_logits: ``float32[B, A]`` unmasked action logits.
      value: ``float32[B]`` in ``[-1, 1]``, expected outcome for the observing player.
      score_margin: ``float32[B]`` predicted final (own - opponent) points divided by
        the game's ``score_margin_scale``.
    """

    policy_logits: chex.Array
    value: chex.Array
    score_margin: chex.Array


class ResidualBlock(nn.Module):
    """``x + Dense(relu(Dense(LayerNorm(x))))``."""

    width: int
    dtype: Any

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        h = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        h = nn.relu(h)
        h = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        return x + h


class MLPTorso(nn.Module):
    """``[B, O] -> [B, width]``: Dense, then ``depth`` residual blocks."""

    width: int
    depth: int
    dtype: Any

    @nn.compact
    def __call__(self, observation):
        x = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32)(observation.astype(self.dtype))
        for _ in range(self.depth):
            x = ResidualBlock(self.width, self.dtype)(x)
        x = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        return nn.relu(x)


class TransformerBlock(nn.Module):
    """Pre-LayerNorm self-attention + MLP block over ``[B, T, width]`` tokens."""

    width: int
    num_heads: int
    dtype: Any

    @nn.compact
    def __call__(self, x, mask):
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        h = nn.MultiHeadDotProductAttention(
            num_heads=self.num_heads, dtype=self.dtype, param_dtype=jnp.float32
        )(h, mask=mask)
        x = x + h
        h = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        h = nn.Dense(2 * self.width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        h = nn.gelu(h)
        h = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32)(h)
        return x + h


class AttentionTorso(nn.Module):
    """``[B, O] -> [B, 2 * width]``: transformer over card tokens + one table token.

    The pooled features are the table token's output concatenated with the mean of
    the non-empty card tokens' outputs.
    """

    width: int
    depth: int
    num_heads: int
    dtype: Any
    layout: TokenLayout

    @nn.compact
    def __call__(self, observation):
        start, num_tokens, features = self.layout
        end = start + num_tokens * features
        if observation.shape[-1] < end:
            raise ValueError(
                f"the attention torso's token layout {self.layout} needs observations of at "
                f"least {end} floats, got {observation.shape[-1]}; pass the game's layout to make_network"
            )
        batch = observation.shape[:-1]
        cards = observation[..., start:end].reshape(*batch, num_tokens, features)
        rest = jnp.concatenate([observation[..., :start], observation[..., end:]], axis=-1)
        occupied = jnp.any(cards != 0, axis=-1)  # [B, T]

        card_tokens = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32, name="card_embed")(
            cards.astype(self.dtype))
        table_token = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32, name="table_embed")(
            rest.astype(self.dtype))
        tokens = jnp.concatenate([table_token[..., None, :], card_tokens], axis=-2)  # [B, T+1, W]
        position = self.param("position_embedding", nn.initializers.normal(0.02),
                              (num_tokens + 1, self.width), jnp.float32)
        tokens = tokens + position.astype(self.dtype)

        valid = jnp.concatenate([jnp.ones((*batch, 1), bool), occupied], axis=-1)  # [B, T+1]
        # Every query may attend to every valid key; the table token is always
        # valid, so no row of the mask is empty (no NaN softmax).
        mask = nn.make_attention_mask(jnp.ones_like(valid), valid)  # [B, 1, T+1, T+1]
        for _ in range(self.depth):
            tokens = TransformerBlock(self.width, self.num_heads, self.dtype)(tokens, mask)
        tokens = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(tokens)

        weights = occupied.astype(self.dtype)[..., None]
        card_mean = jnp.sum(tokens[..., 1:, :] * weights, axis=-2) / jnp.maximum(
            jnp.sum(weights, axis=-2), 1.0)
        return jnp.concatenate([tokens[..., 0, :], card_mean], axis=-1)


AFTERSTATE_GROUP = 128
"""Observations per list of afterstate rows (:class:`AfterstateScorer`)."""


@dataclasses.dataclass(frozen=True)
class AfterstateSource:
    """Where the network gets its afterstate rows: the game's functions (``Game``)."""

    legal: Callable[[jax.Array], tuple]  # Game.legal_afterstates
    compact: Optional[Callable[..., Any]] = None  # Game.compact_afterstates
    capacity: Optional[Callable[[int], tuple]] = None  # Game.afterstate_capacity: (C, (R, ...)[, ((R, Q), ...)])
    replies: Optional[Callable[[jax.Array], tuple]] = None  # Game.legal_replies (network.replies only)
    answers: Optional[Callable[[jax.Array], tuple]] = None  # Game.legal_answers (network.answers only)

    def __post_init__(self):
        if (self.compact is None) != (self.capacity is None):
            raise ValueError("a game with afterstates gives compact_afterstates and afterstate_capacity together, "
                             "or neither")
        if self.answers is not None and self.replies is None:
            raise ValueError("answers are to replies: an AfterstateSource with answers needs replies")


class AfterstateScorer(nn.Module):
    """Observations ``[N, O]`` and their torso features ``[N, D]`` -> ``[N, A]`` move
    logits and ``[N, width]`` pooled move features (max over the legal moves).

    Each legal move's afterstate row (the game's, :class:`AfterstateSource`) goes through
    a per-move MLP that also reads the torso features; every action without a row (the
    illegal ones) gets the logit of an all-zero row. With replies (``network.replies``)
    the opponent's known replies to each move go through a per-reply MLP that also reads
    the move's first hidden layer, and the min and max of its units over the replies
    (with a flag: any replies) enter the move's second layer: a second ply. With answers
    (``network.answers``) the mover's known answers to each reply go through a per-answer
    MLP that reads the reply's first hidden layer, and their summary enters the reply's
    second layer the same way: a third ply.

    Where the game can compact them (``Game.compact_afterstates``), the rows of each
    group of ``AFTERSTATE_GROUP`` observations come as lists (about 6 move rows a
    position instead of the 15 slots of ``Game.legal_afterstates``, and replies only
    where there are some instead of 15 x 15 slots). Where a group's lists overflow, the
    batch tries the next of the game's reply capacities (``Game.afterstate_capacity``),
    then the per-observation slots, under ``nn.cond`` (only the branch taken runs), so the
    outputs are the same either way."""

    width: int
    num_actions: int
    source: AfterstateSource

    def setup(self):
        self.afterstate_in = nn.Dense(self.width)
        self.context_in = nn.Dense(self.width, use_bias=False)
        self.move_hidden = nn.Dense(self.width)
        self.move_logit = nn.Dense(1, kernel_init=_HEAD_INIT)
        if self.source.replies is not None:
            self.reply_in = nn.Dense(self.width)
            self.reply_context = nn.Dense(self.width, use_bias=False)
            self.reply_hidden = nn.Dense(self.width)
            # Zero: a network with replies starts as the one without them.
            self.reply_to_move = nn.Dense(self.width, use_bias=False, kernel_init=nn.initializers.zeros_init())
        if self.source.answers is not None:
            self.answer_in = nn.Dense(self.width)
            self.answer_context = nn.Dense(self.width, use_bias=False)
            self.answer_hidden = nn.Dense(self.width)
            # Zero: a network with answers starts as the one without them.
            self.answer_to_reply = nn.Dense(self.width, use_bias=False, kernel_init=nn.initializers.zeros_init())

    def __call__(self, observations, features):
        num = observations.shape[0]
        if self.source.compact is None or num == 0:  # an empty batch has no lists to build
            return self.in_slots(observations, features)
        # Lists for each group of AFTERSTATE_GROUP observations, not for the batch: a
        # list stays on one device where a batch is split over devices in multiples of it.
        group = min(num, AFTERSTATE_GROUP)
        groups = -(-num // group)
        capacity, reply_capacities, *answer_pairs = self.source.capacity(group)
        slots = jax.eval_shape(self.source.legal, observations[0])[1].shape[-1]
        if capacity >= group * slots:  # no saving: a single observation, say
            return self.in_slots(observations, features)
        padded = groups * group  # all-zero padding observations (Beasty Bar: not to move, so no rows)
        grouped = lambda x: jnp.pad(x, ((0, padded - num), (0, 0))).reshape(groups, group, -1)  # noqa: E731
        # Lists with room for the replies (and answers) of a usual batch first; where they
        # overflow, lists with room for more (the game's reply capacities in turn, or with
        # answers its (reply, answer) pairs), then the slots. Only the branch taken runs.
        if self.source.replies is None:
            tiers = ((0, 0),)
        elif self.source.answers is None:
            tiers = tuple((r, 0) for r in reply_capacities)
        else:
            if not answer_pairs:
                raise ValueError("network.answers: the game's afterstate_capacity gives no (reply, answer) "
                                 "capacity pairs")
            tiers = tuple(answer_pairs[0])

        def in_lists(tier, scorer, observations, features):
            lists = jax.vmap(lambda o: scorer.source.compact(o, capacity, *tiers[tier]))(grouped(observations))

            def score(scorer, observations, features):
                logits, pooled = jax.vmap(scorer.score_lists)(lists, grouped(features))
                return logits.reshape(padded, -1)[:num], pooled.reshape(padded, -1)[:num]

            if tier + 1 < len(tiers):
                overflow = functools.partial(in_lists, tier + 1)
            else:
                overflow = lambda scorer, observations, features: scorer.in_slots(observations, features)  # noqa: E731
            return nn.cond(jnp.all(lists.complete), score, overflow, scorer, observations, features)

        return in_lists(0, self, observations, features)

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

    def in_slots(self, observations, features):
        """The scorer on per-observation slots (``Game.legal_afterstates``: rows
        ``[N, K, F]``, ids ``[N, K]``; ``Game.legal_replies``: ``[N, K, R, F]``,
        ``[N, K, R]``; ``Game.legal_answers``: ``[N, K, R, Q, F]``, ``[N, K, R, Q]``)."""
        afterstates, actions = jax.vmap(self.source.legal)(observations)
        # One extra all-zero row: the logit of the actions that have none.
        rows = jnp.concatenate([afterstates, jnp.zeros_like(afterstates[..., :1, :])], axis=-2)  # [N, K + 1, F]
        first = self.first(rows, self.context_in(features)[..., None, :])
        summary = None
        if self.source.replies is not None:
            reply_rows, replies = jax.vmap(self.source.replies)(observations)  # [N, K, R, F], [N, K, R]
            reduce = lambda x, fill, how: getattr(jnp, how)(x, axis=-2)  # noqa: E731
            reply_first = self.reply_first(reply_rows, first[..., :-1, None, :])  # [N, K, R, W]
            answer_summary = None
            if self.source.answers is not None:
                answer_rows, answers = jax.vmap(self.source.answers)(observations)  # [N, K, R, Q, F], [N, K, R, Q]
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
        """The scorer on one group's lists (``Game.compact_afterstates``:
        :class:`~beastybar_jax.games.base.AfterstateLists` of ``C`` moves, ``R``
        replies and ``Q`` answers); features ``[N, D]``."""
        num, capacity = features.shape[0], lists.rows.shape[0]
        context = self.context_in(features)  # [N, W]
        first = self.first(lists.rows, context[jnp.minimum(lists.owners, num - 1)])  # [C, W]
        summary = None
        if self.source.replies is not None:
            def per_parent(owners, parents):
                def reduce(x, fill, how):
                    return getattr(jnp.full((parents, x.shape[-1]), fill, x.dtype).at[owners], how)(x, mode="drop")
                return reduce

            owners, replies = lists.reply_owners, lists.reply_rows.shape[0]
            reply_first = self.reply_first(lists.reply_rows, first[jnp.minimum(owners, capacity - 1)])  # [R, W]
            answer_summary = None
            if self.source.answers is not None:
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


class PolicyValueNet(nn.Module):
    """Observation ``[B, O]`` -> :class:`NetworkOutput`.

    Attributes:
      config: the :class:`NetworkConfig`.
      num_actions: ``A``, size of the policy head.
      token_layout: token layout for the attention torso (``None`` for games without
        tokens; ignored by ``"mlp"``).
      afterstates: the game's afterstate functions (``config.afterstates`` only).
    """

    config: NetworkConfig
    num_actions: int
    token_layout: Optional[TokenLayout] = None
    afterstates: Optional[AfterstateSource] = None

    @nn.compact
    def __call__(self, observation) -> NetworkOutput:
        cfg = self.config
        dtype = cfg.compute_dtype
        observation = jnp.asarray(observation, jnp.float32)
        if cfg.afterstates and self.afterstates is None:
            raise ValueError("network.afterstates: build the network with make_network(config, game) from a "
                             "game with legal_afterstates")
        if cfg.torso == "mlp":
            features = MLPTorso(cfg.width, cfg.depth, dtype)(observation)
        else:
            if self.token_layout is None:
                raise ValueError("the attention torso needs the game's observation tokens (Game.observation_tokens); "
                                 "this game has none: use network.torso=mlp")
            features = AttentionTorso(cfg.width, cfg.depth, cfg.num_heads, dtype, self.token_layout)(observation)
        # The heads are tiny; running them in float32 keeps logits and values precise
        # under bfloat16 compute.
        # Small initial head weights: a fresh network starts near a uniform prior and
        # a zero value, which is what search expects from an untrained evaluator.
        features = features.astype(jnp.float32)
        head = lambda size, name: nn.Dense(size, param_dtype=jnp.float32, kernel_init=_HEAD_INIT, name=name)
        policy_logits = head(self.num_actions, "policy_head")(features)
        if cfg.afterstates:
            flat = observation.reshape(-1, observation.shape[-1])
            move_logits, pooled = AfterstateScorer(cfg.afterstate_width, self.num_actions, self.afterstates,
                                                   name="afterstates")(flat, features.reshape(flat.shape[0],
                                                                                              features.shape[-1]))
            # Sizes spelled out: an empty batch has no -1 to infer.
            move_logits = move_logits.reshape(*observation.shape[:-1], move_logits.shape[-1])
            pooled = pooled.reshape(*observation.shape[:-1], pooled.shape[-1])
            policy_logits = policy_logits + move_logits
            features = jnp.concatenate([features, pooled], axis=-1)
        value = jnp.tanh(head(1, "value_head")(features)[..., 0])
        if cfg.aux_score_head:
            score_margin = head(1, "score_head")(features)[..., 0]
        else:
            score_margin = jnp.zeros(features.shape[:-1], jnp.float32)
        return NetworkOutput(policy_logits=policy_logits, value=value, score_margin=score_margin)


def make_network(config: NetworkConfig, game: Game | int,
                 token_layout: TokenLayout | None = None) -> PolicyValueNet:
    """The network for ``game``: ``game.num_actions`` policy logits and, for the attention
    torso, the game's token layout (``game.observation_tokens``).

    ``game`` may also be a number of actions, with ``token_layout`` given explicitly."""
    if not isinstance(config, NetworkConfig):
        raise TypeError(f"make_network expects a NetworkConfig, got {type(config).__name__}")
    afterstates = None
    if isinstance(game, Game):
        num_actions, token_layout = game.num_actions, token_layout or game.observation_tokens
        if config.afterstates:
            if game.legal_afterstates is None:
                raise ValueError(f"network.afterstates needs a game with afterstate features; {game.name} has "
                                 f"none: set network.afterstates: false")
            if config.replies and game.legal_replies is None:
                raise ValueError(f"network.replies needs a game with reply features; {game.name} has none: "
                                 f"set network.replies: false")
            if config.answers and game.legal_answers is None:
                raise ValueError(f"network.answers needs a game with answer features; {game.name} has none: "
                                 f"set network.answers: false")
            afterstates = AfterstateSource(game.legal_afterstates, game.compact_afterstates, game.afterstate_capacity,
                                           game.legal_replies if config.replies else None,
                                           game.legal_answers if config.answers else None)
    else:
        num_actions = int(game)
        if config.afterstates:
            raise ValueError("network.afterstates needs the Game (its legal_afterstates), not a number of actions")
    layout = None if token_layout is None else TokenLayout(*token_layout)
    return PolicyValueNet(config=config, num_actions=num_actions, token_layout=layout, afterstates=afterstates)


def init_params(network: PolicyValueNet, key: jax.Array, observation_size: int):
    """Fresh float32 variables (``{"params": ...}``) for ``network.apply``.

    Under ``jit``: the variables depend on no output of the forward pass, so XLA drops it,
    where an eager ``init`` runs it op by op (with afterstates and replies, 225 engine
    steps: half a minute on a CPU)."""
    return jax.jit(network.init)(key, jnp.zeros((1, observation_size), jnp.float32))


def count_params(params) -> int:
    """Number of scalars in a parameter tree."""
    return int(sum(x.size for x in jax.tree.leaves(params)))
