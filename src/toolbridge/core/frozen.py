"""Frozen JSON data: dicts and lists that refuse mutation, and deep freeze/thaw copies.

A tool's parameters schema is frozen once at registration and then shared by every
call, provider format and MCP listing without copies; `thaw` gives a plain copy where
a caller needs one it may change (jsonschema-rs, an SDK, a wire payload).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is frozen; copy it with toolbridge.core.frozen.thaw()")


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation; JSON-serialisable and shared without copies."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable
    __ior__ = _immutable

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[Any]):
    """A list that refuses mutation; JSON-serialisable and shared without copies."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _immutable
    clear = sort = reverse = _immutable
    __iadd__ = __imul__ = _immutable

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """A deep, immutable copy of JSON-like data (dicts and lists become frozen)."""
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A deep, plain, mutable copy of JSON-like data."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value
