"""A handler's docstring as a tool description and parameter descriptions (Google, NumPy and Sphinx styles).

``docstring_parser`` reads the three styles (``Args:`` sections, ``Parameters`` / ``----------`` blocks and
reST ``:param x:`` fields) and picks the one that fits. A docstring it cannot read is used whole as the tool's
description, with no parameter descriptions: a docstring never stops a tool from being declared.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import docstring_parser

__all__ = ["Docstring", "read_docstring", "describe_properties"]


class Docstring:
    """What a tool takes from its handler's docstring: ``summary`` (the short and long description, without the
    parameter, return and raise sections) and ``params`` (parameter name → description)."""

    __slots__ = ("summary", "params")

    def __init__(self, summary: str, params: Mapping[str, str]) -> None:
        self.summary = summary
        self.params = dict(params)


def read_docstring(fn: Callable[..., Any]) -> Docstring:
    """The summary and parameter descriptions of ``fn``'s docstring (empty when it has none)."""
    text = inspect.getdoc(fn) or ""
    if not text.strip():
        return Docstring("", {})
    try:
        parsed = docstring_parser.parse(text)
    except Exception:  # noqa: BLE001 - a docstring the parser cannot read is only a description
        return Docstring(text, {})
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    summary = ("\n\n" if parsed.blank_after_short_description else "\n").join(parts)
    params = {p.arg_name: p.description.strip() for p in parsed.params if p.arg_name and p.description}
    return Docstring(summary, params)


def describe_properties(schema: dict[str, Any], params: Mapping[str, str]) -> None:
    """Give each top-level property of ``schema`` that has no ``description`` of its own the one documented for it.

    ``schema["properties"]`` is replaced, not edited (it may be shared with a definition). Documented names that
    are not properties are ignored.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not params:
        return
    schema["properties"] = {
        name: {"description": params[name], **prop}
        if isinstance(prop, dict) and "description" not in prop and params.get(name) else prop
        for name, prop in properties.items()}
