"""OpenAI Chat Completions declarations (WIRE A1).

A tool is nested under ``function``: ``{"type": "function", "function": {name, description?, parameters,
strict?}}``. ``tool_choice`` is ``"auto"|"required"|"none"``, ``{"type": "function", "function": {"name"}}``,
or the nested ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools": [...]}}``; ``parallel_tool_calls``
is a top-level boolean. Strict mode rewrites the schema (``toolwire.schema_tools.strict_schema``) and turns
parallel calls off unless the caller asked for them (the provider does not guarantee strict schemas for
parallel calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...schema_tools import Loss, strict_schema
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec, check_choice_names, openai_parallel

DIALECT = "openai-chat"


def declare_tool(spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One tool declaration; with ``strict`` the schema is rewritten (raises ``StrictSchemaError``)."""
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


def schema_of(declaration: dict[str, Any]) -> dict[str, Any]:
    return declaration["function"].get("parameters") or {}


def tools_fragment(declarations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tools": declarations}


def strict_warnings(strict: bool) -> tuple[Approximation, ...]:
    return ()


def choice_fragment(choice: ToolChoice, names: Sequence[str], *, strict: bool = False) -> ChoiceResult:
    """``tool_choice`` (+ ``parallel_tool_calls``) for ``choice``; every choice is expressible here."""
    check_choice_names(DIALECT, choice, names)
    value: Any
    if choice.mode == "tool":
        value = {"type": "function", "function": {"name": choice.name}}
    elif choice.allowed is not None:
        value = {"type": "allowed_tools",
                 "allowed_tools": {"mode": choice.mode,
                                   "tools": [{"type": "function", "function": {"name": n}} for n in choice.allowed]}}
    else:
        value = choice.mode
    extra, warnings = openai_parallel(choice, strict)
    return ChoiceResult(fragment={"tool_choice": value, **extra}, warnings=warnings)
