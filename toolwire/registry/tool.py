"""Canonical tool declarations: name, description, input JSON Schema, effect, handler, timeout.

Three ways to declare a tool:

* ``Tool.from_function(fn, effect=...)``: the parameters of ``fn`` (plain annotations or msgspec Structs) become
  an object schema (``msgspec.json.schema``), and arguments are validated and converted with ``msgspec.convert``
  (strict: ``"12"`` is not an ``int``; unknown fields are refused). The handler is called with keyword arguments.
* ``Tool.from_schema(name, schema, handler, effect=...)``: a raw JSON Schema (Draft 2020-12 unless ``$schema``
  says otherwise), validated with jsonschema-rs, offline (a remote ``$ref`` is refused at declaration). The
  handler is called with one positional argument, the validated argument dict.
* ``Tool.from_mcp(entry, handler, effect=...)``: an MCP ``tools/list`` entry (``name``, ``description``,
  ``inputSchema``); same calling convention as ``from_schema``.
* ``Tool.custom(name, handler, effect=...)``: a free-text custom tool (OpenAI Responses ``custom`` tools): the
  model sends text, not a JSON object, optionally constrained by a grammar or regex ``format``; the handler is
  called with that text.

Writes may name an ``idempotency_key``: a callable ``(args) -> str`` whose key, scoped to the conversation,
identifies the effect, so that the same action re-planned by the model under a new call id (after a crash between
the effect and its recorded result) runs nothing and is answered from the ledger.

Every name is checked at declaration against the strictest rule all providers accept (``NAME_RULE``), so a
name that one provider would reject fails here, not when a request fails (failure mode 28 in docs/failure-modes.md).

Validation messages keep the JSON path of the offending value (``Expected `int`, got `str` - at `$.height```)
so the model can correct itself.
"""

from __future__ import annotations

import copy
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

import jsonschema_rs
import msgspec

from .errors import ToolDeclarationError, ToolNameError

__all__ = ["Tool", "Effect", "ToolKind", "IdempotencyKey", "NAME_RULE", "NAME_PATTERN", "DEFAULT_TIMEOUT",
           "check_tool_name"]

Effect = Literal["read", "write"]
ToolKind = Literal["function", "custom"]
#: ``idempotency_key(args) -> str``: the key of the effect a write call would have (``args`` is the argument
#: object as the model sent it, or the text for a custom tool)
IdempotencyKey = Callable[[Any], str]

#: The strictest tool-name rule every provider accepts: OpenAI ``^[a-zA-Z0-9_-]{1,64}$``; Anthropic allows 128
#: characters of the same set; Gemini allows 128 but the first must be a letter or an underscore.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
NAME_RULE = "^[A-Za-z_][A-Za-z0-9_-]{0,63}$ (OpenAI: 64 chars of [a-zA-Z0-9_-]; Gemini: starts with a letter or _)"

#: Seconds a handler may run before its call is answered with ``handler_timeout``.
DEFAULT_TIMEOUT = 30.0

_MAX_REPORTED_ERRORS = 3


def check_tool_name(name: object) -> str:
    """Return ``name`` if every provider accepts it; raise ``ToolNameError`` naming the tool and the rule."""
    if not isinstance(name, str):
        raise ToolNameError(f"tool name must be a string, got {type(name).__name__}", tool=None, rule=NAME_RULE)
    if NAME_PATTERN.fullmatch(name) is None:
        if len(name) > 64:
            why = f"it is {len(name)} characters long (at most 64)"
        elif not name:
            why = "it is empty"
        elif not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
            why = "it must start with a letter or an underscore"
        else:
            why = "it contains characters outside [A-Za-z0-9_-]"
        raise ToolNameError(f"tool name {name!r} is rejected by some provider: {why}; rule {NAME_RULE}",
                            tool=name, rule=NAME_RULE)
    return name


def json_path(parts: typing.Iterable[str | int]) -> str:
    """``$``-rooted JSON path in msgspec's notation: ``$.a[0].b``; keys that are not identifiers are quoted."""
    out = ["$"]
    for p in parts:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif p.isidentifier():
            out.append(f".{p}")
        else:
            out.append(f"[{p!r}]")
    return "".join(out)


