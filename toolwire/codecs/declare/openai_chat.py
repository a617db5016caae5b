"""OpenAI Chat Completions declarations.

A tool is nested under ``function``: ``{"type": "function", "function": {name, description?, parameters,
strict?}}``; a custom (free-text) tool under ``custom``: ``{"type": "custom", "custom": {name, description?,
format?}}``, a grammar format nested as ``{"type": "grammar", "grammar": {syntax, definition}}``. ``tool_choice``
is ``"auto"|"required"|"none"``, ``{"type": "function", "function": {"name"}}`` (``{"type": "custom", "custom":
{"name"}}`` for a custom tool), or the nested ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools":
[...]}}``; ``parallel_tool_calls`` is a top-level boolean. Strict mode rewrites the schema
(``toolwire.schema_tools.strict_schema``) and turns parallel calls off unless the caller asked for them (the
provider does not guarantee strict schemas for parallel calls).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...schema_tools import Loss, strict_schema
from ._common import ChoiceResult, ToolChoice, ToolSpec, check_choice_names, openai_parallel
from ._part import Declarations

__all__ = ["DIALECT", "ChatDeclarations", "PART"]

DIALECT = "openai-chat"


def declare_tool(spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One tool declaration; with ``strict`` the schema is rewritten (raises ``StrictSchemaError``). A custom
    tool has no schema, so ``strict`` leaves it as it is."""
    if spec.kind == "custom":
        return {"type": "custom", "custom": _custom(spec)}, ()
    schema: dict[str, Any] = spec.input_schema
    losses: tuple[Loss, ...] = ()
    if strict:
        conv = strict_schema(schema, tool=spec.name, dialect=DIALECT)
        schema, losses = conv.schema, conv.losses
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = schema
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}, losses


def _custom(spec: ToolSpec) -> dict[str, Any]:
    """``custom``: the Responses-shaped format written in Chat's shape (the grammar nested under ``grammar``)."""
    custom: dict[str, Any] = {"name": spec.name}
    if spec.description:
        custom["description"] = spec.description
    fmt = spec.format
    if fmt is not None:
        custom["format"] = ({"type": "grammar", "grammar": {"syntax": fmt["syntax"], "definition": fmt["definition"]}}
                            if fmt["type"] == "grammar" else {"type": "text"})
    return custom


def schema_of(declaration: dict[str, Any]) -> dict[str, Any]:
    if declaration.get("type") == "custom":
        return {}
    return declaration["function"].get("parameters") or {}


def _ref(name: str, custom: Collection[str]) -> dict[str, Any]:
    kind = "custom" if name in custom else "function"
    return {"type": kind, kind: {"name": name}}


def choice_fragment(choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                    custom: Collection[str] = ()) -> ChoiceResult:
    """``tool_choice`` (+ ``parallel_tool_calls``) for ``choice``; every choice is expressible here. ``custom``:
    the declared names that are custom tools (a choice refers to them as such)."""
    check_choice_names(DIALECT, choice, names)
    value: Any
    if choice.mode == "tool":
        value = _ref(choice.name, custom)  # type: ignore[arg-type]
    elif choice.allowed is not None:
        value = {"type": "allowed_tools",
                 "allowed_tools": {"mode": choice.mode, "tools": [_ref(n, custom) for n in choice.allowed]}}
    else:
        value = choice.mode
    extra, warnings = openai_parallel(choice, strict)
    return ChoiceResult(fragment={"tool_choice": value, **extra}, warnings=warnings)


def read_tool(raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
    """A Chat tools entry: a function nested under ``function``, or a custom tool under ``custom`` (its grammar
    format rewritten in the Responses shape)."""
    if raw.get("type") == "custom" and isinstance(raw.get("custom"), Mapping):
        custom = raw["custom"]
        fmt = custom.get("format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "grammar" and isinstance(fmt.get("grammar"), Mapping):
            fmt = {"type": "grammar", "syntax": fmt["grammar"].get("syntax"),
                   "definition": fmt["grammar"].get("definition")}
        return {"name": custom.get("name"), "description": custom.get("description"), "kind": "custom",
                "format": fmt}
    if raw.get("type") == "function" and isinstance(raw.get("function"), Mapping):
        fn = raw["function"]
        return {"name": fn.get("name"), "description": fn.get("description"), "input_schema": fn.get("parameters")}
    return None


class ChatDeclarations(Declarations):
    """OpenAI Chat Completions tools and ``tool_choice`` (see the module docstring)."""

    dialect = DIALECT

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        return declare_tool(spec, strict=strict, schema_mode=schema_mode)

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        return schema_of(declaration)

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        return choice_fragment(choice, names, strict=strict, custom=custom)

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        return read_tool(raw, index)


PART = ChatDeclarations()
