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

With ``afterstates`` set (:mod:`beastybar_jax.afterstate_scorer`) the network also scores
each legal move from its afterstate, computed by the game's own engine from the input: one
to three plies of lookahead whose per-move logits add to the policy head's and whose pooled
features the value and score heads also read.

Which slice of the observation holds the tokens is the game's
:class:`~beastybar_jax.games.TokenLayout` (``Game.tokens``: ``start``,
``num_tokens``, ``features``); :func:`make_network` takes it from the game, so the
network itself knows nothing about any game.

Computation runs in ``config.dtype`` (float32 or bfloat16); parameters are kept
in float32 and the heads run in float32, so every output is float32.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, ClassVar, Literal, Optional

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.extend import core as jax_core
from pydantic import Field, field_validator, model_validator

from beastybar_jax import afterstate_scorer
from beastybar_jax.afterstate_scorer import AfterstateConfig
from beastybar_jax import torso_kernel
from beastybar_jax.games.base import Afterstates, Game, TokenLayout
from beastybar_jax.games.tracing import pallas_kernels
from beastybar_jax.validation import ConfigError, ConfigModel, Int, check

TORSOS = ("mlp", "attention")
_HEAD_INIT = nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class NetworkConfig(ConfigModel):
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
      afterstates: the afterstate scorer (:class:`~beastybar_jax.afterstate_scorer.AfterstateConfig`:
        ``width``, ``replies``, ``answers``), or None (``false``) for none; ``true``: its
        defaults. Needs a game with ``Game.afterstates``.
      torso_kernel: the MLP torso where the search and PPO's rollout apply the network
        (never differentiated): ``"auto"``, one Pallas kernel where traced for a GPU in
        bfloat16 and the network scores afterstates (``torso_kernel.py``), else XLA's
        operations (on an H200, XLA's were faster without afterstates at 4,096-65,536 rows,
        the kernel with them: docs/performance.md); ``"xla"``, XLA's operations always.
        The outputs agree to bfloat16's rounding; the learners use XLA's.
    """

    location: ClassVar[str] = "network"

    torso: Literal["mlp", "attention"] = "mlp"
    width: Annotated[Int, Field(ge=1)] = 256
    depth: Annotated[Int, Field(ge=0)] = 4
    num_heads: Annotated[Int, Field(ge=1)] = 4
    dtype: Literal["float32", "bfloat16"] = "float32"
    aux_score_head: bool = True
    afterstates: Optional[AfterstateConfig] = None
    torso_kernel: Literal["auto", "xla"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _flat_afterstate_keys(cls, data):
        """The 0.2 form of the scorer's keys, flat in ``network:`` (``afterstates: true,
        afterstate_width: 32, replies, answers``), as saved runs (their ``config.json``, the
        shipped champion's) and ``--set network.replies=false`` write them: merged into
        ``afterstates``."""
        names = {"afterstate_width": "width", "replies": "replies", "answers": "answers"}
        if not isinstance(data, dict) or not set(names) & set(data):
            return data
        data = dict(data)
        given = {names[k]: data.pop(k) for k in list(data) if k in names}
        afterstates = data.get("afterstates")
        if afterstates is True or isinstance(afterstates, dict):
            data["afterstates"] = {**(afterstates if isinstance(afterstates, dict) else {}), **given}
        elif given.get("replies") or given.get("answers"):
            raise ConfigError("config key 'network.replies' (or 'network.answers') scores the replies to each move's "
                              "afterstate: it needs network.afterstates, e.g. network.afterstates: {replies: true}",
                              key="network.replies")
        return data

    @field_validator("afterstates", mode="before")
    @classmethod
    def _on_or_off(cls, value):
        return {True: {}, False: None}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _heads_divide_width(self):
        check(self.torso != "attention" or self.width % self.num_heads == 0, self.key("width"),
              f"({self.width}) must be divisible by network.num_heads ({self.num_heads}) for the attention torso; "
              f"change one of them")
        return self

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
      scored: ``bool[B]`` where the outputs are the network's, for the learners
        (``for_training`` with afterstates: False where a row's afterstate lists had no
        room, ``afterstate_scorer.MIXED``; they leave it out); None elsewhere (every row).
    """

    policy_logits: chex.Array
    value: chex.Array
    score_margin: chex.Array
    scored: Optional[chex.Array] = None


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
    """``[B, O] -> [B, width]``: Dense, then ``depth`` residual blocks. ``kernel``
    (:data:`TORSO_KERNELS`): applied as XLA operations or as one Pallas kernel
    (:mod:`beastybar_jax.torso_kernel`, inference only)."""

    width: int
    depth: int
    dtype: Any
    kernel: str = "xla"

    @nn.compact
    def __call__(self, observation):
        kernel = _torso_kernel(self.kernel, self.width, self.dtype)
        if kernel != "xla" and not self.is_initializing():
            return torso_kernel.mlp_torso(self.variables["params"], observation, width=self.width, depth=self.depth,
                                          dtype=self.dtype, interpret=kernel == "interpret")
        x = nn.Dense(self.width, dtype=self.dtype, param_dtype=jnp.float32)(observation.astype(self.dtype))
        for _ in range(self.depth):
            x = ResidualBlock(self.width, self.dtype)(x)
        x = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32)(x)
        return nn.relu(x)


