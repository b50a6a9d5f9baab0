"""Stopping a run whose numbers went bad: a non-finite loss or parameter.

A NaN or an infinity in the loss or the parameters never heals: every later
iteration and every checkpoint would carry it. :class:`~beastybar_jax.training.loop.TrainLoop`
checks each iteration's losses (already on the host for the log) and the parameters
and optimizer state before each checkpoint, and stops with :class:`NonFiniteError`:
the bad iteration is neither logged nor saved, so the newest checkpoint is the last
good state (a restore also refuses non-finite parameters, with or without checksums).
"""

from __future__ import annotations

import math
from typing import Mapping

from beastybar_jax.checkpoint import non_finite_leaf


class NonFiniteError(ArithmeticError):
    """A non-finite loss or parameter; ``iteration`` is the (1-based) iteration that
    produced it. Command lines print ``str()`` as their one line (exit code 1)."""

    def __init__(self, iteration: int, message: str):
        super().__init__(message)
        self.iteration = iteration


def is_loss_metric(name: str) -> bool:
    return "loss" in name or name == "grad_norm"


def check_finite_losses(iteration: int, metrics: Mapping[str, float], newest_checkpoint: int | None) -> None:
    """Raise :class:`NonFiniteError` when a loss of ``iteration`` is NaN or infinite."""
    bad = sorted(k for k, v in metrics.items() if is_loss_metric(k) and not math.isfinite(float(v)))
    if bad:
        raise NonFiniteError(iteration, f"iteration {iteration}: non-finite {', '.join(f'{k} {metrics[k]}' for k in bad)}"
                                        f"; stopped without logging or saving it ({_newest(newest_checkpoint)}); "
                                        f"lower learning_rate or max_grad_norm, or check the checkpoint it resumed from")


def check_finite_state(iteration: int, state, newest_checkpoint: int | None) -> None:
    """Raise :class:`NonFiniteError` when the parameters or the optimizer state of
    ``state`` (a train state) hold a NaN or an infinity: checked before a save."""
    bad = non_finite_leaf(dict(params=state.params, opt_state=getattr(state, "opt_state", None)))
    if bad:
        raise NonFiniteError(iteration, f"iteration {iteration}: non-finite (or beyond ±1e30) values in {bad}; stopped without saving "
                                        f"checkpoint {iteration} ({_newest(newest_checkpoint)}); lower learning_rate "
                                        f"or max_grad_norm")


def _newest(step: int | None) -> str:
    return "no checkpoint was saved" if step is None else f"the newest checkpoint is {step}"
