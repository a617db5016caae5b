"""What every dialect's declaration module shares: the canonical tool spec and tool choice, the typed errors,
approximation warnings, and the limit checks read from the capabilities records."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

import msgspec

from ...errors import UsageError
from ...registry.errors import ToolDeclarationError
from ...schema_tools import schema_stats
from ..capabilities import Capabilities, capabilities_for

__all__ = [
    "ToolSpec",
    "ToolChoice",
    "Approximation",
    "ChoiceResult",
    "LimitFinding",
    "DeclarationLimitError",
    "ToolChoiceError",
    "as_spec",
    "check_limits",
    "kind_finding",
    "refuse_kind",
    "TEXT_INPUT",
    "suggest_name",
    "SCHEMA_MODES",
    "check_choice_names",
    "openai_parallel",
]

SCHEMA_MODES = ("json_schema", "openapi")

ChoiceMode = Literal["auto", "required", "none", "tool"]


def _no_arguments() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


#: the input schema a custom tool is given: its input is one text, not an object (never sent)
TEXT_INPUT: dict[str, Any] = {"type": "string"}

_FORMAT_RULE = 'format {"type": "text"} or {"type": "grammar", "syntax": "lark"|"regex", "definition": str}'


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as declarations see it: ``name``, ``description``, ``input_schema`` (a JSON Schema object), and
    ``kind``: ``"function"`` (JSON arguments) or ``"custom"`` (free text, the OpenAI dialects only).

    ``format`` is a custom tool's input format in the Responses shape (``{"type": "text"}`` or ``{"type":
    "grammar", "syntax": "lark" | "regex", "definition": …}``; None: unconstrained text); each dialect writes it
    in its own shape. A custom tool's ``input_schema`` is not sent.

    ``toolwire.Tool`` carries the same fields; a spec needs no handler and is not name-checked, so
    ``toolwire audit`` can report the names some provider would reject.
    """

    name: str
    input_schema: dict[str, Any] = msgspec.field(default_factory=_no_arguments)
    description: str = ""
    kind: str = "function"
    format: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("function", "custom"):
            raise ToolDeclarationError(f"tool {self.name!r}: kind must be 'function' or 'custom', not {self.kind!r}",
                                       tool=self.name, rule="kind function or custom")
        if self.format is not None:
            if self.kind != "custom":
                raise ToolDeclarationError(f"tool {self.name!r}: only a custom tool has a format", tool=self.name,
                                           rule="format only on custom tools")
            _check_format(self.name, self.format)


def _check_format(name: str, fmt: Any) -> None:
    """Refuse a custom tool format the OpenAI SDK types do not describe (the provider would refuse the request)."""
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("text", "grammar"):
        raise ToolDeclarationError(f"tool {name!r}: invalid custom tool format {fmt!r}", tool=name,
                                   rule=_FORMAT_RULE)
    if fmt["type"] == "grammar" and (fmt.get("syntax") not in ("lark", "regex")
                                     or not isinstance(fmt.get("definition"), str) or not fmt["definition"]):
        raise ToolDeclarationError(f"tool {name!r}: a grammar format needs syntax 'lark' or 'regex' and a non-empty "
                                   f"definition, got {dict(fmt)!r}", tool=name, rule=_FORMAT_RULE)


def as_spec(tool: Any) -> ToolSpec:
    """A ``ToolSpec`` from a ``Tool``, a ``ToolSpec``, or a mapping with ``name``, ``description`` and
    ``input_schema`` (or MCP's ``inputSchema``), and for a custom tool ``kind: "custom"`` and ``format``.
    Raises ``ToolDeclarationError`` for anything else."""
    if isinstance(tool, ToolSpec):
        return tool
    if isinstance(tool, Mapping):
        name = tool.get("name")
        schema = tool.get("input_schema", tool.get("inputSchema"))
        description = tool.get("description")
        kind = tool.get("kind", "function")
        fmt = tool.get("format")
    else:
        name = getattr(tool, "name", None)
        schema = getattr(tool, "input_schema", None)
        description = getattr(tool, "description", None)
        kind = getattr(tool, "kind", "function")
        fmt = getattr(tool, "format", None)
    if not isinstance(name, str):
        raise ToolDeclarationError(f"tool name must be a string, got {name!r}", tool=None, rule="name is a string")
    if description is not None and not isinstance(description, str):
        raise ToolDeclarationError(f"tool {name!r}: description must be a string", tool=name,
                                   rule="description is a string")
    if kind == "custom":
        if fmt is not None:
            _check_format(name, fmt)
            fmt = dict(fmt)
        return ToolSpec(name=name, input_schema=dict(TEXT_INPUT), description=description or "", kind="custom",
                        format=fmt)
    if schema is None:
        schema = _no_arguments()
    if not isinstance(schema, Mapping):
        raise ToolDeclarationError(f"tool {name!r}: input schema must be a JSON object", tool=name,
                                   rule="schema is an object")
    return ToolSpec(name=name, input_schema=dict(schema), description=description or "", kind=kind)