TORSO_KERNELS = ("xla", "auto", "pallas", "interpret")


def gpu_torso(config: NetworkConfig, kernel: Optional[str] = None) -> str:
    """How the search and PPO's rollout apply ``config``'s torso on a GPU, given ``kernel``
    (:data:`TORSO_KERNELS`; by default ``config.torso_kernel``): ``"kernel"`` (an MLP torso as
    one Pallas kernel: ``auto`` in bfloat16 with afterstates, or asked for) or ``"xla"``."""
    kernel = config.torso_kernel if kernel is None else kernel
    auto = (kernel == "auto" and config.afterstates is not None and config.dtype == "bfloat16"
            and torso_kernel.supports(config.width, jnp.bfloat16))
    return "kernel" if config.torso == "mlp" and (auto or kernel in ("pallas", "interpret")) else "xla"


def _torso_kernel(kernel: str, width: int, dtype) -> str:
    """``"auto"`` resolved when traced: the Pallas kernel for a bfloat16 torso traced for a
    GPU (``games.tracing.for_gpu``: Triton's, interpreted or none, as it says), else XLA operations."""
    if kernel not in TORSO_KERNELS:
        raise ValueError(f"torso_kernel must be one of {TORSO_KERNELS}, got {kernel!r}")
    if kernel == "auto":
        usable = jnp.dtype(dtype) == jnp.dtype(jnp.bfloat16) and torso_kernel.supports(width, dtype)
        return {None: "xla", "triton": "pallas", "interpret": "interpret"}[pallas_kernels() if usable else None]
    return kernel


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
    afterstates: Optional[Afterstates] = None
    afterstate_tier: Optional[int | str] = None  # afterstate_scorer.AfterstateScorer's tier (None: it picks)
    torso_kernel: str = "xla"  # MLPTorso.kernel (TORSO_KERNELS)

    def for_training(self) -> "PolicyValueNet":
        """This network as the learners apply it: their batches mix positions of every turn,
        so an afterstate scorer scores them in its lists for such batches, the rows of a group
        that overflows them not scored (``NetworkOutput.scored``, ``afterstate_scorer.MIXED``),
        not in the chain of list sizes for a search's batch."""
        return self.clone(afterstate_tier=afterstate_scorer.MIXED) if self.config.afterstates is not None else self

    def for_inference(self, torso_kernel: Optional[str] = None) -> "PolicyValueNet":
        """This network as the search and the rollout apply it, never differentiated: its MLP
        torso as ``torso_kernel`` says (:data:`TORSO_KERNELS`; by default the config's
        ``network.torso_kernel``: ``"auto"``, one Pallas kernel where traced for a GPU in
        bfloat16 and the network scores afterstates), the same outputs to bfloat16's rounding."""
        torso_kernel = self.config.torso_kernel if torso_kernel is None else torso_kernel
        _torso_kernel(torso_kernel, self.config.width, self.config.compute_dtype)  # checks the name
        if torso_kernel == "auto" and gpu_torso(self.config, torso_kernel) == "xla":
            torso_kernel = "xla"  # without afterstates XLA's was measured faster (NetworkConfig.torso_kernel)
        return self.clone(torso_kernel=torso_kernel)

    def afterstate_tiers(self, batch_size: int, observation_size: int) -> int:
        """The ways a batch of ``batch_size`` observations can be scored
        (:func:`afterstate_scorer.num_tiers`; 1 without the scorer)."""
        return afterstate_scorer.num_tiers(self.config.afterstates, self.afterstates, batch_size, observation_size)

    @nn.compact
    def __call__(self, observation) -> NetworkOutput:
        cfg = self.config
        dtype = cfg.compute_dtype
        observation = jnp.asarray(observation, jnp.float32)
        if cfg.afterstates is not None and self.afterstates is None:
            raise ValueError("network.afterstates: build the network with make_network(config, game) from a "
                             "game with afterstates")
        if cfg.torso == "mlp":
            features = MLPTorso(cfg.width, cfg.depth, dtype, self.torso_kernel)(observation)
        else:
            if self.token_layout is None:
                raise ValueError("the attention torso needs the game's observation tokens (Game.tokens); "
                                 "this game has none: use network.torso=mlp")
            features = AttentionTorso(cfg.width, cfg.depth, cfg.num_heads, dtype, self.token_layout)(observation)
        # The heads are tiny; running them in float32 keeps logits and values precise
        # under bfloat16 compute.
        # Small initial head weights: a fresh network starts near a uniform prior and
        # a zero value, which is what search expects from an untrained evaluator.
        features = features.astype(jnp.float32)
        head = lambda size, name: nn.Dense(size, param_dtype=jnp.float32, kernel_init=_HEAD_INIT, name=name)
        policy_logits = head(self.num_actions, "policy_head")(features)
        scored = None
        if cfg.afterstates is not None:  # the afterstate scorer (its parameters: "afterstates")
            move_logits, pooled, scored = afterstate_scorer.score_moves(
                cfg.afterstates, self.afterstates, self.num_actions, observation, features, self.afterstate_tier)
            policy_logits = policy_logits + move_logits
            features = jnp.concatenate([features, pooled], axis=-1)
        value = jnp.tanh(head(1, "value_head")(features)[..., 0])
        if cfg.aux_score_head:
            score_margin = head(1, "score_head")(features)[..., 0]
        else:
            score_margin = jnp.zeros(features.shape[:-1], jnp.float32)
        return NetworkOutput(policy_logits=policy_logits, value=value, score_margin=score_margin, scored=scored)


