"""The foundation of every config section: :class:`ConfigModel`, the one-line
:class:`ConfigError` and the check helpers.

The sections (``network:``, ``search:``, ``alphazero:``, ``ppo:`` and the run's own keys)
are pydantic v2 models: frozen, strict, and ``extra="forbid"``. Pydantic checks the types,
the unknown keys and the bounds declared on each field (``Field(ge=1)``); what it reports
becomes one line here (:meth:`ConfigModel.__init__`): the key by its full dotted path, what
it must be, what it got, and where the field's description says so, what a value means.
Why pydantic: it is the schema library most Python code already knows, its strict mode
refuses what YAML would otherwise turn silently into something else (``1`` for a bool, a
float for an integer with a fraction), and its error report locates the key in nested
sections, which the one-line error needs; 0.2 did the same in ~120 hand-written lines.

A leaf module: the config sections and the network's config import it without importing
each other.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError


class ConfigError(ValueError):
    """A config key is unknown, has the wrong type or an impossible value. ``key``: the
    key's dotted path where one key is at fault."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def check(ok: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("config key '<key>' <message>")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"config key {key!r} {message}", key=key)


# ----------------------------------------------------------------------------- field types
# Strict types, with the lossless conversions a YAML file or numpy needs.


def _plain(value):
    """A numpy scalar as the Python number it is (``np.int64(8)`` is 8; ``np.bool_`` a bool)."""
    numpy_scalar = type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0
    return value.item() if numpy_scalar else value


def _to_int(value):
    value = _plain(value)
    if isinstance(value, float) and value.is_integer():  # YAML writes 1e3 as a float
        return int(value)
    return value


def _to_float(value):
    value = _plain(value)
    if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    return value


def _to_names(value):
    if isinstance(value, str):  # "random, heuristic"
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value) if isinstance(value, list) else value


def _to_numbers(value):
    value = _to_names(value)  # "0.75, 0.25" as a list too
    return tuple(_to_float(v) for v in value) if isinstance(value, tuple) else value


Int = Annotated[int, BeforeValidator(_to_int)]
Float = Annotated[float, BeforeValidator(_to_float)]
Names = Annotated[tuple[str, ...], BeforeValidator(_to_names)]
Numbers = Annotated[tuple[float, ...], BeforeValidator(_to_numbers)]


# ----------------------------------------------------------------------------- the base model

_WHAT = {  # pydantic's error types -> what the key must be
    "int_type": "must be an integer", "int_from_float": "must be an integer", "int_parsing": "must be an integer",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "float_type": "must be a number", "float_parsing": "must be a number", "finite_number": "must be a finite number",
    "string_type": "must be a string", "tuple_type": "must be a list", "list_type": "must be a list",
}
_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


class ConfigModel(BaseModel):
    """A config section: frozen, strict, unknown keys refused. ``location`` is its dotted
    path in a run's config (``""`` for the run itself), so its errors name keys in full
    also when it is built on its own (``SearchConfig(num_simulations=0)``). A bad value
    raises :class:`ConfigError` (one line), not pydantic's report."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    location: ClassVar[str] = ""

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _one_line(type(self), e) from None

    def key(self, name: str) -> str:
        """``name``'s dotted path in a run's config."""
        return f"{self.location}.{name}" if self.location else name

    def replace(self, **changes) -> "ConfigModel":
        """A copy with ``changes``, checked as a new config is."""
        return type(self)(**{**dict(self), **changes})

    def to_dict(self) -> dict:
        """A JSON/YAML-ready nested dict (tuples become lists)."""
        return _to_plain(self.model_dump())


def _to_plain(x):
    if isinstance(x, dict):
        return {k: _to_plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_plain(v) for v in x]
    return x


def _one_line(cls: type[ConfigModel], error: ValidationError) -> ConfigError:
    """Pydantic's report on ``cls`` as one line naming the first key at fault."""
    first = error.errors()[0]
    kind, value, context = first["type"], first.get("input"), first.get("ctx") or {}
    index = "".join(f"[{p}]" for p in first["loc"] if isinstance(p, int))  # an item of a list
    loc = tuple(str(p) for p in first["loc"] if not isinstance(p, int))
    inner = context.get("error")
    if isinstance(inner, ConfigError):  # a section's own check, or a nested section's one line
        return inner
    model, path = cls, [cls.location] if cls.location else []
    for part in loc[:-1]:  # the section holding the last key
        model = _section_model(model, part) or model
        path.append(part)
    key = ".".join(path + list(loc[-1:])) + index
    if kind == "extra_forbidden":
        where = f" in {'.'.join(path)}" if path else ""
        return ConfigError(f"unknown config key {key!r}; valid keys{where}: {', '.join(sorted(model.model_fields))}",
                           key=key)
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        if value is None:
            return ConfigError(f"config key {key!r} is null: write the section's keys (e.g. {key}: {{...}}) or "
                               f"leave the section out for its defaults", key=key)
        return ConfigError(f"section {key!r} must be a mapping of key: value, got {type(value).__name__}", key=key)
    if kind == "value_error" and inner is not None:
        return ConfigError(f"config key {key!r}: {inner}", key=key)
    field = model.model_fields.get(loc[-1]) if loc else None
    hint = f" ({field.description})" if field is not None and field.description else ""
    if kind in _BOUNDS:
        metadata = field.metadata if field is not None else []
        bounds = {name: getattr(m, name) for m in metadata for name in ("ge", "gt", "le", "lt") if hasattr(m, name)}
        number = "a finite number " if any(getattr(m, "allow_inf_nan", True) is False for m in metadata) else ""
        if len(bounds) == 2:  # an interval
            (low, lo), (high, hi) = sorted(bounds.items(), key=lambda b: b[0] not in ("ge", "gt"))
            what = f"in {'[' if low == 'ge' else '('}{lo}, {hi}{']' if high == 'le' else ')'}"
        else:
            what = f"{_BOUNDS[kind]} {next(iter(context.values()))}"
        return ConfigError(f"config key {key!r} must be {number}{what}{hint}, got {value!r}", key=key)
    if kind == "literal_error":
        options = typing.get_args(field.annotation) if field is not None else ()
        listed = ", ".join(map(str, options)) if options else context.get("expected")
        return ConfigError(f"config key {key!r} must be one of {listed}, got {value!r}", key=key)
    what = _WHAT.get(kind, first["msg"].lower())
    wrong_type = kind.endswith("_type") or kind.endswith("_parsing")
    got = f"{value!r} ({type(value).__name__})" if wrong_type and not isinstance(value, (bool, type(None))) else repr(value)
    return ConfigError(f"config key {key!r} {what}{hint}, got {got}", key=key)


def _section_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The model of field ``name`` of ``model`` when that field is a section (or an optional one)."""
    field = model.model_fields.get(name)
    if field is None:
        return None
    options = getattr(field.annotation, "__args__", None) or (field.annotation,)
    return next((o for o in options if isinstance(o, type) and issubclass(o, BaseModel)), None)