class ToolChoiceError(UsageError):
    """A tool choice that is malformed, names a tool that is not declared, or that a dialect cannot express.

    Attributes: ``dialect`` (None when the choice itself is malformed), ``choice`` (the ``ToolChoice`` or the
    text given), ``reason`` (a stable code: ``malformed``, ``unknown_tool``, ``not_expressible``).
    """

    def __init__(self, message: str, *, dialect: str | None, choice: Any, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.dialect = dialect
        self.choice = choice
        self.reason = reason


class ToolChoice(msgspec.Struct, frozen=True, kw_only=True):
    """Which tools the model may or must call, in one form for every dialect.

    * ``mode="auto"``: call any declared tool, or none (the default).
    * ``mode="required"``: call at least one tool ("any").
    * ``mode="none"``: call no tool.
    * ``mode="tool"`` with ``name``: call exactly that tool.
    * ``allowed`` (with ``auto`` or ``required``): only these tools may be called; the others stay declared.
    * ``parallel``: ``True``/``False`` allow or forbid several calls in one turn; ``None`` leaves the
      provider's default.

    Build with ``ToolChoice.auto()``, ``.required()``, ``.none()``, ``.tool(name)``, ``.allowed(names)`` or
    ``.parse("allowed:a,b:required")``. Raises ``ToolChoiceError`` (a ``UsageError``) when malformed.
    """

    mode: ChoiceMode = "auto"
    name: str | None = None
    allowed: tuple[str, ...] | None = None
    parallel: bool | None = None

    def __post_init__(self) -> None:
        def bad(why: str) -> ToolChoiceError:
            return ToolChoiceError(f"invalid tool choice: {why}", dialect=None, choice=self, reason="malformed")

        if self.mode not in ("auto", "required", "none", "tool"):
            raise bad(f"mode must be auto, required, none or tool, not {self.mode!r}")
        if self.mode == "tool":
            if not isinstance(self.name, str) or not self.name:
                raise bad("mode 'tool' needs the name of the tool")
            if self.allowed is not None:
                raise bad("mode 'tool' forces one tool; it takes no allowed subset")
        elif self.name is not None:
            raise bad(f"a name is only given with mode 'tool' (mode is {self.mode!r})")
        if self.allowed is not None:
            if self.mode == "none":
                raise bad("mode 'none' calls no tool; an allowed subset means nothing with it")
            if not self.allowed or not all(isinstance(n, str) and n for n in self.allowed):
                raise bad("allowed must name at least one tool")
            if len(set(self.allowed)) != len(self.allowed):
                raise bad("allowed names a tool twice")
        if self.parallel is not None and not isinstance(self.parallel, bool):
            raise bad("parallel must be True, False or None")

    # ---- constructors --------------------------------------------------------------------------------------
    @classmethod
    def auto(cls, *, parallel: bool | None = None) -> ToolChoice:
        return cls(mode="auto", parallel=parallel)

    @classmethod
    def required(cls, *, parallel: bool | None = None) -> ToolChoice:
        return cls(mode="required", parallel=parallel)

    @classmethod
    def none(cls) -> ToolChoice:
        return cls(mode="none")

    @classmethod
    def tool(cls, name: str, *, parallel: bool | None = None) -> ToolChoice:
        return cls(mode="tool", name=name, parallel=parallel)

    @classmethod
    def allowed_tools(cls, names: Iterable[str], *, required: bool = False, parallel: bool | None = None
                      ) -> ToolChoice:
        return cls(mode="required" if required else "auto", allowed=tuple(names), parallel=parallel)

    @classmethod
    def parse(cls, text: str, *, parallel: bool | None = None) -> ToolChoice:
        """Parse the CLI form: ``auto``, ``required``, ``none``, ``tool:NAME``, ``allowed:A,B`` or
        ``allowed:A,B:required`` (``:auto`` is accepted too)."""
        def bad(why: str) -> ToolChoiceError:
            return ToolChoiceError(f"invalid tool choice {text!r}: {why} (expected auto, required, none, "
                                   "tool:NAME or allowed:NAME,NAME[:required])", dialect=None, choice=text,
                                   reason="malformed")

        if text in ("auto", "required", "none"):
            return cls(mode=text, parallel=parallel)  # type: ignore[arg-type]
        kind, sep, rest = text.partition(":")
        if not sep or not rest:
            raise bad("unknown form")
        if kind == "tool":
            return cls(mode="tool", name=rest, parallel=parallel)
        if kind == "allowed":
            names, sep2, mode = rest.partition(":")
            if sep2 and mode not in ("auto", "required"):
                raise bad(f"the mode after the names must be auto or required, not {mode!r}")
            listed = tuple(n.strip() for n in names.split(","))
            if not all(listed):
                raise bad("an empty tool name")
            return cls(mode="required" if mode == "required" else "auto", allowed=listed, parallel=parallel)
        raise bad(f"unknown kind {kind!r}")

    def names(self) -> tuple[str, ...]:
        """The tool names this choice mentions."""
        if self.mode == "tool":
            return (self.name,)  # type: ignore[return-value]
        return self.allowed or ()


class Approximation(msgspec.Struct, frozen=True, kw_only=True):
    """A request a dialect cannot express exactly, and what was sent instead.

    ``code`` is stable (``allowed_auto_filtered``, ``parallel_not_expressible``, ``parallel_off_for_strict``,
    ``parallel_with_strict``, ``parallel_without_calls``, ``strict_not_transformed``, ``strict_validated``);
    ``detail`` is for people.
    """

    code: str
    detail: str


class ChoiceResult(msgspec.Struct, frozen=True, kw_only=True):
    """A dialect's translation of a ``ToolChoice``: the request keys to add (``fragment``), the declared tools to
    keep when the dialect can only restrict by declaring fewer (``keep``; None = all), and ``warnings``."""

    fragment: dict[str, Any]
    keep: tuple[str, ...] | None = None
    warnings: tuple[Approximation, ...] = ()


def check_choice_names(dialect: str, choice: ToolChoice, declared: Sequence[str]) -> None:
    """Raise ``ToolChoiceError`` (``unknown_tool``) when the choice names a tool that is not declared."""
    unknown = [n for n in choice.names() if n not in declared]
    if unknown:
        raise ToolChoiceError(f"tool choice names undeclared tool(s) {unknown}; declared: {list(declared)}",
                              dialect=dialect, choice=choice, reason="unknown_tool")


# ---- limits -----------------------------------------------------------------------------------------------------


class LimitFinding(msgspec.Struct, frozen=True, kw_only=True):
    """A provider limit a declaration breaks: ``limit`` (``name_length``, ``name_pattern``, ``max_tools``,
    ``schema_depth``, ``schema_properties``, ``enum_values``, ``parameter_name``, ``request_bytes``,
    ``tool_kind``, ``schema_root``, ``array_items``), the ``value`` found and the ``max`` allowed (a number, the
    rule as a pattern or in words, or for ``tool_kind`` the kinds the dialect declares), for ``tool`` (None when the
    limit is on the whole request) in ``dialect``; ``source`` and ``documented`` come from the capabilities."""

    dialect: str
    tool: str | None
    limit: str
    value: Any
    max: Any
    source: str
    documented: bool = True

    def describe(self) -> str:
        """The finding for people: the dialect, the tool, what is wrong and where the limit comes from."""
        who = f"tool {self.tool!r}" if self.tool is not None else "the request"
        if self.limit == "tool_kind":
            return (f"{self.dialect}: {who} is a {self.value} tool, which {self.dialect} cannot declare (it takes "
                    f"{self.max} tools only; {self.source})")
        doc = "" if self.documented else ", not documented by the provider"
        return (f"{self.dialect}: {who} breaks the {self.limit} limit: {self.value!r} (limit {self.max!r}; "
                f"{self.source}{doc})")


class DeclarationLimitError(ToolDeclarationError):
    """A declaration breaks a provider limit (a name too long or outside the pattern, too many tools, a schema
    too deep for strict mode, a custom tool for a dialect that only declares function tools, …).

    Attributes: ``tool`` (None for request-wide limits), ``limit``, ``value``, ``max``, ``dialect``,
    ``findings`` (every ``LimitFinding`` of the declaration, the first of which made the message).
    """

    def __init__(self, finding: LimitFinding, findings: Sequence[LimitFinding] = ()) -> None:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        super().__init__(finding.describe() + more, tool=finding.tool, rule=finding.limit)
        self.limit = finding.limit
        self.value = finding.value
        self.max = finding.max
        self.dialect = finding.dialect
        self.findings = tuple(findings) or (finding,)


def suggest_name(name: str, cap: Capabilities) -> str:
    """A name ``cap`` accepts, derived from ``name`` (for ``toolwire audit``'s ``renamed``; declarations never
    rename): characters outside ``[A-Za-z0-9_-]`` become ``_``, a leading digit or dash gets a ``_`` prefix,
    and a name that is too long is cut and ends with 8 hex digits of its SHA-1."""
    out = re.sub(r"[^A-Za-z0-9_-]", "_", name) or "_"
    if not (out[0].isalpha() or out[0] == "_"):
        out = "_" + out
    limit = min(cap.name_max, 64)
    if len(out) > limit:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
        out = out[: limit - 9] + "_" + digest
    return out


def kind_finding(dialect: str, spec: ToolSpec) -> LimitFinding | None:
    """The ``tool_kind`` finding for a tool whose kind ``dialect`` cannot declare (a custom tool outside the
    OpenAI dialects), else None. Such a tool is refused, never declared as a function in its place: the model
    would send JSON arguments to a tool that expects text."""
    cap = capabilities_for(dialect)
    if spec.kind in cap.tool_kinds:
        return None
    return LimitFinding(dialect=dialect, tool=spec.name, limit="tool_kind", value=spec.kind,
                        max=" and ".join(cap.tool_kinds), source=cap.tool_kinds_source)


def refuse_kind(dialect: str, spec: ToolSpec) -> None:
    """Raise ``DeclarationLimitError`` when ``dialect`` cannot declare a tool of ``spec``'s kind."""
    finding = kind_finding(dialect, spec)
    if finding is not None:
        raise DeclarationLimitError(finding)


def _name_findings(dialect: str, cap: Capabilities, name: str) -> list[LimitFinding]:
    found = []
    if len(name) > cap.name_max:
        found.append(LimitFinding(dialect=dialect, tool=name, limit="name_length", value=len(name),
                                  max=cap.name_max, source=cap.name_source))
    # the pattern without its final length bound, so a long name of valid characters is only "too long"
    relaxed = re.sub(r"\{(\d+),\d+\}$", lambda m: "*" if m.group(1) == "0" else "+", cap.name_pattern)
    if re.fullmatch(relaxed, name) is None:
        found.append(LimitFinding(dialect=dialect, tool=name, limit="name_pattern", value=name,
                                  max=f"^{cap.name_pattern}$", source=cap.name_source))
    return found


#: the schema ``declare`` passes to ``check_limits`` for a tool whose schema it refused (only the tool's name,
#: kind and count are checked then)
REFUSED_SCHEMA: Mapping[str, Any] = MappingProxyType({})
_COMBINATORS = ("anyOf", "oneOf", "allOf")
#: keywords whose value is one subschema, a list of them, or a mapping of names to them
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
        "unevaluatedItems", "unevaluatedProperties", "additionalItems")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _root_problem(schema: Any, rule: str) -> str | None:
    """What is wrong with ``schema``'s root under ``rule`` ("object" or "plain_object"), or None."""
    if not isinstance(schema, Mapping):
        return f"a {type(schema).__name__}, not a schema object"
    kind = schema.get("type")
    if kind != "object" and kind != ["object"]:
        return "no type" if kind is None else f"type {json.dumps(kind)}"
    if rule == "plain_object":
        used = [k for k in _COMBINATORS if k in schema]
        if used:
            return f"{'/'.join(used)} at the top level"
    return None


