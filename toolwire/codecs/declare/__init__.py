"""Tool declarations and tool choice for every dialect, from the canonical ``Tool`` (one module per dialect).

``declare(dialect, tools, choice=..., strict=..., schema_mode=...)`` returns the request fragment: ``tools``
plus ``tool_choice`` and whatever else the dialect needs (``parallel_tool_calls``, ``toolConfig``,
``generation_config``), the schema ``losses`` of the declaration, and ``warnings`` for every choice a dialect
cannot express exactly and was sent as its nearest equivalent. Nothing changes silently; limits from the
capabilities records (name rule and length, maximum tools, strict schema depth, …) raise
``DeclarationLimitError``. toolwire never renames a tool: a name a dialect refuses is an error here, and
``toolwire audit`` suggests a portable one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ...errors import UsageError
from ...registry.errors import DuplicateToolError, ToolDeclarationError
from ...schema_tools import Loss, SchemaConversionError, StrictSchemaError
from ._common import (
    REFUSED_SCHEMA,
    SCHEMA_MODES,
    Approximation,
    ChoiceResult,
    DeclarationLimitError,
    LimitFinding,
    ToolChoice,
    ToolChoiceError,
    ToolSpec,
    as_spec,
    check_limits,
    kind_finding,
    suggest_name,
)
from ._part import Declarations, lookup

__all__ = [
    "DIALECTS",
    "SCHEMA_MODES",
    "Declaration",
    "Declarations",
    "ToolSpec",
    "ToolChoice",
    "Approximation",
    "ChoiceResult",
    "LimitFinding",
    "DeclarationLimitError",
    "ToolChoiceError",
    "declare",
    "declare_tool",
    "translate_choice",
    "load_tools",
    "tools_list",
    "as_spec",
    "check_limits",
    "kind_finding",
    "suggest_name",
    "module_for",
    "part_for",
]


def __getattr__(name: str) -> Any:
    if name == "DIALECTS":  # dialect id -> its declarations part, from the registry
        from .. import dialects

        return {d.id: d.declarations for d in dialects()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Declaration(msgspec.Struct, frozen=True, kw_only=True):
    """What ``declare`` returns: the ``fragment`` to merge into a request body, the schema ``losses`` and the
    choice ``warnings`` (``Approximation``) of the declaration."""

    dialect: str
    fragment: dict[str, Any]
    losses: tuple[Loss, ...] = ()
    warnings: tuple[Approximation, ...] = ()


def part_for(dialect: str) -> Declarations:
    """The declarations part of ``dialect``; raises ``UsageError`` for an unknown one."""
    from .. import dialects

    for d in dialects():
        if d.id == dialect:
            return d.declarations
    raise UsageError(f"unknown dialect {dialect!r}; expected one of: {', '.join(d.id for d in dialects())}")


#: the former name of ``part_for`` (it returned a module with the same functions)
module_for = part_for


def _check_mode(schema_mode: str) -> None:
    if schema_mode not in SCHEMA_MODES:
        raise UsageError(f"schema_mode must be one of {SCHEMA_MODES}, not {schema_mode!r}")


def declare_tool(dialect: str, tool: Any, *, strict: bool = False, schema_mode: str = "json_schema"
                 ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
    """One tool's declaration in ``dialect`` and the schema losses (no limit checks).

    Raises ``StrictSchemaError`` (``strict`` on OpenAI), ``SchemaConversionError`` (Gemini ``openapi``),
    ``UsageError``.
    """
    _check_mode(schema_mode)
    return part_for(dialect).declare_tool(as_spec(tool), strict=strict, schema_mode=schema_mode)


def _refuse_kinds(dialect: str, specs: Iterable[ToolSpec]) -> None:
    """Raise ``DeclarationLimitError`` (with every such tool in ``findings``) when ``dialect`` cannot declare some
    tool's kind: a custom tool is never sent as a function the model would call with JSON."""
    refused = [f for f in (kind_finding(dialect, s) for s in specs) if f is not None]
    if refused:
        raise DeclarationLimitError(refused[0], refused)


def translate_choice(dialect: str, choice: ToolChoice, names: Iterable[str], *, strict: bool = False,
                     custom: Iterable[str] = ()) -> ChoiceResult:
    """``choice`` in ``dialect`` for the declared tool ``names``, of which ``custom`` are custom tools (OpenAI
    names those in a choice as custom, not function, tools).

    Raises ``ToolChoiceError`` for an unknown name, ``DeclarationLimitError`` when ``custom`` is not empty and
    the dialect has no custom tools."""
    part = part_for(dialect)
    custom = list(custom)
    _refuse_kinds(dialect, [ToolSpec(name=n, kind="custom") for n in custom])
    # only the dialects that declare custom tools get custom names (the others refused them)
    return part.choice_fragment(choice, list(names), strict=strict, custom=custom)


