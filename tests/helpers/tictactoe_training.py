"""The tic-tac-toe training run shared by tests (trained once per session, ~1 min on 2 cores).

``configs/tictactoe.yaml`` exactly as a user runs it, in a temporary run directory:
tests/test_tictactoe_learning.py checks it learned perfect play, tests/test_docs.py
uses it where the docs say ``runs/tictactoe``.
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


@functools.lru_cache(maxsize=None)
def trained_run() -> dict:
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="tictactoe_"))
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    config = load_config(CONFIG, [f"run_dir={run_dir}", "tensorboard=false"])
    loop = TrainLoop(config, trainer=make_trainer(config, compiler_options=OPTIMIZED), console=False)
    state = jax.device_get(loop.run())
    loop.close()
    return dict(config=config, run_dir=run_dir, network=loop.trainer.network, params=state.params,
                game=loop.trainer.game, metrics=read_jsonl(str(run_dir / "metrics.jsonl")))
