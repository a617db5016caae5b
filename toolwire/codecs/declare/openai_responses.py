"""OpenAI Responses declarations.

Function tools are flat: ``{"type": "function", name, description?, parameters, strict}`` (the SDK marks
``parameters`` and ``strict`` required; ``strict`` is always sent, ``false`` unless asked, so the API does not
pick strict validation on its own). Custom (free-text) tools too: ``{"type": "custom", name, description?,
format?}``, the format flat (``{"type": "grammar", "syntax", "definition"}``). ``tool_choice`` is flat too:
``{"type": "function", "name"}`` (``{"type": "custom", "name"}`` for a custom tool) and ``{"type":
"allowed_tools", "mode", "tools": [{"type": "function", "name"}]}``; ``parallel_tool_calls`` as in Chat.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...schema_tools import Loss, strict_schema
from ._common import ChoiceResult, ToolChoice, ToolSpec, check_choice_names, openai_parallel
from ._part import Declarations

__all__ = ["DIALECT", "ResponsesDeclarations", "PART", "read_flat_tool"]

DIALECT = "openai-responses"


def declare_tool(spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One tool declaration; with ``strict`` the schema is rewritten (raises ``StrictSchemaError``). A custom
    tool has no schema and no ``strict`` field, so ``strict`` leaves it as it is."""
    if spec.kind == "custom":
        custom: dict[str, Any] = {"type": "custom", "name": spec.name}
        if spec.description:
            custom["description"] = spec.description
        if spec.format is not None:
            custom["format"] = dict(spec.format)
        return custom, ()
    schema: dict[str, Any] = spec.input_schema
    losses: tuple[Loss, ...] = ()
    if strict:
        conv = strict_schema(schema, tool=spec.name, dialect=DIALECT)
        schema, losses = conv.schema, conv.losses
    out: dict[str, Any] = {"type": "function", "name": spec.name}
    if spec.description:
        out["description"] = spec.description
    out["parameters"] = schema
    out["strict"] = bool(strict)
    return out, losses


def _ref(name: str, custom: Collection[str]) -> dict[str, Any]:
    return {"type": "custom" if name in custom else "function", "name": name}


def choice_fragment(choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                    custom: Collection[str] = ()) -> ChoiceResult:
    """``tool_choice`` (+ ``parallel_tool_calls``) for ``choice``; every choice is expressible here. ``custom``:
    the declared names that are custom tools (a choice refers to them as such)."""
    check_choice_names(DIALECT, choice, names)
    value: Any
    if choice.mode == "tool":
        value = _ref(choice.name, custom)  # type: ignore[arg-type]
    elif choice.allowed is not None:
        value = {"type": "allowed_tools", "mode": choice.mode, "tools": [_ref(n, custom) for n in choice.allowed]}
    else:
        value = choice.mode
    extra, warnings = openai_parallel(choice, strict)
    return ChoiceResult(fragment={"tool_choice": value, **extra}, warnings=warnings)


def read_flat_tool(raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
    """A flat function tool entry (``{"type": "function", name, description?, parameters}``, as Responses and
    Gemini Interactions declare them), or None."""
    if "parameters" in raw and raw.get("type") == "function":
        return {"name": raw.get("name"), "description": raw.get("description"), "input_schema": raw["parameters"]}
    return None


class ResponsesDeclarations(Declarations):
    """OpenAI Responses tools and ``tool_choice`` (see the module docstring)."""

    dialect = DIALECT

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        return declare_tool(spec, strict=strict, schema_mode=schema_mode)

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        return choice_fragment(choice, names, strict=strict, custom=custom)

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        """A flat function tool, or a custom tool (``{"type": "custom", name, description?, format?}``)."""
        if raw.get("type") == "custom" and "input_schema" not in raw:
            return {"name": raw.get("name"), "description": raw.get("description"), "kind": "custom",
                    "format": raw.get("format")}
        return read_flat_tool(raw, index)


PART = ResponsesDeclarations()
