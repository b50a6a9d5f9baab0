"""The quick config learns visibly on the CPU: a short run beats random clearly more
often than random beats random, on the same duplicate deals."""

import jax
import pytest

from helpers import tiny_training
from beastybar_jax import arena
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.trainer import make_trainer
from beastybar_jax.agents import make_agent, network_agent
from beastybar_jax.config import load_config

pytestmark = pytest.mark.slow  # a quarter of the quick run (CI runs it; the quick loop skips it)

ITERATIONS = 30  # of the config's 120: the first quarter of the quick run
DEALS = 100  # 200 games per match


def test_short_quick_run_beats_random_more_often_than_random_does(tmp_path):
    config = load_config(tiny_training.REPO_ROOT / "configs" / "quick.yaml",
                         [f"run_dir={tmp_path}", "tensorboard=false"])
    trainer = make_trainer(config, compiler_options=tiny_training.OPTIMIZED)  # 30 iterations run, not just compile
    loop = TrainLoop(config, trainer=trainer, console=False)
    initial_params = jax.device_get(loop.state.params)
    state = loop.run(until_iteration=ITERATIONS)
    loop.close()

    key = jax.random.key(123)
    random = make_agent("random")
    baseline = arena.play_match(make_agent("random"), random, DEALS, key, game=trainer.game)
    untrained = arena.play_match(network_agent(trainer.network, initial_params, name="untrained", game=trainer.game), random, DEALS,
                                  key, game=trainer.game)
    trained = arena.play_match(network_agent(trainer.network, state.params, name="trained", game=trainer.game), random, DEALS, key,
                                game=trainer.game)

    assert trained.illegal_moves == 0
    # Random vs random sits near 45% wins (draws are ~10%); the trained policy must be
    # clearly better than both that and its own untrained start.
    assert trained.win_rate >= baseline.win_rate + 0.15, (trained, baseline)
    assert trained.win_rate >= untrained.win_rate + 0.1, (trained, untrained)
    assert trained.score_ci95[0] > 0.55, trained
