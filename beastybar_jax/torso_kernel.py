"""The MLP torso's forward pass as one Pallas kernel, for inference on a GPU.

XLA compiles the torso (``network.MLPTorso``: a Dense layer, ``depth`` pre-LayerNorm
residual blocks, a LayerNorm) into ~18 kernels: a GEMM per Dense layer and the
LayerNorms' reductions and casts apart. Inside the search's simulations and PPO's
rollout steps, at a few thousand rows a call, each is mostly its launch: the network
was 21 of the 58 kernels of a simulation at 4,096 x 64 (``benchmark.py search
--compile-for h100``). Here a program takes a block of rows through every layer with its
activations in registers: the observation is read once, the torso's features written
once, and each layer's weights read from the L2 cache by every block.

The arithmetic is flax's in flax's order and dtypes (a Dense layer: the GEMM in the
compute dtype accumulated in float32, then its bias; a LayerNorm: float32 mean and mean
square, ``(x - mean) * (rsqrt(var + eps) * scale) + bias``), but the GEMMs' sums run in
Triton's order, not cuBLAS's, and XLA may keep more precision between its ops than
bfloat16 rounding: outputs agree to the compute dtype's rounding, not bit for bit
(``tests/test_network.py``). Inference only: the learners differentiate the XLA form.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from beastybar_jax.per_game import on_each_device

BLOCK = 64  # rows per kernel program
NUM_WARPS = 8  # per program
EPSILON = 1e-6  # flax.linen.LayerNorm's


def supports(width: int, dtype) -> bool:
    """Whether the kernel takes a torso of this ``width`` and compute ``dtype``: Triton's
    blocks are powers of two, its GEMMs at least 16 wide."""
    return width >= 16 and width & (width - 1) == 0 and jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16),
                                                                             jnp.dtype(jnp.float32))


def _kernel(observation_ref, *refs, num: int, observation_size: int, observation_width: int, width: int, depth: int,
            dtype):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    *params, out_ref = refs
    rows = pl.program_id(0) * BLOCK + jnp.arange(BLOCK, dtype=jnp.int32)
    inputs = jnp.arange(observation_width, dtype=jnp.int32)
    units = jnp.arange(width, dtype=jnp.int32)
    precision = jax.lax.Precision.HIGHEST if jnp.dtype(dtype) == jnp.float32 else None

    def dense(x, kernel_ref, bias_ref, fan_in):  # flax.linen.Dense in the compute dtype
        if fan_in == width:
            kernel = kernel_ref[units[:, None] * width + units[None, :]]
        else:  # the observation's layer: rows past the observation's size are zero
            kernel = plgpu.load(kernel_ref.at[inputs[:, None] * width + units[None, :]],
                                mask=(inputs < fan_in)[:, None], other=0.0)
        y = jax.lax.dot(x, kernel.astype(dtype), precision=precision, preferred_element_type=jnp.float32)
        return y.astype(dtype) + bias_ref[units].astype(dtype)[None, :]

    def layer_norm(x, scale_ref, bias_ref):  # flax.linen.LayerNorm: float32 statistics, fast variance
        x = x.astype(jnp.float32)
        mean = jnp.sum(x, axis=-1, keepdims=True) / width
        mean_square = jnp.sum(x * x, axis=-1, keepdims=True) / width
        variance = jnp.maximum(0.0, mean_square - mean * mean)
        scale = jax.lax.rsqrt(variance + EPSILON) * scale_ref[units][None, :]
        return ((x - mean) * scale + bias_ref[units][None, :]).astype(dtype)

    present = (rows < num)[:, None] & (inputs < observation_size)[None, :]
    x = plgpu.load(observation_ref.at[rows[:, None] * observation_size + inputs[None, :]], mask=present, other=0.0)
    x = dense(x.astype(dtype), params[0], params[1], observation_size)
    for block in range(depth):
        norm_scale, norm_bias, kernel_0, bias_0, kernel_1, bias_1 = params[2 + 6 * block: 8 + 6 * block]
        h = layer_norm(x, norm_scale, norm_bias)
        h = jnp.maximum(dense(h, kernel_0, bias_0, width), 0)
        x = x + dense(h, kernel_1, bias_1, width)
    x = jnp.maximum(layer_norm(x, params[-2], params[-1]), 0)
    plgpu.store(out_ref.at[rows[:, None] * width + units[None, :]], x, mask=(rows < num)[:, None])


def mlp_torso(params, observation: jax.Array, *, width: int, depth: int, dtype, interpret: bool = False) -> jax.Array:
    """``network.MLPTorso``'s output ``[B, width]`` (in ``dtype``) for ``observation
    [B, O]``, given the torso's flax parameters (``{"Dense_0", "ResidualBlock_k",
    "LayerNorm_0"}``). ``interpret``: Pallas's interpreter (any backend), else Triton (a GPU)."""
    if not supports(width, dtype):
        raise ValueError(f"the torso kernel takes a power-of-two width >= 16 and float32 or bfloat16, got width "
                         f"{width} and {jnp.dtype(dtype)}")
    # The weights as flax casts them (so network.precast casts them once, before a loop);
    # the LayerNorms' in float32.
    cast = lambda dense: (dense["kernel"].astype(dtype).reshape(-1), dense["bias"].astype(dtype))  # noqa: E731
    norm = lambda layer: (layer["scale"].astype(jnp.float32), layer["bias"].astype(jnp.float32))  # noqa: E731
    leaves = [*cast(params["Dense_0"])]
    for block in range(depth):
        residual = params[f"ResidualBlock_{block}"]
        leaves += [*norm(residual["LayerNorm_0"]), *cast(residual["Dense_0"]), *cast(residual["Dense_1"])]
    leaves += [*norm(params["LayerNorm_0"])]
    rows = functools.partial(_torso_rows, width=width, depth=depth, dtype=dtype, interpret=interpret)
    # With the rows split over devices, each device's own (the weights whole on each).
    return on_each_device(rows, observation.astype(jnp.float32), shared=leaves)


def _torso_rows(observation, *leaves, width: int, depth: int, dtype, interpret: bool):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    num, observation_size = observation.shape
    kernel = functools.partial(_kernel, num=num, observation_size=observation_size,
                               observation_width=max(16, pl.next_power_of_2(observation_size)), width=width,
                               depth=depth, dtype=dtype)
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((num * width,), dtype), grid=(pl.cdiv(num, BLOCK),),
        interpret=interpret, compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=1), name="mlp_torso",
    )(observation.reshape(-1), *leaves)
    return out.reshape(num, width)