def _array_without_items(schema: Any, path: str = "$", depth: int = 0) -> str | None:
    """The JSON path of the first array schema in ``schema`` that does not give ``items``, or None."""
    if not isinstance(schema, Mapping) or depth > 64:
        return None
    kind = schema.get("type")
    if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in schema:
        return path
    for key in _ONE:
        found = _array_without_items(schema.get(key), f"{path}.{key}", depth + 1)
        if found:
            return found
    for key in _MANY:
        value = schema.get(key)
        for i, sub in enumerate(value if isinstance(value, list) else ()):
            found = _array_without_items(sub, f"{path}.{key}[{i}]", depth + 1)
            if found:
                return found
    for key in _NAMED:
        value = schema.get(key)
        for name, sub in (value.items() if isinstance(value, Mapping) else ()):
            found = _array_without_items(sub, f"{path}.{key}.{name}", depth + 1)
            if found:
                return found
    return None


def _shape_findings(dialect: str, cap: Capabilities, tool: str, schema: Any) -> list[LimitFinding]:
    """A function tool's input schema that ``dialect`` refuses whatever its size: a root that is not an object
    schema, an array schema without ``items``."""
    found = []
    if cap.schema_root is not None:
        problem = _root_problem(schema, cap.schema_root)
        if problem is not None:
            want = 'type "object"' + (" without anyOf/oneOf/allOf" if cap.schema_root == "plain_object" else "")
            found.append(LimitFinding(dialect=dialect, tool=tool, limit="schema_root", value=problem, max=want,
                                      source=cap.schema_root_source))
    if cap.array_items:
        path = _array_without_items(schema)
        if path is not None:
            found.append(LimitFinding(dialect=dialect, tool=tool, limit="array_items", value=path,
                                      max="every array schema gives items", source=cap.array_items_source))
    return found


