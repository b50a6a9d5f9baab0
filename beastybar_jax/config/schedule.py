"""The learning-rate schedule's length, from the config alone (the optimizer and resume checks share it)."""


def decay_steps(config, total_updates: int) -> int:
    """Updates until the learning rate's cosine reaches its end value: ``decay_steps``, or
    (0) the run's last update (``total_updates``)."""
    return config.decay_steps if config.decay_steps > 0 else max(total_updates, config.warmup_steps + 1)