def declare(dialect: str, tools: Iterable[Any], *, choice: ToolChoice | None = None, strict: bool = False,
            schema_mode: str = "json_schema") -> Declaration:
    """Declare ``tools`` (``Tool``, ``ToolSpec`` or ``{"name", "description", "input_schema"}``) for ``dialect``.

    A custom (free-text) tool (``kind == "custom"``, with its ``format``) is declared as the OpenAI dialects'
    custom tool; the other dialects refuse it with ``DeclarationLimitError`` (limit ``tool_kind``).
    ``choice`` defaults to ``ToolChoice.auto()``. ``strict`` asks the provider to constrain arguments to the
    schema (OpenAI: ``strict: true`` with the schema rewritten and ``parallel_tool_calls: false``; Anthropic:
    ``strict: true``; Gemini and Interactions: mode VALIDATED in place of AUTO). ``schema_mode`` matters for
    ``gemini`` only: ``json_schema`` (``parametersJsonSchema``) or ``openapi`` (``parameters``).

    Raises ``DeclarationLimitError`` (a limit of the dialect is broken; ``findings`` lists all),
    ``StrictSchemaError`` or ``SchemaConversionError`` (the first tool whose schema cannot be expressed; its
    ``errors`` lists every such tool's, its ``findings`` the limits broken too), ``ToolChoiceError`` (unknown
    tool in the choice), ``DuplicateToolError``, ``ToolDeclarationError`` (a malformed tool), ``UsageError``
    (unknown dialect or mode, no tools).
    """
    part = part_for(dialect)
    _check_mode(schema_mode)
    specs = [as_spec(t) for t in tools]
    if not specs:
        raise UsageError("no tools to declare")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise DuplicateToolError(f"two tools are named {spec.name!r}", tool=spec.name, rule="unique names")
        seen.add(spec.name)
    _refuse_kinds(dialect, specs)
    choice = choice if choice is not None else ToolChoice()
    result = part.choice_fragment(choice, [s.name for s in specs], strict=strict,
                                  custom=[s.name for s in specs if s.kind == "custom"])
    chosen = specs if result.keep is None else [s for s in specs if s.name in set(result.keep)]
    declarations: list[dict[str, Any]] = []
    schemas: list[Any] = []
    losses: list[Loss] = []
    refusals: list[StrictSchemaError | SchemaConversionError] = []
    for spec in chosen:  # every tool, so that the error tells about all of them
        try:
            declaration, lost = part.declare_tool(spec, strict=strict, schema_mode=schema_mode)
        except (StrictSchemaError, SchemaConversionError) as exc:
            refusals.append(exc)
            schemas.append(REFUSED_SCHEMA)  # its limits are those of a tool without a schema: name, kind, count
            continue
        declarations.append(declaration)
        schemas.append(part.schema_of(declaration))
        losses.extend(lost)
    tools_fragment = part.tools_fragment(declarations)
    findings = check_limits(dialect, chosen, schemas, strict=strict, schema_mode=schema_mode,
                            tools_payload=part.tools_in(tools_fragment))
    if refusals:
        raise _every_problem(refusals, findings)
    if findings:
        raise DeclarationLimitError(findings[0], findings)
    from ..requests import merge_body

    # the tools and the choice may share an object (a tool configuration): merged key by key
    fragment = merge_body(tools_fragment, result.fragment)
    return Declaration(dialect=dialect, fragment=fragment, losses=tuple(losses),
                       warnings=tuple(result.warnings) + tuple(part.strict_warnings(strict)))


def _every_problem(refusals: list[StrictSchemaError | SchemaConversionError], findings: list[LimitFinding]
                   ) -> StrictSchemaError | SchemaConversionError:
    """The first refusal, carrying every refusal (``errors``) and limit finding (``findings``) of the tool set;
    its message says how many more there are."""
    first = refusals[0]
    first.errors = tuple(refusals)
    first.findings = tuple(findings)
    more = len(refusals) - 1 + len(findings)
    if more:
        first.args = (f"{first.message} (and {more} more)",)
    return first


