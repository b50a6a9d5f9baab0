"""YAML for configs, stricter than ``yaml.safe_load``: a key given twice in one
mapping is an error (instead of the last one silently winning), and so is a document
that aliases (``*anchor``) expand past :data:`MAX_EXPANDED_NODES` values (a "billion
laughs" alias bomb would otherwise hang whatever walks it)."""

from __future__ import annotations

from typing import Any

import yaml

MAX_EXPANDED_NODES = 100_000


class StrictYAMLError(ValueError):
    """A duplicate key or an alias bomb; the message names the key / line."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:  # the keys written here (``<<`` merges may be overridden)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except TypeError:
                    continue  # SafeLoader reports unhashable keys itself
                if key in seen:
                    raise StrictYAMLError(f"key {key!r} is given twice (lines {seen[key] + 1} and "
                                          f"{key_node.start_mark.line + 1}); keep one")
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(data: Any, limit: int) -> int:
    """Values in ``data`` counted as a tree (shared subtrees once per use), up to just
    past ``limit``; memoised per object, so an alias bomb costs its size in the file."""
    memo: dict[int, int] = {}

    def size(x) -> int:
        if isinstance(x, dict):
            items = list(x.keys()) + list(x.values())
        elif isinstance(x, list):
            items = x
        else:
            return 1
        if id(x) in memo:
            return memo[id(x)]
        memo[id(x)] = limit + 1  # a cycle (``&a [*a]``) counts as too big
        total = 1
        for item in items:
            total += size(item)
            if total > limit:
                break
        memo[id(x)] = total
        return total

    return size(data)


def load(stream) -> Any:
    """``yaml.safe_load`` with the checks above; raises :class:`StrictYAMLError` (or
    ``yaml.YAMLError`` for a syntax error)."""
    data = yaml.load(stream, Loader=_StrictLoader)  # noqa: S506 -- a SafeLoader subclass
    if _expanded_size(data, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
        raise StrictYAMLError(f"its aliases (*name) expand to more than {MAX_EXPANDED_NODES:,} values (an alias "
                              f"bomb?); write the values out")
    return data
