"""botocore's ``bedrock-runtime`` service model as the oracle of every Bedrock Converse shape.

Requests are checked twice: with botocore's own ``ParamValidator`` (after turning the JSON wire form into botocore's
Python form: a blob is a base64 string on the wire and bytes in botocore's parameters), and with ``problems``, a
strict walk of the same shapes that also checks what ``ParamValidator`` leaves to the service (patterns, maximum
lengths, enums). Responses (``ConverseResponse``, the members of ``ConverseStreamOutput``) are walked the same way:
a field the model does not declare is a problem unless it is listed in ``extra`` (fields the real service sends
that botocore's model does not declare yet).
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from typing import Any, Iterable

__all__ = ["model", "shape", "to_python", "validate_request", "problems", "check"]


@lru_cache(maxsize=1)
def model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def shape(name: str) -> Any:
    return model().shape_for(name)


def _is_document(s: Any) -> bool:
    return bool(s.metadata.get("document"))


def to_python(value: Any, s: Any) -> Any:
    """The JSON wire form of ``value`` as botocore's parameters: base64 blobs become bytes (a string that is not
    base64 is left as it is, for the validator to refuse)."""
    kind = s.type_name
    if kind == "structure" and not _is_document(s) and isinstance(value, dict):
        return {k: (to_python(v, s.members[k]) if k in s.members else v) for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [to_python(v, s.member) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: to_python(v, s.value) for k, v in value.items()}
    if kind == "blob" and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
    return value


def validate_request(params: Any, shape_name: str, *, extra: Iterable[tuple[str, str]] = ()) -> None:
    """``params`` (JSON wire form) passes botocore's ParamValidator for ``shape_name`` and the strict walk
    (``extra`` as for ``problems``)."""
    from botocore.validate import ParamValidator

    report = ParamValidator().validate(to_python(params, shape(shape_name)), shape(shape_name))
    assert not report.has_errors(), report.generate_report()
    found = problems(params, shape_name, extra=extra)
    assert found == [], found


def _b64(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def problems(value: Any, shape_name: str, *, extra: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Where ``value`` (JSON wire form) does not fit the shape ``shape_name``. ``extra``: ``(shape, member)`` pairs
    the walk accepts although the model does not declare them (their values are not checked), and ``(shape,
    value)`` pairs of enum values it accepts."""
    allowed = frozenset(extra)
    out: list[str] = []
    _walk(value, shape(shape_name), "$", allowed, out)
    return out


def check(value: Any, shape_name: str, *, extra: Iterable[tuple[str, str]] = ()) -> None:
    found = problems(value, shape_name, extra=extra)
    assert found == [], found


def _walk(value: Any, s: Any, path: str, allowed: frozenset[tuple[str, str]], out: list[str]) -> None:
    kind = s.type_name
    meta = s.metadata
    if kind == "structure" and _is_document(s):
        return  # any JSON value
    if kind == "structure":
        if not isinstance(value, dict):
            out.append(f"{path}: expected an object ({s.name}), got {type(value).__name__}")
            return
        for k in value:
            if k not in s.members and (s.name, k) not in allowed:
                out.append(f"{path}.{k}: not a member of {s.name}")
        for k in s.required_members:
            if k not in value:
                out.append(f"{path}.{k}: required by {s.name}")
        if meta.get("union") and sum(1 for k in value if k in s.members) != 1:
            out.append(f"{path}: a {s.name} union sets exactly one member, not {sorted(value)}")
        for k, v in value.items():
            if k in s.members:
                _walk(v, s.members[k], f"{path}.{k}", allowed, out)
        return
    if kind == "list":
        if not isinstance(value, list):
            out.append(f"{path}: expected a list ({s.name})")
            return
        _bounds(len(value), meta, path, out)
        for i, v in enumerate(value):
            _walk(v, s.member, f"{path}[{i}]", allowed, out)
        return
    if kind == "map":
        if not isinstance(value, dict):
            out.append(f"{path}: expected a map ({s.name})")
            return
        for k, v in value.items():
            _walk(v, s.value, f"{path}.{k}", allowed, out)
        return
    if kind == "string":
        if not isinstance(value, str):
            out.append(f"{path}: expected a string ({s.name}), got {type(value).__name__}")
            return
        _bounds(len(value), meta, path, out)
        enum = getattr(s, "enum", None)
        if enum and value not in enum and (s.name, value) not in allowed:
            out.append(f"{path}: {value!r} is not one of {s.name} {list(enum)}")
        pattern = meta.get("pattern")
        if pattern and re.fullmatch(pattern, value) is None:
            out.append(f"{path}: {value!r} does not match {s.name}'s pattern {pattern}")
        return
    if kind == "blob":
        if not isinstance(value, str) or not _b64(value):
            out.append(f"{path}: a blob is a base64 string on the wire ({s.name})")
        elif "min" in meta and len(base64.b64decode(value)) < meta["min"]:
            out.append(f"{path}: under {meta['min']} bytes ({s.name})")
        return
    if kind in ("integer", "long"):
        if type(value) is not int:
            out.append(f"{path}: expected an integer ({s.name})")
        else:
            _bounds(value, meta, path, out)
        return
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append(f"{path}: expected a number ({s.name})")
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            out.append(f"{path}: expected a boolean ({s.name})")
        return
    if kind == "timestamp":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            out.append(f"{path}: expected a timestamp ({s.name})")


def _bounds(n: int, meta: dict, path: str, out: list[str]) -> None:
    if "min" in meta and n < meta["min"]:
        out.append(f"{path}: {n} is under the minimum {meta['min']}")
    if "max" in meta and n > meta["max"]:
        out.append(f"{path}: {n} is over the maximum {meta['max']}")
