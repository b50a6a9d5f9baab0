"""A local web app to play, watch and analyse games in the browser (``pip install -e ".[web]"``).

``create_app()`` (in :mod:`beastybar_jax.web.app`) builds the FastAPI application;
``python experiments/serve.py`` serves it with uvicorn. Importing this package loads
neither FastAPI nor JAX.
"""


def create_app(*args, **kwargs):
    """The FastAPI application (see :func:`beastybar_jax.web.app.create_app`)."""
    from beastybar_jax.web.app import create_app as _create_app

    return _create_app(*args, **kwargs)
