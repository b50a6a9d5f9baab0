"""PPO's config section (``ppo:`` in a YAML config): plain data and its checks.

The opponent mixture is a static split of the run's ``num_games`` game slots
(:func:`PPOConfig.opponent_slots`): each slot always faces the same kind of opponent,
while the learner's seat (and, for the pool, the snapshot) changes from game to game.
Drawing the kind per game at reset would be the same mixture in expectation, but under
``jit`` every game would then compute every kind's move at every step (both sides of
a select run), so a 10% share of heuristic games would cost as much as 100%.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from beastybar_jax.validation import ConfigError, ConfigModel, Float, Int, Names, Numbers, check

SELF = "self"
POOL = "pool"
Count = Annotated[Int, Field(ge=1)]
Weight = Annotated[Float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[Float, Field(ge=0, le=1)]


class PPOConfig(ConfigModel):
    """Proximal policy optimization on rollouts of the current policy.

    Rollouts: the run's ``num_games`` games are played side by side; each iteration
    advances every game ``rollout_length`` moves (a finished game restarts at once and
    games carry over between iterations), so an iteration plays ``num_games *
    rollout_length`` moves. The learner is the current policy network, acting on its
    player's observation and legal moves only, sampling from its softmax.

    Opponents: ``opponents`` names the kinds of opponent and ``opponent_weights`` their
    shares of the game slots. ``self``: the current policy in both seats (both seats'
    moves are training data); ``pool``: one of ``pool_size`` past snapshots of the
    parameters, kept on the device in a ring, the oldest replaced by the current
    parameters every ``pool_refresh_every`` iterations (at the start, every snapshot is
    the initial network); any other name is an agents registry spec (``random``,
    ``heuristic``, ``outcome_heuristic``, ``mcts-16``, ``checkpoint:<run>``...), played
    under ``jit`` inside the rollout. Against pool and registry opponents the learner's
    seat is drawn at random for every new game. ``opponent`` (an agent spec), when set,
    replaces the mixture: every game is against that frozen agent, and the run trains
    an exploiter, a best response to it alone.

    Learning: generalized advantage estimation (``gamma``, ``gae_lambda``) along each
    seat's own decisions, then ``num_epochs`` passes over the rollout's moves in
    ``num_minibatches`` shuffled minibatches, each an optimizer step on the clipped
    policy loss (``clip_epsilon``) + ``value_loss_weight`` x value MSE -
    ``entropy_weight`` x policy entropy (+ ``aux_loss_weight`` x score-margin MSE when
    the network's aux head is on). ``gamma = 1`` keeps the value head's meaning (the
    expected final outcome for the player to move, as AlphaZero trains it), so a PPO
    network also serves as a search evaluator.
    """

    location: ClassVar[str] = "ppo"

    # rollouts
    rollout_length: Count = 32
    # opponents
    opponents: Names = (SELF, POOL)
    opponent_weights: Numbers = (0.75, 0.25)
    pool_size: Count = 4
    pool_refresh_every: Count = 10
    opponent: str = ""  # an agent spec: train a best response to that agent alone
    # learning
    num_epochs: Count = 4
    num_minibatches: Count = 4
    gamma: Fraction = 1.0
    gae_lambda: Fraction = 0.95
    clip_epsilon: Annotated[Float, Field(gt=0, allow_inf_nan=False, description="e.g. 0.2")] = 0.2
    value_loss_weight: Weight = 0.5
    entropy_weight: Weight = 0.01
    aux_loss_weight: Weight = 0.25  # used when network.aux_score_head is on
    normalize_advantages: bool = True

    @property
    def exploiter(self) -> bool:
        return bool(self.opponent)

    def opponent_slots(self, num_games: int) -> tuple[tuple[str, int], ...]:
        """``((kind, number of slots), ...)`` in slot order, kinds with no slot left out.

        ``opponent`` set: every slot faces it. Otherwise the slots are shared out in
        proportion to ``opponent_weights`` (largest remainders); the pool's share is
        rounded down to a multiple of ``pool_size`` (each snapshot gets the same number
        of slots) and what that frees goes to the first kind listed."""
        if self.exploiter:
            return ((self.opponent, num_games),)
        total = float(sum(self.opponent_weights))
        exact = [w / total * num_games for w in self.opponent_weights]
        counts = [math.floor(x) for x in exact]
        by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
        for i in by_remainder[: num_games - sum(counts)]:
            counts[i] += 1
        if POOL in self.opponents:
            i = self.opponents.index(POOL)
            if len(counts) > 1:  # alone, the pool keeps every slot (validate checks the multiple)
                freed = counts[i] % self.pool_size
                counts[i] -= freed
                counts[1 if i == 0 else 0] += freed
        return tuple((kind, n) for kind, n in zip(self.opponents, counts) if n > 0)

    @model_validator(mode="after")
    def _opponents_listed(self):
        k = self.key
        if self.exploiter:
            check(self.opponent not in (SELF, POOL), k("opponent"),
                  f"must be a frozen agent spec such as heuristic or checkpoint:runs/x, got {self.opponent!r} "
                  f"(self-play and the pool belong in ppo.opponents)")
            return self
        check(len(self.opponents) >= 1 and all(o for o in self.opponents), k("opponents"),
              "must be a list of opponent kinds: self, pool or agent specs such as heuristic")
        check(len(set(self.opponents)) == len(self.opponents), k("opponents"),
              f"lists a kind twice: {list(self.opponents)}; give each kind once with its weight")
        check(len(self.opponent_weights) == len(self.opponents), k("opponent_weights"),
              f"needs one weight per entry of ppo.opponents ({len(self.opponents)}), got {len(self.opponent_weights)}")
        check(all(math.isfinite(w) and w >= 0 for w in self.opponent_weights) and sum(self.opponent_weights) > 0,
              k("opponent_weights"), f"must be numbers >= 0 with a positive sum, got {list(self.opponent_weights)}")
        return self

    def validate_run(self, *, num_games: int, max_game_length: int) -> None:
        """Raise ``ConfigError`` for what the run's ``num_games`` makes impossible."""
        k = self.key
        moves = num_games * self.rollout_length
        check(moves % self.num_minibatches == 0, k("num_minibatches"),
              f"({self.num_minibatches}) must divide the moves of a rollout, num_games x rollout_length = {moves}, "
              f"into equal minibatches: use a divisor of {moves}")
        if self.exploiter:
            return
        slots = dict(self.opponent_slots(num_games))
        check(slots.get(POOL, 0) % self.pool_size == 0, "num_games",
              f"({num_games}) must be a multiple of ppo.pool_size ({self.pool_size}) when the pool is the only "
              f"opponent")
        for kind, weight in zip(self.opponents, self.opponent_weights):
            if weight > 0 and kind not in slots:
                need = f" (and the pool needs a multiple of pool_size = {self.pool_size})" if kind == POOL else ""
                raise ConfigError(
                    f"config key {k('opponent_weights')!r} gives {kind!r} a share of {weight} but num_games = "
                    f"{num_games} leaves it no game slot{need}: raise num_games or that weight, or drop the kind",
                    key=k("opponent_weights"))

    def split_keys(self) -> tuple[str, ...]:
        """Keys whose values are split over devices (must divide by the device count):
        none beyond ``num_games``; minibatches are gathered from the whole rollout."""
        return ()

    def updates_per_iteration(self) -> int:
        return self.num_epochs * self.num_minibatches
