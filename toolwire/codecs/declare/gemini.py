"""Gemini ``generateContent`` declarations, Gemini API and Vertex AI.

Tools are ``{"tools": [{"functionDeclarations": [{name, description?, parametersJsonSchema | parameters}]}]}``.
``schema_mode="json_schema"`` (the default) sends the JSON Schema as ``parametersJsonSchema`` and reports the
keywords Google documents as ignored; ``schema_mode="openapi"`` converts to the OpenAPI 3.0 subset
(``parameters``; ``toolwire.schema_tools.gemini_schema``) for endpoints and models that only take that, and
reports every loss. A tool without parameters gets no ``parameters`` (the API refuses an OBJECT without
properties).

``toolConfig.functionCallingConfig`` is ``{mode: AUTO|ANY|NONE|VALIDATED, allowedFunctionNames}``, the names
"only set when the mode is ANY". Nearest equivalents (returned as ``Approximation`` warnings):

* an allowed subset with mode ``auto``: not expressible (names only with ANY, and ANY forces a call). Only the
  allowed tools are declared, with mode AUTO: what the model may call is exact and it may still answer in text.
* ``parallel=False``: Gemini has no switch for parallel calls; nothing is sent (warning). ``parallel=True`` is
  the default behaviour.
* ``strict``: Gemini's schema-constrained "call or text" mode is VALIDATED, sent in place of AUTO.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...registry.errors import ToolDeclarationError
from ...schema_tools import Loss, gemini_schema, ignored_keywords
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec, check_choice_names, refuse_kind
from ._part import Declarations

__all__ = ["DIALECT", "GeminiDeclarations", "PART"]

DIALECT = "gemini"


def declare_tool(spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One function declaration; ``schema_mode="openapi"`` may raise ``SchemaConversionError``. A custom
    (free-text) tool raises ``DeclarationLimitError``: Gemini declares functions only."""
    refuse_kind(DIALECT, spec)
    out: dict[str, Any] = {"name": spec.name}
    if spec.description:
        out["description"] = spec.description
    if schema_mode == "openapi":
        conv = gemini_schema(spec.input_schema, tool=spec.name, dialect=DIALECT)
        if conv.schema.get("properties"):
            out["parameters"] = conv.schema
        return out, conv.losses
    out["parametersJsonSchema"] = spec.input_schema
    return out, ignored_keywords(spec.input_schema, tool=spec.name, documented=False)


def schema_of(declaration: dict[str, Any]) -> dict[str, Any]:
    return declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}


def choice_fragment(choice: ToolChoice, names: Sequence[str], *, strict: bool = False) -> ChoiceResult:
    """``toolConfig.functionCallingConfig`` for ``choice`` (see the module doc for nearest equivalents)."""
    check_choice_names(DIALECT, choice, names)
    warnings: list[Approximation] = []
    keep: tuple[str, ...] | None = None
    auto = "VALIDATED" if strict else "AUTO"
    config: dict[str, Any]
    if choice.mode == "none":
        config = {"mode": "NONE"}
    elif choice.mode == "tool":
        config = {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    elif choice.mode == "required":
        config = {"mode": "ANY"}
        if choice.allowed is not None:
            config["allowedFunctionNames"] = list(choice.allowed)
    else:
        config = {"mode": auto}
        if choice.allowed is not None:
            keep = choice.allowed
            warnings.append(Approximation(
                code="allowed_auto_filtered",
                detail=f"gemini cannot restrict mode {auto} to some functions (allowedFunctionNames only with ANY): "
                       f"only {list(choice.allowed)} are declared, with mode {auto}"))
    if strict and config["mode"] == "VALIDATED":
        warnings.append(Approximation(code="strict_validated",
                                      detail="gemini: strict sends mode VALIDATED (calls constrained to the schema, "
                                             "text still allowed) in place of AUTO"))
    if choice.parallel is False and choice.mode != "none":
        warnings.append(Approximation(code="parallel_not_expressible",
                                      detail="gemini has no setting to forbid parallel function calls; not sent"))
    return ChoiceResult(fragment={"toolConfig": {"functionCallingConfig": config}}, keep=keep,
                        warnings=tuple(warnings))


class GeminiDeclarations(Declarations):
    """Gemini ``functionDeclarations`` and ``toolConfig`` (see the module docstring)."""

    dialect = DIALECT
    choice_at = ("toolConfig", "functionCallingConfig")

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        return declare_tool(spec, strict=strict, schema_mode=schema_mode)

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        return schema_of(declaration)

    def tools_value(self, declarations: list[dict[str, Any]]) -> Any:
        """One tool holding every function declaration."""
        return [{"functionDeclarations": declarations}]

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        return choice_fragment(choice, names, strict=strict)

    def tool_group(self, raw: Mapping[str, Any]) -> list[Any] | None:
        """A tool of ``functionDeclarations``."""
        group = raw.get("functionDeclarations")
        return group if isinstance(group, list) else None

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        """A function declaration with ``parametersJsonSchema``; one with the OpenAPI ``parameters`` is refused
        (a JSON Schema is needed)."""
        if "parametersJsonSchema" in raw:
            return {"name": raw.get("name"), "description": raw.get("description"),
                    "input_schema": raw["parametersJsonSchema"]}
        if "parameters" in raw and raw.get("type") != "function":
            raise ToolDeclarationError(f"tool #{index} ({raw.get('name')!r}) has Gemini OpenAPI 'parameters'; give a "
                                       "JSON Schema (input_schema, inputSchema or parametersJsonSchema)",
                                       tool=raw.get("name"), rule="JSON Schema input")
        return None


PART = GeminiDeclarations()
