"""A tiny training run shared by the training tests (compiled and run once per session).

Test files use ``from helpers import tiny_training``.
"""

from __future__ import annotations

import atexit
import functools
import os
import pathlib
import shutil
import tempfile

import jax

from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.trainer import Trainer, make_trainer
from beastybar_jax.config import TrainConfig, load_config
from beastybar_jax.training.metrics import read_jsonl

from helpers import REPO_ROOT
TINY = REPO_ROOT / "configs" / "tiny.yaml"
# Unoptimised XLA code compiles about 3x faster on CPU; these runs are tiny anyway. XLA:CPU's
# older (non-MLIR) fusion emitters compile another ~25% faster (the suite: 2,250 -> 1,700 CPU
# s), at the price of slower code and of bits that can differ between two programs computing
# the same thing (SAME_BITS). The suite compiles this way throughout on a CPU
# (tests/conftest.py); the options are for the GPU too (the emitter option is XLA:CPU's alone).
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True,
                "xla_cpu_use_fusion_emitters": False}
FAST_COMPILE_FLAG = " ".join(f"--{name}={str(value).lower()}" for name, value in FAST_COMPILE.items())  # XLA_FLAGS
# XLA's defaults, for the programs a test runs long (training runs, the endgame solver).
OPTIMIZED = {"xla_backend_optimization_level": 3, "xla_llvm_disable_expensive_passes": False,
             "xla_cpu_use_fusion_emitters": True}
# Cheap compiles with XLA:CPU's default emitters: for programs whose bits a test compares with
# another program's (the older emitters can round a function apart from one fusion to another:
# mctx's trees and ours differed in a last bit) or whose HLO a test reads as users get it.
SAME_BITS = dict(FAST_COMPILE, xla_cpu_use_fusion_emitters=True)


def tiny_config(run_dir, *overrides: str) -> TrainConfig:
    return load_config(TINY, [f"run_dir={run_dir}", "tensorboard=false", *overrides])


@functools.lru_cache(maxsize=None)
def trainer() -> Trainer:
    """The tiny config's compiled trainer (its run_dir is irrelevant to the computation)."""
    return make_trainer(tiny_config("unused"), compiler_options=FAST_COMPILE)


@functools.lru_cache(maxsize=None)
def full_run() -> dict:
    """All ``num_iterations`` of the tiny config in one go, on the default device(s)."""
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="tiny_full_"))
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    config = tiny_config(run_dir)
    loop = TrainLoop(config, trainer=trainer(), console=False)
    initial_params = jax.device_get(loop.state.params)
    state = jax.device_get(loop.run())
    loop.close()
    return dict(config=config, run_dir=run_dir, initial_params=initial_params, state=state,
                metrics=read_jsonl(str(run_dir / "metrics.jsonl")))


def cli_env(**extra: str) -> dict:
    """The environment for a command line started by a test: CPU, fast compiles, this
    checkout's package first on the path, and the session's compilation cache
    (``JAX_COMPILATION_CACHE_DIR``, set by conftest) so a compile is paid once."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=FAST_COMPILE_FLAG, PYTHONPATH=path, **extra)