def make_network(config: NetworkConfig, game: Game | int,
                 token_layout: TokenLayout | None = None) -> PolicyValueNet:
    """The network for ``game``: ``game.num_actions`` policy logits and, for the attention
    torso, the game's token layout (``game.tokens``); with ``config.afterstates``, the
    afterstate scorer on the game's ``afterstates``.

    ``game`` may also be a number of actions, with ``token_layout`` given explicitly."""
    if not isinstance(config, NetworkConfig):
        raise TypeError(f"make_network expects a NetworkConfig, got {type(config).__name__}")
    afterstates = None
    if isinstance(game, Game):
        num_actions, token_layout = game.num_actions, token_layout or game.tokens
        if config.afterstates is not None:
            afterstate_scorer.check_game(config.afterstates, game)
            afterstates = game.afterstates
    else:
        num_actions = int(game)
        if config.afterstates is not None:
            raise ConfigError("network.afterstates needs the Game (its afterstates), not a number of actions")
    layout = None if token_layout is None else TokenLayout(*token_layout)
    return PolicyValueNet(config=config, num_actions=num_actions, token_layout=layout, afterstates=afterstates)


def init_params(network: PolicyValueNet, key: jax.Array, observation_size: int):
    """Fresh float32 variables (``{"params": ...}``) for ``network.apply``.

    Under ``jit``: the variables depend on no output of the forward pass, so XLA drops it,
    where an eager ``init`` runs it op by op (with afterstates and replies, 225 engine
    steps: half a minute on a CPU)."""
    return jax.jit(network.init)(key, jnp.zeros((1, observation_size), jnp.float32))


def precast(network: PolicyValueNet, params, observation_size: int, *, stacked: bool = False):
    """``params`` with each leaf that ``network.apply`` only ever casts (to one dtype)
    cast once, here: the same outputs, bit for bit.

    Flax keeps the parameters in float32 and a bfloat16 layer casts its kernel and bias
    at every call. Inside a loop that applies the network (the search's simulations, the
    rollout's moves) XLA keeps those casts in the loop's body: on a GPU each is a kernel
    launch per iteration (12 of the 85 in a simulation of ``h100.yaml``'s network). Call
    this before the loop. ``stacked``: ``params`` is a stack of parameter trees (a leading
    axis on every leaf, as PPO's opponent pool).

    Which leaves to cast is read from the jaxpr of one call (traced once per network and
    parameter shapes): a leaf every use of which is a ``convert_element_type`` to the
    same dtype. Leaves used otherwise (LayerNorm's float32 scale, the float32 heads)
    stay as they are."""
    leaves, treedef = jax.tree.flatten(params)
    types = tuple((tuple(x.shape[1:] if stacked else x.shape), jnp.dtype(x.dtype)) for x in leaves)
    dtypes = _precast_dtypes(network, treedef, types, observation_size)
    return jax.tree.unflatten(treedef, [x if d is None else x.astype(d) for x, d in zip(leaves, dtypes)])


@functools.lru_cache(maxsize=64)
def _precast_dtypes(network, treedef, types, observation_size: int) -> tuple:
    """:func:`precast`'s dtype for each leaf (None: left as it is)."""
    def apply(leaves):
        return network.apply(jax.tree.unflatten(treedef, leaves), jnp.zeros((1, observation_size), jnp.float32))

    jaxpr = jax.make_jaxpr(apply)([jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in types]).jaxpr
    uses = {v: set() for v in jaxpr.invars}
    for eqn in jaxpr.eqns:
        cast = eqn.primitive.name == "convert_element_type" and not eqn.params.get("weak_type", False)
        for v in eqn.invars:
            if isinstance(v, jax_core.Var) and v in uses:
                uses[v].add(jnp.dtype(eqn.params["new_dtype"]) if cast else None)
    for v in jaxpr.outvars:
        if isinstance(v, jax_core.Var) and v in uses:
            uses[v].add(None)
    dtypes = []
    for v, (_, dtype) in zip(jaxpr.invars, types):
        (only,) = uses[v] if len(uses[v]) == 1 else (None,)
        dtypes.append(only if only is not None and only != dtype else None)
    return tuple(dtypes)


def count_params(params) -> int:
    """Number of scalars in a parameter tree."""
    return int(sum(x.size for x in jax.tree.leaves(params)))