class ArgumentsInvalid(Exception):
    """Internal: raised by a tool's validator; ``message`` is for the model, ``path`` for logs."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


_PATH_IN_MSGSPEC = re.compile(r" - at `(\$[^`]*)`$")


def _check_effect(name: str, effect: object) -> str:
    if effect not in ("read", "write"):
        raise ToolDeclarationError(f"tool {name!r}: effect must be 'read' or 'write', got {effect!r}",
                                   tool=name, rule="effect in {read, write}")
    return effect  # type: ignore[return-value]


def _check_timeout(name: str, timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ToolDeclarationError(f"tool {name!r}: timeout must be a positive number of seconds or None",
                                   tool=name, rule="timeout > 0")
    return float(timeout)


def _check_handler(name: str, handler: object) -> Callable[..., Any]:
    if not callable(handler):
        raise ToolDeclarationError(f"tool {name!r}: handler is not callable", tool=name, rule="callable handler")
    return handler  # type: ignore[return-value]


def _check_idempotency_key(name: str, effect: str, key: object) -> IdempotencyKey | None:
    if key is None:
        return None
    if not callable(key):
        raise ToolDeclarationError(f"tool {name!r}: idempotency_key must be a callable (args) -> str",
                                   tool=name, rule="callable idempotency_key")
    if effect != "write":
        raise ToolDeclarationError(f"tool {name!r}: idempotency_key is for writes (a read may run any number of "
                                   "times)", tool=name, rule="idempotency_key only with effect='write'")
    return key  # type: ignore[return-value]


_FORMAT_TYPES = ("text", "grammar")
_GRAMMAR_SYNTAXES = ("lark", "regex")


def _check_format(name: str, fmt: object) -> dict[str, Any] | None:
    """A Responses custom tool ``format``: ``{"type": "text"}`` or ``{"type": "grammar", "syntax": "lark" |
    "regex", "definition": str}``."""
    if fmt is None:
        return None
    rule = 'format {"type": "text"} or {"type": "grammar", "syntax": "lark"|"regex", "definition": str}'
    if not isinstance(fmt, Mapping) or fmt.get("type") not in _FORMAT_TYPES:
        raise ToolDeclarationError(f"tool {name!r}: invalid custom tool format {fmt!r}", tool=name, rule=rule)
    if fmt["type"] == "grammar":
        if fmt.get("syntax") not in _GRAMMAR_SYNTAXES or not isinstance(fmt.get("definition"), str) \
                or not fmt["definition"]:
            raise ToolDeclarationError(f"tool {name!r}: a grammar format needs syntax 'lark' or 'regex' and a "
                                       "non-empty definition", tool=name, rule=rule)
    return copy.deepcopy(dict(fmt))


def _is_async(handler: Callable[..., Any]) -> bool:
    target = getattr(handler, "__call__", None) if not inspect.isroutine(handler) else handler
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(target)


def _schema_validator(name: str, schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    """A validator for a raw JSON Schema (jsonschema-rs, offline); raises ``ToolDeclarationError`` if the schema
    itself is invalid, is not an object schema, or needs a remote ``$ref``."""
    if not isinstance(schema, Mapping):
        raise ToolDeclarationError(f"tool {name!r}: input schema must be a JSON object", tool=name,
                                   rule="schema is an object")
    if schema.get("type") != "object":
        raise ToolDeclarationError(f"tool {name!r}: input schema must have \"type\": \"object\" (tool arguments "
                                   "are a JSON object for every provider)", tool=name, rule="type: object")
    try:
        validator = jsonschema_rs.validator_for(dict(schema), offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ToolDeclarationError(f"tool {name!r}: invalid input schema: {first}", tool=name,
                                   rule="valid JSON Schema (Draft 2020-12 unless $schema says otherwise)") from None

    def validate(args: Any) -> Any:
        errors = []
        for err in validator.iter_errors(args):
            errors.append(err)
            if len(errors) > _MAX_REPORTED_ERRORS:
                break
        if not errors:
            return args
        shown = errors[:_MAX_REPORTED_ERRORS]
        parts = [f"{e.message} - at `{json_path(e.instance_path)}`" for e in shown]
        if len(errors) > _MAX_REPORTED_ERRORS:
            parts.append("(more errors not shown)")
        raise ArgumentsInvalid("; ".join(parts), json_path(shown[0].instance_path))

    return validate


# ---- from_function: parameters -> a msgspec Struct -> schema and converter ------------------------------


def _inline_refs(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    """Replace ``{"$ref": "#/$defs/X"}`` by X's schema where that terminates; recursive types keep their ref."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            key = ref[len("#/$defs/"):]
            if key in stack or key not in defs:
                kept.add(key)
                return node
            body = {k: v for k, v in defs[key].items() if k != "title"}
            return _inline_refs(body, defs, stack + (key,), kept)
        return {k: _inline_refs(v, defs, stack, kept) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs, stack, kept) for v in node]
    return node