# ---- reading tool lists ----------------------------------------------------------------------------------------


def _canonical(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """A canonical entry (``toolwire.Tool``'s fields: ``input_schema``, or ``kind: "custom"`` and ``format``), or
    an MCP ``tools/list`` entry (``inputSchema``); None for anything else."""
    if raw.get("kind") == "custom":
        return {"name": raw.get("name"), "description": raw.get("description"), "kind": "custom",
                "format": raw.get("format")}
    if "input_schema" in raw or "inputSchema" in raw:
        return {"name": raw.get("name"), "description": raw.get("description"),
                "input_schema": raw.get("input_schema", raw.get("inputSchema"))}
    return None


def _entry(raw: Any, index: int) -> dict[str, Any]:
    """One tool entry in any supported shape, as ``{"name", "description", "input_schema"}`` (a custom tool:
    ``{"name", "description", "kind": "custom", "format"}``, the format in the Responses shape): a canonical or
    MCP entry, else the first dialect whose reader knows the shape, else a bare name (no arguments)."""
    from .. import dialects

    if not isinstance(raw, Mapping):
        raise ToolDeclarationError(f"tool #{index} is not a JSON object", tool=None, rule="tool is an object")
    entry = _canonical(raw)
    if entry is not None:
        return entry
    for d in dialects():
        entry = d.declarations.read_tool(raw, index)
        if entry is not None:
            return entry
    if "name" in raw:
        return {"name": raw.get("name"), "description": raw.get("description"), "input_schema": None}
    raise ToolDeclarationError(f"tool #{index} has no name", tool=None, rule="name")


def _group(raw: Any) -> list[Any] | None:
    """The entries a list item stands for, when some dialect groups several tools in one."""
    from .. import dialects

    if not isinstance(raw, Mapping):
        return None
    for d in dialects():
        group = d.declarations.tool_group(raw)
        if group is not None:
            return group
    return None


def tools_list(doc: Any) -> Any:
    """The tools list of a document: the list itself, the ``tools`` of an MCP ``tools/list`` result (or its
    JSON-RPC envelope), or the list a request body (or fragment) holds where some dialect puts its tools; None
    when there is none."""
    from .. import dialects

    if isinstance(doc, Mapping) and isinstance(doc.get("result"), Mapping) and "jsonrpc" in doc:
        doc = doc["result"]
    if not isinstance(doc, Mapping):
        return doc if isinstance(doc, list) else None
    for path in [("tools",)] + [d.declarations.tools_at for d in dialects()]:
        found = lookup(doc, path)
        if isinstance(found, list):
            return found
    return None


def load_tools(doc: Any) -> list[ToolSpec]:
    """Tool specs from a parsed JSON document.

    Accepted: a list of canonical tools ``[{"name", "description", "input_schema"}]``; an MCP ``tools/list``
    result ``{"tools": [{"name", "description", "inputSchema"}]}`` (or its JSON-RPC envelope); a Chat,
    Responses, Anthropic or Interactions ``tools`` array; Gemini ``[{"functionDeclarations": [...]}]`` with
    ``parametersJsonSchema``. Custom tools (Chat or Responses ``{"type": "custom", …}``, or canonical with
    ``"kind": "custom"`` and ``format``) load as custom specs, their format in the Responses shape. A tool
    without a schema takes no arguments. Each schema must be a valid JSON Schema whose type is ``object`` (as
    for ``Tool.from_schema``); names are not checked here (``declare`` and ``audit`` do, per dialect).

    Raises ``ToolDeclarationError`` (``DuplicateToolError`` for a repeated name).
    """
    from ...registry.tool import _schema_validator

    found = tools_list(doc)
    if found is None and _group(doc) is not None:
        found = [doc]  # one item that groups several tools
    if not isinstance(found, list):
        raise ToolDeclarationError("expected a list of tools or an object with a 'tools' list", tool=None,
                                   rule="tools list")
    entries: list[dict[str, Any]] = []
    for i, raw in enumerate(found):
        group = _group(raw)
        if group is not None:
            entries.extend(_entry(d, i) for d in group)
        else:
            entries.append(_entry(raw, i))
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for entry in entries:
        spec = as_spec(entry)
        if spec.name in seen:
            raise DuplicateToolError(f"two tools are named {spec.name!r}", tool=spec.name, rule="unique names")
        seen.add(spec.name)
        if spec.kind == "function":
            _schema_validator(spec.name, spec.input_schema)
        specs.append(spec)
    return specs
