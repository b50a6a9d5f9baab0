"""The tic-tac-toe training runs shared by tests (each trained once per session).

:func:`trained_run`: ``configs/tictactoe.yaml`` exactly as a user runs it (~1 min on 2
cores), in a temporary run directory: tests/test_tictactoe_learning.py checks it learned
perfect play. :func:`short_run`: the same config for two iterations (~10 s), a run with a
checkpoint where tests/test_docs.py needs one for ``runs/tictactoe``, not what it learned.
"""

from __future__ import annotations

import atexit
import functools
import pathlib
import shutil
import tempfile

import jax

from beastybar_jax.config import load_config
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.metrics import read_jsonl
from beastybar_jax.training.trainer import make_trainer

from helpers import REPO_ROOT
from helpers.tiny_training import OPTIMIZED
CONFIG = REPO_ROOT / "configs" / "tictactoe.yaml"


def _train(overrides: list[str], compiler_options=None) -> dict:
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="tictactoe_"))
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    config = load_config(CONFIG, [f"run_dir={run_dir}", "tensorboard=false", *overrides])
    loop = TrainLoop(config, trainer=make_trainer(config, compiler_options=compiler_options), console=False)
    state = jax.device_get(loop.run())
    loop.close()
    return dict(config=config, run_dir=run_dir, network=loop.trainer.network, params=state.params,
                game=loop.trainer.game, metrics=read_jsonl(str(run_dir / "metrics.jsonl")))


@functools.lru_cache(maxsize=None)
def trained_run() -> dict:
    return _train([], OPTIMIZED)  # 50 iterations: XLA's optimised code, not the suite's cheap one


@functools.lru_cache(maxsize=None)
def short_run() -> dict:
    return _train(["num_iterations=2"])