def _struct_schema(struct: type, struct_name: str) -> dict[str, Any]:
    full = msgspec.json.schema(struct)
    defs: dict[str, Any] = dict(full.get("$defs", {}))
    root = {k: v for k, v in defs[struct_name].items() if k != "title"}
    kept: set[str] = set()
    root = _inline_refs(root, defs, (struct_name,), kept)
    # keep (transitively) the definitions still referenced, so every remaining $ref resolves against the root
    todo = list(kept)
    keep: dict[str, Any] = {}
    while todo:
        key = todo.pop()
        if key in keep or key not in defs:
            continue
        more: set[str] = set()
        keep[key] = _inline_refs(defs[key], defs, (key,), more)
        todo.extend(more - set(keep))
    if keep:
        root["$defs"] = keep
    root.setdefault("properties", {})
    return root


def _params_struct(fn: Callable[..., Any], name: str) -> type:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDeclarationError(f"tool {name!r}: cannot read the handler's signature ({exc})", tool=name,
                                   rule="inspectable signature") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ToolDeclarationError(f"tool {name!r}: cannot resolve parameter annotations ({exc})", tool=name,
                                   rule="resolvable annotations") from None
    fields: list[tuple] = []
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDeclarationError(
                f"tool {name!r}: parameter {pname!r} is {param.kind.description}; tool parameters must be "
                "nameable keyword arguments", tool=name, rule="keyword-compatible parameters")
        ann = hints.get(pname, Any)
        if param.default is inspect.Parameter.empty:
            fields.append((pname, ann))
        else:
            fields.append((pname, ann, param.default))
    try:
        struct = msgspec.defstruct(f"{name}_arguments", fields, forbid_unknown_fields=True, kw_only=True)
        msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        raise ToolDeclarationError(f"tool {name!r}: parameter types are not JSON-describable ({exc})",
                                   tool=name, rule="msgspec-supported parameter types") from None
    return struct


