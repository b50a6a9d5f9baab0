"""beastybar_jax: Beasty Bar self-play training, fully vectorized in JAX."""

__version__ = "0.3.0"
