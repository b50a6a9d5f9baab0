"""One warning for modules that moved in 0.2, so old imports keep working for a while."""

import warnings


def moved(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there (the old name will go in a later release)",
                  DeprecationWarning, stacklevel=3)
