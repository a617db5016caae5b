"""Conformance of request messages to the official SDKs' param types, for the adapters' ``check_sdk``.

Checked twice: with pydantic ``TypeAdapter`` over the SDK's param type, and with ``sdk_problems``, a strict walk of
the same type hints that also fails on keys the TypedDict does not declare (pydantic ignores unknown TypedDict keys,
and validates ``Iterable`` fields lazily, so a misspelt field name would pass it).
"""

from __future__ import annotations

import collections.abc
import types
import typing
from functools import lru_cache
from typing import Any

import pydantic
import typing_extensions as te

__all__ = ["sdk_problems", "conforms", "unwrap", "keys_of", "assert_keys"]


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Required, typing.NotRequired, typing.Annotated, te.ReadOnly):
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, te.TypeAliasType):
            tp = tp.__value__
        else:
            return tp


def _typeddict_problems(value: Any, td: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({td.__name__}), got {type(value).__name__}"]
    hints = typing.get_type_hints(td, include_extras=True)
    if not hints:
        return []  # an empty TypedDict stands for a free-form object (Interactions ``result``)
    out = [f"{path}.{k}: not a field of {td.__name__}" for k in value if k not in hints]
    for k, hint in hints.items():
        origin = typing.get_origin(hint)
        required = origin is typing.Required or (td.__total__ and origin is not typing.NotRequired)
        if required and k not in value:
            out.append(f"{path}.{k}: required by {td.__name__}")
    for k, v in value.items():
        if k in hints:
            out += sdk_problems(v, hints[k], f"{path}.{k}")
    return out


def sdk_problems(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Where ``value`` does not fit the SDK type ``tp`` (TypedDicts: no undeclared keys, required keys present,
    every field checked recursively; unions: some member fits). Constructs it does not know are accepted."""
    tp = _unwrap(tp)
    if tp is typing.Any or tp is object:
        return []
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if te.is_typeddict(tp):
        return _typeddict_problems(value, tp, path)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        outcomes = [sdk_problems(value, m, path) for m in typing.get_args(tp)]
        if any(not o for o in outcomes):
            return []
        return min(outcomes, key=len)
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{path}: {value!r} is not one of {typing.get_args(tp)}"]
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) or \
            getattr(origin, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        args = typing.get_args(tp)
        elt = args[0] if args else typing.Any
        return [p for i, v in enumerate(value) for p in sdk_problems(v, elt, f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        args = typing.get_args(tp)
        return [p for k, v in value.items() for p in sdk_problems(v, args[1] if args else typing.Any, f"{path}.{k}")]
    if isinstance(tp, type):
        if issubclass(tp, pydantic.BaseModel):
            return [] if isinstance(value, tp) else [f"{path}: a response model, not a request param"]
        if tp is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, tp)
        return [] if ok else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    return []


@lru_cache(maxsize=None)
def _adapter(tp: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(tp)


def conforms(value: Any, tp: Any, *, adapter: Any = None) -> None:
    """``value`` validates with pydantic against ``tp`` (or ``adapter``) and has no field ``tp`` lacks."""
    _adapter(adapter if adapter is not None else tp).validate_python(value)
    problems = sdk_problems(value, tp)
    assert problems == [], problems


#: a type hint without its Required / NotRequired / Annotated / ReadOnly wrappers and aliases
unwrap = _unwrap


# ---- declarations (``toolwire.declare``) against the SDK's request types -------------------------------------------
def keys_of(typed_dict: Any) -> set[str]:
    return set(typing.get_type_hints(typed_dict))


def assert_keys(typed_dict: Any, value: dict) -> None:
    """``value`` has no key the TypedDict does not declare (pydantic accepts unknown TypedDict keys)."""
    assert isinstance(value, dict)
    extra = set(value) - keys_of(typed_dict)
    assert not extra, f"keys {extra} are not fields of {typed_dict.__name__}"
