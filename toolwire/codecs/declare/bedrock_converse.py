"""Amazon Bedrock Converse declarations.

Tools and the choice share one object, ``toolConfig``: ``{"toolConfig": {"tools": [{"toolSpec": {name,
description?, inputSchema: {"json": schema}, strict?}}], "toolChoice": {"auto": {}} | {"any": {}} |
{"tool": {"name": ...}}}}`` (botocore's ``ToolConfiguration``, ``ToolSpecification``, ``ToolChoice``).
``toolChoice`` other than ``auto`` is honoured by the models that support it (Anthropic Claude, Amazon Nova,
Mistral Large); the others refuse it.

Nearest equivalents (returned as ``Approximation`` warnings, never silent):

* mode ``none``: Converse has no choice that forbids calls, and a request whose history holds ``toolUse`` or
  ``toolResult`` blocks must carry ``toolConfig`` (Bedrock refuses it otherwise), so dropping the tools is no
  answer either. The tools stay declared with ``{"auto": {}}`` (warning ``none_as_auto``): the model may still
  call one, and the application decides whether to run it (a policy that denies, for instance).
* an allowed subset with mode ``auto``, or with ``required`` and more than one tool: Converse has no
  allowed-tools choice, so only the allowed tools are declared (``allowed_filtered``). ``required`` with one
  allowed tool is exactly ``{"tool": {"name"}}``.
* ``parallel=False``: Converse has no switch for parallel calls; nothing is sent (``parallel_not_expressible``).
* ``strict``: ``toolSpec.strict: true`` is sent with the schema unchanged (``strict_not_transformed``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...schema_tools import Loss
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec, check_choice_names, refuse_kind
from ._part import Declarations

__all__ = ["DIALECT", "BedrockConverseDeclarations", "PART"]

DIALECT = "bedrock-converse"

#: entries of a Converse tools list that declare no tool of the application's (a cache checkpoint, a tool the
#: provider runs itself)
_NOT_TOOLS = ("cachePoint", "systemTool")


class BedrockConverseDeclarations(Declarations):
    """Bedrock Converse ``toolConfig`` (see the module docstring)."""

    dialect = DIALECT
    tools_at = ("toolConfig", "tools")
    choice_at = ("toolConfig", "toolChoice")

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        """``{"toolSpec": {...}}`` with the schema as given. A custom (free-text) tool raises
        ``DeclarationLimitError``: Converse tools take JSON input only."""
        refuse_kind(DIALECT, spec)
        out: dict[str, Any] = {"name": spec.name}
        if spec.description:  # a NonEmptyString: left out when empty
            out["description"] = spec.description
        out["inputSchema"] = {"json": spec.input_schema}
        if strict:
            out["strict"] = True
        return {"toolSpec": out}, ()

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        spec = declaration.get("toolSpec") or {}
        schema = (spec.get("inputSchema") or {}).get("json")
        return schema if isinstance(schema, dict) else {}

    def strict_warnings(self, strict: bool) -> tuple[Approximation, ...]:
        if not strict:
            return ()
        return (Approximation(code="strict_not_transformed",
                              detail="bedrock-converse: toolSpec.strict: true sent with the schema unchanged (which "
                                     "schemas a model can enforce is not documented; it may refuse the request)"),)

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        check_choice_names(DIALECT, choice, names)
        warnings: list[Approximation] = []
        keep: tuple[str, ...] | None = None
        value: dict[str, Any]
        if choice.mode == "none":
            value = {"auto": {}}
            warnings.append(Approximation(
                code="none_as_auto",
                detail="bedrock-converse has no tool choice that forbids calls (and needs toolConfig whenever the "
                       "history holds toolUse or toolResult blocks): the tools stay declared with toolChoice auto, "
                       "so the model may still call one"))
        elif choice.mode == "tool":
            value = {"tool": {"name": choice.name}}
        elif choice.allowed is not None and choice.mode == "required" and len(choice.allowed) == 1:
            value = {"tool": {"name": choice.allowed[0]}}
        else:
            value = {"any": {}} if choice.mode == "required" else {"auto": {}}
            if choice.allowed is not None:
                keep = choice.allowed
                warnings.append(Approximation(
                    code="allowed_filtered",
                    detail=f"bedrock-converse has no allowed-tools choice: only {list(choice.allowed)} are declared, "
                           f"with toolChoice {next(iter(value))!r} (the other tools' descriptions are not sent)"))
        if choice.parallel is False and choice.mode != "none":
            warnings.append(Approximation(code="parallel_not_expressible",
                                          detail="bedrock-converse has no setting to forbid parallel tool calls; "
                                                 "not sent"))
        return ChoiceResult(fragment={"toolConfig": {"toolChoice": value}}, keep=keep, warnings=tuple(warnings))

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        """A ``{"toolSpec": {name, description, inputSchema: {json}}}`` entry."""
        spec = raw.get("toolSpec")
        if not isinstance(spec, Mapping) or len(raw) != 1:
            return None
        schema = spec.get("inputSchema")
        return {"name": spec.get("name"), "description": spec.get("description"),
                "input_schema": schema.get("json") if isinstance(schema, Mapping) else None}

    def tool_group(self, raw: Mapping[str, Any]) -> list[Any] | None:
        """A ``cachePoint`` or ``systemTool`` entry stands for none of the application's tools."""
        if len(raw) == 1 and next(iter(raw)) in _NOT_TOOLS:
            return []
        return None


PART = BedrockConverseDeclarations()
