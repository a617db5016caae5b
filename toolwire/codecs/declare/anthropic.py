"""Anthropic Messages declarations.

A tool is ``{name, description?, input_schema}`` (``strict: true`` when asked). ``tool_choice`` is
``{"type": "auto"|"any"|"tool"|"none"}``, the first three with ``disable_parallel_tool_use``.

Nearest equivalents (returned as ``Approximation`` warnings, never silent):

* an allowed subset with mode ``auto``, or with mode ``required`` and more than one tool: Anthropic has no
  allowed-tools choice, so only the allowed tools are declared (``auto`` / ``any`` over them). What the model
  may call is exact; the others' descriptions are not sent, and the prompt-cache prefix changes.
  (``required`` with one allowed tool is exactly ``{"type": "tool"}``: no warning.)
* ``parallel`` with mode ``none``: ``{"type": "none"}`` has no ``disable_parallel_tool_use``; no tool is called,
  so nothing changes, but the flag is not sent.
* ``strict``: ``strict: true`` is sent with the schema unchanged; Anthropic does not document its strict subset,
  so toolwire does not rewrite it (the API may refuse a schema it cannot compile).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ...schema_tools import Loss
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec, check_choice_names, refuse_kind
from ._part import Declarations

__all__ = ["DIALECT", "AnthropicDeclarations", "PART"]

DIALECT = "anthropic"


class AnthropicDeclarations(Declarations):
    """Anthropic Messages tools and ``tool_choice`` (see the module docstring). An Anthropic tools entry
    (``{name, description, input_schema}``) is also toolwire's canonical shape, so ``read_tool`` adds nothing."""

    dialect = DIALECT

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        """One tool declaration (the schema is sent as given). A custom (free-text) tool raises
        ``DeclarationLimitError``: Anthropic tools take JSON input only."""
        refuse_kind(DIALECT, spec)
        out: dict[str, Any] = {"name": spec.name}
        if spec.description:
            out["description"] = spec.description
        out["input_schema"] = spec.input_schema
        if strict:
            out["strict"] = True
        return out, ()

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        return declaration.get("input_schema") or {}

    def strict_warnings(self, strict: bool) -> tuple[Approximation, ...]:
        if not strict:
            return ()
        return (Approximation(code="strict_not_transformed",
                              detail="anthropic: strict: true sent with the schema unchanged (Anthropic's strict "
                                     "subset is not documented; the API may refuse a schema it cannot compile)"),)

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        """``tool_choice`` for ``choice``; an allowed subset is declared as fewer tools (see the module doc)."""
        return _choice(choice, names)


def _choice(choice: ToolChoice, names: Sequence[str]) -> ChoiceResult:
    check_choice_names(DIALECT, choice, names)
    warnings: list[Approximation] = []
    flag: dict[str, Any] = {}
    if choice.parallel is not None:
        flag = {"disable_parallel_tool_use": not choice.parallel}
    keep: tuple[str, ...] | None = None
    value: dict[str, Any]
    if choice.mode == "none":
        value = {"type": "none"}
        if choice.parallel is not None:
            warnings.append(Approximation(code="parallel_without_calls",
                                          detail="anthropic: tool_choice none has no disable_parallel_tool_use; no "
                                                 "tool is called, so the parallel setting is not sent"))
    elif choice.mode == "tool":
        value = {"type": "tool", "name": choice.name, **flag}
    elif choice.allowed is not None and choice.mode == "required" and len(choice.allowed) == 1:
        value = {"type": "tool", "name": choice.allowed[0], **flag}
    else:
        value = {"type": "any" if choice.mode == "required" else "auto", **flag}
        if choice.allowed is not None:
            keep = choice.allowed
            warnings.append(Approximation(
                code="allowed_filtered",
                detail=f"anthropic has no allowed-tools choice: only {list(choice.allowed)} are declared, with "
                       f"tool_choice {value['type']!r} (the other tools' descriptions are not sent; the prompt "
                       "cache prefix changes)"))
    return ChoiceResult(fragment={"tool_choice": value}, keep=keep, warnings=tuple(warnings))


PART = AnthropicDeclarations()