def check_limits(dialect: str, specs: Sequence[ToolSpec], schemas: Sequence[Mapping[str, Any]], *,
                 strict: bool = False, schema_mode: str = "json_schema",
                 tools_payload: Any = None) -> list[LimitFinding]:
    """Every limit of ``dialect``'s capabilities record that the declaration breaks.

    ``schemas`` are the schemas as sent (after any strict transform), one per spec; ``tools_payload`` is the
    ``tools`` value as sent, for the request-size limit. Limits with ``applies="strict"`` are checked only when
    ``strict``; an undocumented limit (``value`` None) is never checked.
    """
    cap = capabilities_for(dialect)
    found: list[LimitFinding] = []
    for spec in specs:
        kind = kind_finding(dialect, spec)
        if kind is not None:
            found.append(kind)
        found.extend(_name_findings(dialect, cap, spec.name))
    max_tools = cap.max_tools
    if max_tools.value is not None and len(specs) > max_tools.value:
        found.append(LimitFinding(dialect=dialect, tool=specs[max_tools.value].name, limit="max_tools",
                                  value=len(specs), max=max_tools.value, source=max_tools.source,
                                  documented=max_tools.documented))

    def applies(limit: Any) -> bool:
        return limit.value is not None and (limit.applies == "always" or (limit.applies == "strict" and strict))

    for spec, schema in zip(specs, schemas, strict=True):
        if spec.kind == "function" and schema is not REFUSED_SCHEMA:
            found.extend(_shape_findings(dialect, cap, spec.name, schema))
        depth, props, enums = schema_stats(schema)
        for key, value, limit in (("schema_depth", depth, cap.schema_depth),
                                  ("schema_properties", props, cap.max_schema_properties),
                                  ("enum_values", enums, cap.max_enum_values)):
            if applies(limit) and value > limit.value:
                found.append(LimitFinding(dialect=dialect, tool=spec.name, limit=key, value=value, max=limit.value,
                                          source=limit.source, documented=limit.documented))
        if cap.param_name_pattern is not None and (cap.param_name_applies == "always"
                                                   or cap.param_name_applies == schema_mode):
            props_map = spec.input_schema.get("properties")
            for pname in props_map if isinstance(props_map, Mapping) else ():
                if re.fullmatch(cap.param_name_pattern, pname) is None:
                    found.append(LimitFinding(dialect=dialect, tool=spec.name, limit="parameter_name", value=pname,
                                              max=f"^{cap.param_name_pattern}$", source=cap.param_name_source))
    size = cap.max_request_bytes
    if size.value is not None and tools_payload is not None:
        n = len(json.dumps(tools_payload, ensure_ascii=False).encode("utf-8"))
        if n > size.value:
            found.append(LimitFinding(dialect=dialect, tool=None, limit="request_bytes", value=n, max=size.value,
                                      source=size.source, documented=size.documented))
    return found


def openai_parallel(choice: ToolChoice, strict: bool) -> tuple[dict[str, Any], tuple[Approximation, ...]]:
    """``parallel_tool_calls`` for OpenAI Chat and Responses.

    OpenAI does not guarantee strict schemas for parallel calls, so with ``strict`` and no explicit
    ``parallel`` it is sent as ``false`` (warning ``parallel_off_for_strict``); an explicit ``parallel=True`` is
    kept, with the warning ``parallel_with_strict``.
    """
    if strict and choice.parallel is None:
        return {"parallel_tool_calls": False}, (Approximation(
            code="parallel_off_for_strict",
            detail="strict schemas are not guaranteed for parallel calls: parallel_tool_calls set to false"),)
    if strict and choice.parallel:
        return {"parallel_tool_calls": True}, (Approximation(
            code="parallel_with_strict",
            detail="parallel_tool_calls is true with strict tools: the provider does not guarantee the schema for "
                   "parallel calls"),)
    if choice.parallel is not None:
        return {"parallel_tool_calls": choice.parallel}, ()
    return {}, ()
