"""Gemini Interactions declarations.

Function tools are flat ``{"type": "function", name, description?, parameters}`` with a JSON Schema (Google
documents some keywords as ignored: reported as losses). ``generation_config.tool_choice`` is
``"auto"|"any"|"none"|"validated"`` or ``{"allowed_tools": {"mode", "tools": [names]}}`` (lower case, names not
objects), so every mode, an allowed subset with ``auto`` included, is expressible.

Nearest equivalents (``Approximation`` warnings): ``parallel=False`` has no setting (not sent); ``strict``
sends ``validated`` in place of ``auto``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...schema_tools import Loss, ignored_keywords
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec, check_choice_names, refuse_kind
from ._part import Declarations
from .openai_responses import read_flat_tool

__all__ = ["DIALECT", "InteractionsDeclarations", "PART"]

DIALECT = "gemini-interactions"


def declare_tool(spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One function tool (the JSON Schema is sent as given). A custom (free-text) tool raises
    ``DeclarationLimitError``: Interactions declares function tools only."""
    refuse_kind(DIALECT, spec)
    out: dict[str, Any] = {"type": "function", "name": spec.name}
    if spec.description:
        out["description"] = spec.description
    out["parameters"] = spec.input_schema
    return out, ignored_keywords(spec.input_schema, tool=spec.name, documented=True)


def choice_fragment(choice: ToolChoice, names: Sequence[str], *, strict: bool = False) -> ChoiceResult:
    """``generation_config.tool_choice`` for ``choice``."""
    check_choice_names(DIALECT, choice, names)
    warnings: list[Approximation] = []
    auto = "validated" if strict else "auto"
    value: Any
    if choice.mode == "none":
        value = "none"
    elif choice.mode == "tool":
        value = {"allowed_tools": {"mode": "any", "tools": [choice.name]}}
    elif choice.allowed is not None:
        mode = "any" if choice.mode == "required" else auto
        value = {"allowed_tools": {"mode": mode, "tools": list(choice.allowed)}}
    else:
        value = "any" if choice.mode == "required" else auto
    if strict and choice.mode == "auto":
        warnings.append(Approximation(code="strict_validated",
                                      detail="gemini-interactions: strict sends validated (calls constrained to the "
                                             "schema, text still allowed) in place of auto"))
    if choice.parallel is False and choice.mode != "none":
        warnings.append(Approximation(code="parallel_not_expressible",
                                      detail="gemini-interactions has no setting to forbid parallel function calls; "
                                             "not sent"))
    return ChoiceResult(fragment={"generation_config": {"tool_choice": value}}, warnings=tuple(warnings))


class InteractionsDeclarations(Declarations):
    """Gemini Interactions tools and ``generation_config.tool_choice`` (see the module docstring)."""

    dialect = DIALECT
    choice_at = ("generation_config", "tool_choice")

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        return declare_tool(spec, strict=strict, schema_mode=schema_mode)

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        return choice_fragment(choice, names, strict=strict)

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        return read_flat_tool(raw, index)


PART = InteractionsDeclarations()
