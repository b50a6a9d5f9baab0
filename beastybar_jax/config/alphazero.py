"""AlphaZero's config section (``alphazero:`` in a YAML config): plain data and its checks."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from beastybar_jax.validation import ConfigModel, Float, Int, check

Count = Annotated[Int, Field(ge=1)]
Weight = Annotated[Float, Field(ge=0, allow_inf_nan=False)]


class AlphaZeroConfig(ConfigModel):
    """Self-play with search (the run's shared ``search:`` section), a replay buffer and
    SGD on search targets.

    Self-play: the run's ``num_games`` games are played side by side; each iteration
    advances every game ``moves_per_iteration`` moves (a finished game restarts at
    once), so an iteration plays ``num_games * moves_per_iteration`` moves and
    searches. Games carry over between iterations; a game's positions enter the
    replay buffer when it ends, labelled with its outcome.

    Action selection: for a game's first ``temperature_drop_move`` moves the move is
    drawn from the search's policy target raised to ``1 / temperature``; later moves
    use ``final_temperature``. A temperature of 0 plays the search's own choice
    (for Gumbel MuZero: the sequential-halving winner under its root Gumbel noise;
    for PUCT: the most visited action).

    Learning: once the buffer holds ``min_buffer_size`` positions, each iteration
    takes ``updates_per_iteration`` optimizer steps on minibatches of ``batch_size``
    positions drawn uniformly from the buffer; the loss is policy cross-entropy to
    the search target + ``value_loss_weight`` x value MSE (+ ``aux_loss_weight`` x
    score-margin MSE when the network's aux head is on).

    Exact targets: with ``exact_value_targets`` the value target of every position
    the game's solver can solve (``Game.solver.exact_values``; Beasty Bar: the endgame
    with nothing hidden, :mod:`beastybar_jax.games.beastybar.endgame`) is its game-theoretic
    result for the player to move (+1 / 0 / -1) instead of the game's outcome. The
    positions of each iteration are solved together, inside the compiled
    iteration, within ``exact_value_budget`` solver loop iterations (0: no limit;
    smallest positions first, so a budget leaves the largest ones with the
    outcome as target), ``exact_value_lanes`` positions' searches side by side (0:
    the solver's rule; on a GPU an iteration of the loop costs about the same at
    4,096 lanes as at 16,384, so more lanes and a smaller budget solve as many in less time). The score-margin target is unchanged. With
    ``exact_policy_targets`` (needs ``exact_value_targets``) a solved position's
    policy target is also the search's target restricted to the moves that keep its
    exact result (``Game.solver.exact_actions``), renormalized (uniform over them where the
    search gave them no weight). ``exact_policy_weight`` (needs ``exact_value_targets``)
    weighs the policy loss of the positions with exact targets against 1 for the
    others; the loss stays a weighted mean, so it shifts the policy's attention to the
    solved endgames without changing its scale beside the value loss.
    """

    location: ClassVar[str] = "alphazero"

    # self-play
    moves_per_iteration: Count = 24
    temperature: Annotated[Float, Field(ge=0, allow_inf_nan=False, description="0 = the search's choice")] = 1.0
    temperature_drop_move: Annotated[Int, Field(ge=0)] = 8
    final_temperature: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 0.0
    # replay
    buffer_size: Count = 262_144
    min_buffer_size: Count = 16_384
    # learning
    batch_size: Count = 1024
    updates_per_iteration: Annotated[Int, Field(ge=0)] = 32
    value_loss_weight: Weight = 1.0
    aux_loss_weight: Weight = 0.25  # used when network.aux_score_head is on
    exact_value_targets: bool = False  # value target = the solver's result where it has one
    exact_value_budget: Annotated[Int, Field(ge=0, description="0 = no limit")] = 500  # solver loop iterations per training iteration
    exact_value_lanes: Annotated[Int, Field(ge=0, description="0 = the solver's rule")] = 0  # searches side by side
    exact_policy_targets: bool = False  # policy target = search target on the solver's result-keeping moves
    # policy-loss weight of positions with exact targets (others: 1)
    exact_policy_weight: Annotated[Float, Field(gt=0, allow_inf_nan=False,
                                                description="1: weighed like every other position")] = 1.0

    @model_validator(mode="after")
    def _consistent(self):
        check(self.min_buffer_size <= self.buffer_size, self.key("min_buffer_size"),
              f"({self.min_buffer_size}) must not exceed buffer_size ({self.buffer_size}), or training never "
              f"starts: lower min_buffer_size or raise buffer_size")
        check(not self.exact_policy_targets or self.exact_value_targets, self.key("exact_policy_targets"),
              "needs exact_value_targets: true (the same solve gives both)")
        check(self.exact_policy_weight == 1.0 or self.exact_value_targets, self.key("exact_policy_weight"),
              f"({self.exact_policy_weight}) weighs positions with exact targets: it needs exact_value_targets: true")
        return self

    def validate_run(self, *, num_games: int, max_game_length: int) -> None:
        """Raise ``ConfigError`` for what the run's ``num_games`` and game make impossible."""
        check(self.buffer_size >= num_games * max_game_length, self.key("buffer_size"),
              f"({self.buffer_size}) must hold at least one finished game per slot, num_games * the game's longest "
              f"game ({max_game_length} turns) = {num_games * max_game_length}: raise buffer_size or lower num_games")

    def split_keys(self) -> tuple[str, ...]:
        """Keys whose values are split over devices (must divide by the device count)."""
        return ("batch_size", "buffer_size")
