"""Print, as JSON, for each search loop named on the command line (``mctx_patch.LOOPS``),
the collectives inside the loops of a search whose games are split over the CPU devices
(run with ``--xla_force_host_platform_device_count``): one entry per collective, ``{"op":
..., "name": ...}`` (its kind and JAX's op name); the op names of the while loops; and
the largest difference between the split search's action weights and one device's. Also
:func:`kernel_programs` and :func:`gpu_engine_on_uneven_groups`. ``tests/test_distributed.py``
runs it in a subprocess with 4 devices.

The search: Beasty Bar, Gumbel, 2 worlds per state, a linear evaluator, 8 games from their
deal. ``"dynamic"`` is the CPU's loop, ``"static-interpret"`` the GPU's program (the walk
and the cached choices as Pallas kernels) with the kernels run by Pallas's interpreter.
"""

from __future__ import annotations

import json
import re
import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.per_game import on_each_device
from beastybar_jax.search import SearchConfig, mctx_patch, run_search

# The instruction's name after its result type (a tuple where XLA combined several).
COLLECTIVE = re.compile(r"=\s.*?\b(all-reduce|all-gather|all-to-all|ragged-all-to-all|collective-permute|"
                        r"collective-broadcast|reduce-scatter)(?:-start)?\(")
CALLED = re.compile(r"(?:to_apply|calls|body|condition|true_computation|false_computation|called_computations|"
                    r"branch_computations)=(\{[^}]*\}|%?[\w.\-]+)")


def split_search(loop: str) -> tuple[str, float]:
    """``(the compiled program's text, the largest difference between its action weights and
    those of the same search on one device)``."""
    mesh = Mesh(np.asarray(jax.devices()), ("data",))
    split = NamedSharding(mesh, P("data"))
    rng = np.random.default_rng(0)
    policy = rng.normal(size=(BEASTYBAR.observation_size, BEASTYBAR.num_actions)).astype(np.float32)
    value = rng.normal(size=(BEASTYBAR.observation_size,)).astype(np.float32)

    def evaluate(states):
        observations = jax.vmap(BEASTYBAR.observe)(states, states.current_player)
        return observations @ policy, jax.numpy.tanh(observations @ value)

    config = SearchConfig(algorithm="gumbel", num_simulations=8, num_determinizations=2)
    states = jax.vmap(BEASTYBAR.init)(jax.random.split(jax.random.key(0), 8))
    key = jax.random.key(1)
    with mctx_patch.installed(loop):
        weights = lambda states, key: run_search(BEASTYBAR, evaluate, states, key, config).action_weights  # noqa: E731
        search = jax.jit(weights, in_shardings=(split, None), out_shardings=split)
        text = search.lower(states, key).compile().as_text()
        alone = jax.jit(weights)(jax.device_put(states, jax.devices()[0]), key)
        difference = float(np.max(np.abs(np.asarray(search(states, key)) - np.asarray(alone))))
    return text, difference


def loop_collectives(text: str) -> tuple[list[dict], int]:
    """The collectives in the computations a while loop runs (its body and condition, and
    whatever they call), and the op names of the while loops."""
    computations, current = {}, None
    for line in text.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if header:
            current = computations.setdefault(header.group(1), [])
        elif current is not None:
            current.append(line)
    loop_lines = [line for line in text.splitlines() if re.search(r"= \S.*? while\(", line)]
    loops = [re.search(r"condition=%?([\w.\-]+), body=%?([\w.\-]+)", line).groups() for line in loop_lines]
    reached: set[str] = set()
    pending = [name for pair in loops for name in pair]
    while pending:
        name = pending.pop()
        if name in reached or name not in computations:
            continue
        reached.add(name)
        for line in computations[name]:
            for called in CALLED.findall(line):
                pending += re.findall(r"[\w.\-]+", called.replace("%", ""))
    found = []
    for name in sorted(reached):
        for line in computations[name]:
            kind = COLLECTIVE.search(line)
            if kind:
                op_name = re.search(r'op_name="([^"]+)"', line)
                found.append({"op": kind.group(1), "name": op_name.group(1) if op_name else ""})
    loop_names = [m.group(1) if m else "" for m in (re.search(r'op_name="([^"]+)"', line) for line in loop_lines)]
    return found, loop_names


def gpu_engine_on_uneven_groups() -> bool:
    """Whether the afterstate lists of 2 groups of 128 deals split over the devices (a split
    XLA cannot give a custom call evenly on 4), traced for a GPU (kernels interpreted),
    compile and equal the CPU form's."""
    from beastybar_jax.games import tracing
    from beastybar_jax.games.beastybar.afterstate import compact_afterstates

    split = NamedSharding(Mesh(np.asarray(jax.devices()), ("data",)), P("data"))
    states = jax.vmap(BEASTYBAR.init)(jax.random.split(jax.random.key(2), 256))
    observations = jax.device_put(jax.vmap(BEASTYBAR.observe)(states, states.current_player), split)

    def lists(observations):
        return jax.vmap(lambda group: compact_afterstates(group, 640, 0))(observations.reshape(2, 128, -1))

    want = jax.jit(lists)(observations)
    with tracing.for_gpu(kernels="interpret"):
        got = jax.jit(lambda o: lists(o))(observations)
    return all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)))


def kernel_programs() -> tuple[bool, bool]:
    """Whether two split programs that differ only inside a per-device kernel
    (``per_game.on_each_device``) differ as JAX's compilation cache sees them (the text
    of the lowered program, where the kernel itself is a callback's number), and whether
    one kernel lowered twice gives one program."""
    split = NamedSharding(Mesh(np.asarray(jax.devices()), ("data",)), P("data"))
    games = jax.device_put(np.ones((8, 3), np.float32), split)

    def program(scale: float) -> str:
        scaled = jax.jit(lambda x: on_each_device(lambda rows: rows * scale, x), in_shardings=split,
                         out_shardings=split)
        return re.sub(r'backend_config = "\d+"', "", scaled.lower(games).as_text())

    return program(2.0) != program(3.0), program(2.0) == program(2.0)


if __name__ == "__main__":
    report = {"devices": jax.device_count(), "kernel_programs": kernel_programs(),
              "gpu_engine_on_uneven_groups": gpu_engine_on_uneven_groups()}
    for loop in sys.argv[1:]:
        text, difference = split_search(loop)
        collectives, loops = loop_collectives(text)
        report[loop] = {"loops": loops, "collectives": collectives, "difference": difference}
    print(json.dumps(report))