class Tool:
    """One declared tool. Frozen after construction.

    Attributes: ``name``, ``description``, ``input_schema`` (a JSON Schema object; do not mutate it),
    ``effect`` (``"read"`` or ``"write"``), ``handler`` (sync or async callable), ``timeout`` (seconds or None),
    ``kind`` (``"function"``, or ``"custom"`` for a free-text tool, whose ``format`` is its grammar or None),
    ``idempotency_key`` (None, or the callable naming a write's effect).

    Constructing ``Tool(...)`` directly is the same as ``Tool.from_schema``: the schema is validated with
    jsonschema-rs and the handler receives the argument dict as its single positional argument.
    """

    __slots__ = ("name", "description", "input_schema", "effect", "handler", "timeout", "is_async",
                 "kind", "format", "idempotency_key", "_validate", "_invoke")

    # the slots' types, for type checkers (``__init__`` sets them once; ``__setattr__`` refuses any change)
    name: str
    description: str
    input_schema: Mapping[str, Any]
    effect: Effect
    handler: Callable[..., Any]
    timeout: float | None
    is_async: bool
    kind: ToolKind
    format: Mapping[str, Any] | None
    idempotency_key: IdempotencyKey | None
    _validate: Callable[[Any], Any]
    _invoke: Callable[[Callable[..., Any], Any], Any]

    def __init__(self, name: str, description: str, input_schema: Mapping[str, Any], effect: Effect,
                 handler: Callable[..., Any], timeout: float | None = DEFAULT_TIMEOUT, *,
                 idempotency_key: IdempotencyKey | None = None,
                 _validate: Callable[[Any], Any] | None = None,
                 _invoke: Callable[[Callable[..., Any], Any], Any] | None = None,
                 _kind: ToolKind = "function", _format: Mapping[str, Any] | None = None) -> None:
        check_tool_name(name)
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "description", "" if description is None else str(description))
        set_(self, "effect", _check_effect(name, effect))
        set_(self, "handler", _check_handler(name, handler))
        set_(self, "timeout", _check_timeout(name, timeout))
        set_(self, "is_async", _is_async(handler))
        set_(self, "kind", _kind)
        set_(self, "format", _check_format(name, _format) if _kind == "custom" else None)
        set_(self, "idempotency_key", _check_idempotency_key(name, effect, idempotency_key))
        if _validate is None:
            schema = copy.deepcopy(dict(input_schema)) if isinstance(input_schema, Mapping) else input_schema
            _validate = _schema_validator(name, schema)
        else:
            schema = input_schema
        set_(self, "input_schema", schema)
        set_(self, "_validate", _validate)
        set_(self, "_invoke", _invoke if _invoke is not None else (lambda h, args: h(args)))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Tool is frozen: cannot set {key!r}")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Tool is frozen: cannot delete {key!r}")

    def __repr__(self) -> str:
        kind = ", kind='custom'" if self.kind == "custom" else ""
        return f"Tool(name={self.name!r}, effect={self.effect!r}, timeout={self.timeout!r}{kind})"

    # ---- constructors -----------------------------------------------------------------------------------
    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, effect: Effect, name: str | None = None,
                      description: str | None = None, timeout: float | None = DEFAULT_TIMEOUT,
                      idempotency_key: IdempotencyKey | None = None) -> "Tool":
        """Declare ``fn`` as a tool: its parameters make the schema, its docstring the description.

        Parameters may be annotated with anything msgspec can convert (``str``, ``int``, ``Literal``,
        ``Annotated[..., msgspec.Meta(...)]``, msgspec Structs, lists, dicts …); unannotated ones accept any
        JSON value. ``*args``, ``**kwargs`` and positional-only parameters are refused. Validation is strict
        (no ``"12"`` → ``12``) and unknown argument names are refused. ``idempotency_key`` (writes only): see
        the module docstring.
        """
        tool_name = name if name is not None else getattr(fn, "__name__", None)
        check_tool_name(tool_name)
        struct = _params_struct(fn, tool_name)
        schema = _struct_schema(struct, struct.__name__)
        fields = struct.__struct_fields__

        def validate(args: Any) -> Any:
            try:
                return msgspec.convert(args, struct)
            except msgspec.ValidationError as exc:
                text = str(exc)
                m = _PATH_IN_MSGSPEC.search(text)
                if m is None:
                    text = f"{text} - at `$`"
                raise ArgumentsInvalid(text, m.group(1) if m else "$") from None

        def invoke(handler: Callable[..., Any], value: Any) -> Any:
            return handler(**{f: getattr(value, f) for f in fields})

        doc = description if description is not None else (inspect.getdoc(fn) or "")
        return cls(tool_name, doc, schema, effect, fn, timeout, idempotency_key=idempotency_key,
                   _validate=validate, _invoke=invoke)

    @classmethod
    def from_schema(cls, name: str, schema: Mapping[str, Any], handler: Callable[..., Any], *, effect: Effect,
                    description: str = "", timeout: float | None = DEFAULT_TIMEOUT,
                    idempotency_key: IdempotencyKey | None = None) -> "Tool":
        """Declare a tool from a raw JSON Schema; ``handler(args_dict)`` is called with validated arguments."""
        return cls(name, description, schema, effect, handler, timeout, idempotency_key=idempotency_key)

    @classmethod
    def custom(cls, name: str, handler: Callable[..., Any], *, effect: Effect, description: str = "",
               format: Mapping[str, Any] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
               idempotency_key: IdempotencyKey | None = None) -> "Tool":
        """Declare a free-text custom tool: the model sends text (constrained by ``format`` where given: a
        Responses grammar or regex definition) and ``handler(text)`` is called with it.

        Only OpenAI dialects can declare custom tools; ``declare`` refuses them for the others.
        """
        def validate(text: Any) -> Any:
            if not isinstance(text, str):
                raise ArgumentsInvalid(f"{name} is a custom tool: its input is text, not "
                                       f"{'a JSON object' if isinstance(text, dict) else type(text).__name__}"
                                       " - at `$`", "$")
            return text

        schema = {"type": "string"}
        return cls(name, description, schema, effect, handler, timeout, idempotency_key=idempotency_key,
                   _validate=validate, _invoke=lambda h, text: h(text), _kind="custom", _format=format)

    @classmethod
    def from_mcp(cls, entry: Mapping[str, Any], handler: Callable[..., Any], *, effect: Effect,
                 timeout: float | None = DEFAULT_TIMEOUT, idempotency_key: IdempotencyKey | None = None) -> "Tool":
        """Declare a tool from an MCP ``tools/list`` entry (``name``, ``description``, ``inputSchema``).

        ``entry`` may be a dict or an object with those attributes (the MCP SDK's ``Tool``). The MCP
        ``annotations`` are not trusted for the effect: it is given explicitly.
        """
        def get(key: str) -> Any:
            if isinstance(entry, Mapping):
                return entry.get(key)
            return getattr(entry, key, None)

        name = get("name")
        schema = get("inputSchema")
        if schema is None:
            schema = get("input_schema")
        if schema is None:
            raise ToolDeclarationError(f"MCP tool {name!r} has no inputSchema", tool=name, rule="inputSchema")
        return cls(name, get("description") or "", schema, effect, handler, timeout,
                   idempotency_key=idempotency_key)

    # ---- used by the dispatcher ---------------------------------------------------------------------------
    def validate(self, args: Any) -> Any:
        """Validate ``args``; return the value the handler is invoked with. Raises ``ArgumentsInvalid``."""
        return self._validate(args)

    def invoke(self, value: Any) -> Any:
        """Call the handler with a value returned by ``validate`` (the result may be awaitable)."""
        return self._invoke(self.handler, value)
