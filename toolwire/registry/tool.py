"""Canonical tool declarations: name, description, input JSON Schema, effect, handler, timeout.

Three ways to declare a tool:

* ``Tool.from_function(fn, effect=...)`` (or the decorator ``@toolwire.tool(effect=...)``): the parameters of
  ``fn`` become an object schema and the handler is called with keyword arguments. ``schema_parameters`` reads
  the signature. Plain annotations, msgspec Structs, dataclasses and TypedDicts go through msgspec
  (``msgspec.json.schema``; ``msgspec.convert``, strict: ``"12"`` is not an ``int``; unknown fields are
  refused); a handler that uses pydantic types is described and validated by pydantic (``_pydantic``). The
  docstring (Google, NumPy or Sphinx style, ``_docstrings``) gives the description and parameter descriptions.
* ``Tool.from_schema(name, schema, handler, effect=...)``: a raw JSON Schema (Draft 2020-12 unless ``$schema``
  says otherwise), validated with jsonschema-rs, offline (a remote ``$ref`` is refused at declaration). The
  handler is called with one positional argument, the validated argument dict; a handler that cannot be, or
  that is written for keyword arguments (``def search(query: str)``), is refused (``HandlerSignatureError``).
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
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

import jsonschema_rs
import msgspec

from ._docstrings import describe_properties, read_docstring
from ._rich import as_content, text_form
from ._pydantic import is_pydantic_field, pydantic_arguments, uses_pydantic
from .content import ToolError
from .context import context_parameter
from .errors import HandlerSignatureError, ToolDeclarationError, ToolNameError
from .formats import format_check

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
    """``$``-rooted JSON path in msgspec's notation: ``$.a[0].b``; keys that are not identifiers are quoted as JSON
    strings (``$.d["k k"]``)."""
    out = ["$"]
    for p in parts:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif p.isidentifier():
            out.append(f".{p}")
        else:
            out.append(f"[{json.dumps(p, ensure_ascii=False)}]")
    return "".join(out)


class ArgumentsInvalid(Exception):
    """Internal: raised by a tool's validator; ``message`` is for the model, ``path`` for logs."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def arguments_error(errors: typing.Sequence[tuple[str, typing.Iterable[str | int]]]) -> ArgumentsInvalid:
    """One ``ArgumentsInvalid`` for a validator's errors (``(message, path parts)``, at least one): the first
    ``_MAX_REPORTED_ERRORS`` as ``message - at `$.path```, joined; its ``path`` is the first error's."""
    shown = [(message, json_path(parts)) for message, parts in errors[:_MAX_REPORTED_ERRORS]]
    text = "; ".join(f"{message} - at `{path}`" for message, path in shown)
    if len(errors) > _MAX_REPORTED_ERRORS:
        text += "; (more errors not shown)"
    return ArgumentsInvalid(text, shown[0][1])


_PATH_IN_MSGSPEC = re.compile(r" - at `(\$[^`]*)`$")
#: msgspec's form for an invalid object key: ``Expected `int`, got `str` - at `key` in `$.d```
_KEY_IN_MSGSPEC = re.compile(r" - at `key` in `(\$[^`]*)`$")


def _msgspec_error(text: str) -> ArgumentsInvalid:
    """``ArgumentsInvalid`` for a ``msgspec.ValidationError`` message, its path a ``$``-rooted JSON path."""
    m = _KEY_IN_MSGSPEC.search(text)
    if m is not None:
        text = f"{text[:m.start()]} (an object key) - at `{m.group(1)}`"
        return ArgumentsInvalid(text, m.group(1))
    m = _PATH_IN_MSGSPEC.search(text)
    if m is None:
        return ArgumentsInvalid(f"{text} - at `$`", "$")
    return ArgumentsInvalid(text, m.group(1))


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


def _accepts_dict(annotation: Any) -> bool:
    """False only when ``annotation`` certainly refuses a dict (``str``, ``int``, a model class, ``list[str]``);
    anything it cannot judge (no annotation, ``Any``, an unresolved string, a protocol) counts as accepting."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    if isinstance(annotation, (str, typing.ForwardRef, typing.TypeVar)):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _accepts_dict(annotation.__origin__)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts_dict(arg) for arg in typing.get_args(annotation))
    if origin is Literal:
        return False
    if hasattr(annotation, "__supertype__"):  # typing.NewType
        return _accepts_dict(annotation.__supertype__)
    target = origin if origin is not None else annotation
    if not isinstance(target, type) or typing.is_typeddict(target):
        return True
    try:
        return issubclass(dict, target)
    except TypeError:  # a protocol that is not runtime-checkable
        return True


def _check_dict_handler(name: str, handler: Callable[..., Any], schema: Mapping[str, Any]) -> None:
    """Refuse a handler that cannot be called the ``from_schema`` way, ``handler(args_dict)``, or that is written
    to take the arguments one by one (its parameter named like a property and unannotated or annotated ``Any``,
    or annotated with a type a dict is not): called with the whole dict, it would run with the wrong value and
    answer "ok"."""
    try:
        sig = inspect.signature(handler)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        sig = inspect.signature(handler, eval_str=True)
    except Exception:  # noqa: BLE001 - annotations that do not evaluate stay strings, judged as unknown
        pass
    label = f"{getattr(handler, '__name__', type(handler).__name__)}{sig}"
    advice = ("Take the arguments as one dict (def handler(args: dict)), or declare the tool with "
              "Tool.from_function(handler, effect=...) or @toolwire.tool(effect=...) to receive them as keyword "
              "arguments.")
    passed = context_parameter(handler, name)  # a ToolContext parameter is the dispatcher's to fill
    try:
        sig.bind(object(), **({passed: None} if passed else {}))
    except TypeError as exc:
        raise HandlerSignatureError(
            f"tool {name!r}: its handler is called with one positional argument, the argument dict, but "
            f"{label} cannot be called that way ({exc}). {advice}", tool=name, rule="handler(args: dict)") from None
    first = next(iter(sig.parameters.values()))
    if first.kind is first.VAR_POSITIONAL:
        return
    properties = schema.get("properties")
    named_like_a_property = isinstance(properties, Mapping) and first.name in properties
    if not _accepts_dict(first.annotation):
        shown = inspect.formatannotation(first.annotation, getattr(handler, "__module__", None))
        why = f"it is annotated {shown}, which a dict is not"
    elif named_like_a_property and (first.annotation is inspect.Parameter.empty or first.annotation is Any
                                   or first.annotation in ("Any", "typing.Any")):
        why = (f"it is named like the schema property {first.name!r}: the handler looks written for keyword "
               "arguments (annotate the parameter `dict` if it does take the whole argument dict)")
    else:
        return
    raise HandlerSignatureError(
        f"tool {name!r}: its handler {label} would get the whole argument dict as {first.name!r}, but {why}. "
        f"{advice}", tool=name, rule="handler(args: dict)")


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
        raise arguments_error([(e.message, e.instance_path) for e in errors])

    return validate


# ---- from_function: the signature -> a schema, a validator and the handler's keyword arguments ------------------

_DEFS = "#/$defs/"
#: keywords that only annotate a schema: beside a ``$ref`` they may replace the target's own
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "deprecated", "readOnly", "writeOnly",
                          "$comment"})


def _inline_refs(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    """Replace ``{"$ref": "#/$defs/X", ...annotations}`` by X's schema (the annotations beside the reference win)
    where that terminates; recursive types keep their ref (their names are added to ``kept``)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            key = ref[len(_DEFS):]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if key not in stack and key in defs:
                body = {k: v for k, v in defs[key].items() if k != "title"}
                if not (set(siblings) - _ANNOTATIONS) & set(body):
                    inlined = _inline_refs(body, defs, stack + (key,), kept)
                    return {**inlined, **_inline_refs(siblings, defs, stack, kept)}
            kept.add(key)
            return {"$ref": ref, **_inline_refs(siblings, defs, stack, kept)}
        return {k: _inline_refs(v, defs, stack, kept) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs, stack, kept) for v in node]
    return node


def _self_contained(full: Mapping[str, Any], descriptions: Mapping[str, str]) -> dict[str, Any]:
    """The object schema a generator (msgspec, pydantic) produced, with its ``$defs`` inlined and no titles; a
    recursive definition stays in the root's ``$defs`` (with every definition it needs), so every remaining
    ``$ref`` resolves against the root and each dialect's declaration accepts it (Gemini's OpenAPI mode, which
    has no references, refuses only those).

    ``descriptions`` (from the docstring) describe the top-level properties that have no description of their
    own, before inlining: a type's own docstring loses to them, a description declared on the parameter wins."""
    defs: dict[str, Any] = dict(full.get("$defs", {}))
    root = {k: v for k, v in full.items() if k not in ("$defs", "title")}
    stack: tuple[str, ...] = ()
    ref = root.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS) and len(root) == 1:  # msgspec: the root is a definition
        key = ref[len(_DEFS):]
        root, stack = {k: v for k, v in defs[key].items() if k != "title"}, (key,)
    describe_properties(root, descriptions)
    kept: set[str] = set()
    root = typing.cast(dict[str, Any], _inline_refs(root, defs, stack, kept))
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
    _drop_dangling_mappings(root, set(keep))
    root.setdefault("properties", {})
    return root


def _drop_dangling_mappings(node: Any, kept: set[str]) -> None:
    """Remove a ``discriminator``'s ``mapping`` (pydantic's discriminated unions) that names definitions that were
    inlined: its ``#/$defs/...`` pointers would dangle. The ``propertyName`` and the branches stay, and each
    branch's ``const``/``enum`` still says which one applies. OpenAI strict mode accepts neither ``discriminator`` nor
    ``oneOf``: ``strict_schema`` refuses such a schema (``StrictSchemaError``); declare a discriminated union
    without strict mode, or as a plain ``Union`` (``anyOf``)."""
    if isinstance(node, dict):
        disc = node.get("discriminator")
        if isinstance(disc, dict) and isinstance(disc.get("mapping"), dict):
            targets = disc["mapping"].values()
            if not all(isinstance(t, str) and t.startswith(_DEFS) and t[len(_DEFS):] in kept for t in targets):
                node["discriminator"] = {k: v for k, v in disc.items() if k != "mapping"}
        for v in node.values():
            _drop_dangling_mappings(v, kept)
    elif isinstance(node, list):
        for v in node:
            _drop_dangling_mappings(v, kept)


class SchemaParameter(typing.NamedTuple):
    """A handler parameter that is a property of the tool's input schema: its ``name``, its resolved
    ``annotation`` (``Any`` when it has none) and its ``default`` (``inspect.Parameter.empty`` when required)."""

    name: str
    annotation: Any
    default: Any


def _underlying(fn: Callable[..., Any]) -> tuple[Any, frozenset[str]]:
    """The function whose annotations describe ``fn`` (the wrapped function of a ``functools.partial``, the
    ``__call__`` of a callable object) and the names a partial binds by keyword (not the model's to give)."""
    bound: set[str] = set()
    target: Any = fn
    while isinstance(target, functools.partial):
        bound.update(target.keywords)
        target = target.func
    if not (inspect.isroutine(target) or inspect.isclass(target)) and callable(target):
        target = type(target).__call__
    return target, frozenset(bound)


def schema_parameters(fn: Callable[..., Any], name: str) -> list[SchemaParameter]:
    """The signature → schema step of ``from_function``: the parameters of ``fn`` that become the properties of
    the tool's input schema, in order, with their resolved annotations.

    ``fn`` may be a function, a bound method, a ``functools.partial`` (parameters it binds by keyword are not
    the model's to give and are left out) or a callable object (its ``__call__``). Raises
    ``ToolDeclarationError`` for a signature that cannot be read, annotations that cannot be resolved,
    ``*args``, ``**kwargs`` or positional-only parameters (tool arguments are named), and a plain function whose
    first parameter is ``self`` or ``cls`` (a method decorated in its class body: the model would supply it).
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDeclarationError(f"tool {name!r}: cannot read the handler's signature ({exc})", tool=name,
                                   rule="inspectable signature") from None
    target, bound = _underlying(fn)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ToolDeclarationError(f"tool {name!r}: cannot resolve parameter annotations ({exc})", tool=name,
                                   rule="resolvable annotations") from None
    first = next(iter(sig.parameters), None)
    if inspect.isfunction(fn) and first in ("self", "cls"):
        raise ToolDeclarationError(
            f"tool {name!r}: its first parameter is {first!r}: this is a method declared in its class body, where "
            f"it is not bound, so the model would have to supply {first!r}. Declare the bound method instead, "
            f"e.g. toolwire.tool(obj.{getattr(fn, '__name__', 'method')}, effect=...) or "
            "Tool.from_function(obj.method, effect=...) once the object exists",
            tool=name, rule="no self/cls parameter")
    params: list[SchemaParameter] = []
    passed = context_parameter(fn, name)  # the dispatcher passes a ToolContext there: never in the schema
    for pname, param in sig.parameters.items():
        if pname in bound or pname == passed:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDeclarationError(
                f"tool {name!r}: parameter {pname!r} is {param.kind.description}; tool parameters must be "
                "nameable keyword arguments", tool=name, rule="keyword-compatible parameters")
        params.append(SchemaParameter(pname, hints.get(pname, Any), param.default))
    return params


def _msgspec_arguments(params: list[SchemaParameter], name: str
                       ) -> tuple[dict[str, Any], Callable[[Any], Any], Callable[[Any], dict[str, Any]]]:
    """``(schema, validate, keywords)`` from a msgspec Struct of the parameters: the schema from
    ``msgspec.json.schema``, validation with ``msgspec.convert`` (strict, unknown fields refused)."""
    fields: list[tuple[Any, ...]] = [(p.name, p.annotation) if p.default is inspect.Parameter.empty
                           else (p.name, p.annotation, p.default) for p in params]
    try:
        struct = msgspec.defstruct(f"{name}_arguments", fields, forbid_unknown_fields=True, kw_only=True)
        schema = msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        raise ToolDeclarationError(f"tool {name!r}: parameter types are not JSON-describable ({exc})",
                                   tool=name, rule="msgspec-supported parameter types") from None
    names = struct.__struct_fields__

    def validate(args: Any) -> Any:
        try:
            # str_keys: JSON object keys are strings; ``dict[int, str]`` is published as an object, so "1" is 1
            return msgspec.convert(args, struct, str_keys=True)
        except msgspec.ValidationError as exc:
            raise _msgspec_error(str(exc)) from None

    def keywords(value: Any) -> dict[str, Any]:
        return {f: getattr(value, f) for f in names}

    return schema, validate, keywords


def _validator_error(exc: Exception) -> ArgumentsInvalid:
    """``ArgumentsInvalid`` for an exception user code raised while the arguments were converted (the path is not
    known: ``$``): its text, or for a ``ToolError`` the text of its content (the answer meant for the model); only
    its type when it cannot be printed."""
    try:
        detail = _tool_error_text(exc) if isinstance(exc, ToolError) else str(exc)
    except Exception:  # noqa: BLE001 - user code's exception: the call is answered all the same
        detail = ""
    shown = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return ArgumentsInvalid(f"validating the arguments raised {shown} - at `$`", "$")


def _tool_error_text(exc: ToolError) -> str:
    """The text of what a ``ToolError`` answers: a string as it is, ``Content`` (or parts) in their text form,
    anything else as JSON."""
    content = getattr(exc, "content", None)
    if isinstance(content, str):
        return content
    rich = as_content(content)
    if rich is not None:
        return text_form(rich.parts) or (json.dumps(rich.structured) if rich.structured is not None else "")
    return msgspec.json.encode(content).decode("utf-8") if content is not None else str(exc)


def _documented(fn: Callable[..., Any]) -> Any:
    """What documents ``fn``: the wrapped function of a partial; a callable object's class, else its
    ``__call__``."""
    target, _ = _underlying(fn)
    if target is not fn and not isinstance(fn, functools.partial) and type(fn).__doc__:
        return type(fn)
    return target


def _call_with_dict(handler: Callable[..., Any], args: Any) -> Any:
    return handler(args)


class Tool:
    """One declared tool. Frozen after construction.

    Attributes: ``name``, ``description``, ``input_schema`` (a JSON Schema object; do not mutate it),
    ``effect`` (``"read"`` or ``"write"``), ``handler`` (sync or async callable), ``timeout`` (seconds or None),
    ``kind`` (``"function"``, or ``"custom"`` for a free-text tool, whose ``format`` is its grammar or None),
    ``idempotency_key`` (None, or the callable naming a write's effect).

    Constructing ``Tool(...)`` directly is the same as ``Tool.from_schema``: the schema is validated with
    jsonschema-rs and the handler receives the argument dict as its single positional argument (a handler that
    cannot is refused with ``HandlerSignatureError``).
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
        if _invoke is None:  # the from_schema convention: handler(args_dict)
            _check_dict_handler(name, handler, schema)
            _invoke = _call_with_dict
        set_(self, "input_schema", schema)
        set_(self, "_validate", _validate)
        set_(self, "_invoke", _invoke)

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
        ``Annotated[..., msgspec.Meta(...)]``, msgspec Structs, dataclasses, TypedDicts, lists, dicts …);
        unannotated ones accept any JSON value. A handler that uses pydantic types (models, pydantic dataclasses,
        ``Annotated[..., pydantic.Field(...)]``) is described and validated by pydantic instead; one whose only
        parameter is a required pydantic model takes the model's fields as its arguments and receives the model
        instance. ``*args``, ``**kwargs`` and positional-only parameters are refused, and so is a method taken
        from its class body (first parameter ``self``/``cls``: declare the bound method ``obj.method``).
        ``functools.partial`` objects and callable objects are accepted with ``name=`` (parameters a partial binds
        by keyword are not arguments). Validation is strict (no
        ``"12"`` → ``12``) and unknown argument names are refused.

        The docstring (Google, NumPy or Sphinx style) gives the tool's description (its summary: the short and
        long description) and each documented parameter's ``description``, unless the type declares one
        (``msgspec.Meta(description=...)``, ``pydantic.Field(description=...)``). ``description`` replaces the
        summary. ``idempotency_key`` (writes only): see the module docstring.
        """
        if name is None and not isinstance(getattr(fn, "__name__", None), str):
            raise ToolDeclarationError(
                f"{fn!r} has no __name__ to name the tool after (a functools.partial or a callable object): pass "
                "name=..., as in Tool.from_function(fn, effect=..., name=\"lookup\")", tool=None, rule="tool name")
        tool_name = check_tool_name(name if name is not None else fn.__name__)
        params = schema_parameters(fn, tool_name)
        model_doc = ""
        if any(uses_pydantic(p.annotation) or is_pydantic_field(p.default) for p in params):
            generated, validate, keywords, model_doc = pydantic_arguments(params, tool_name)
        else:
            generated, validate, keywords = _msgspec_arguments(params, tool_name)
        doc = read_docstring(_documented(fn))
        schema = _self_contained(generated, doc.params)
        if model_doc and schema.get("description") == model_doc:
            del schema["description"]  # a single model's docstring: the tool's description, not the schema's

        def invoke(handler: Callable[..., Any], value: Any) -> Any:
            return handler(**keywords(value))

        summary = description if description is not None else (doc.summary or model_doc)
        return cls(tool_name, summary, schema, effect, fn, timeout, idempotency_key=idempotency_key,
                   _validate=validate, _invoke=invoke)

    @classmethod
    def from_schema(cls, name: str, schema: Mapping[str, Any], handler: Callable[..., Any], *, effect: Effect,
                    description: str = "", timeout: float | None = DEFAULT_TIMEOUT,
                    idempotency_key: IdempotencyKey | None = None) -> "Tool":
        """Declare a tool from a raw JSON Schema; ``handler(args_dict)`` is called with validated arguments.

        Raises ``HandlerSignatureError`` for a handler that cannot be called with that one positional argument or
        that is written for keyword arguments (``def search(query: str)``: use ``from_function``)."""
        return cls(name, description, schema, effect, handler, timeout, idempotency_key=idempotency_key)

    @classmethod
    def custom(cls, name: str, handler: Callable[..., Any], *, effect: Effect, description: str = "",
               format: Mapping[str, Any] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
               idempotency_key: IdempotencyKey | None = None, check_format: bool = True) -> "Tool":
        """Declare a free-text custom tool: the model sends text (constrained by ``format`` where given: a
        Responses grammar or regex definition) and ``handler(text)`` is called with it.

        A grammar ``format`` is also checked here, on the text that arrives, before the handler runs: the whole
        text must match the regex or derive from the grammar's ``start`` rule, as the provider applies it (see
        ``toolwire.registry.formats``); text outside it is answered ``invalid_arguments``. The check needs the
        ``grammar`` extra (``pip install 'toolwire[grammar]'``); without it, or with a definition the provider's
        engine cannot compile, declaring the tool raises ``ToolDeclarationError``. ``check_format=False`` turns
        the check off (the format is still declared to the provider; the handler gets any text).

        Only OpenAI dialects can declare custom tools; ``declare`` refuses them for the others.
        """
        if not isinstance(check_format, bool):
            raise ToolDeclarationError(f"tool {name!r}: check_format must be True or False, not {check_format!r}",
                                       tool=name, rule="check_format is a bool")
        checked = format_check(check_tool_name(name), _check_format(name, format), check_format)

        def validate(text: Any) -> Any:
            if not isinstance(text, str):
                raise ArgumentsInvalid(f"{name} is a custom tool: its input is text, not "
                                       f"{'a JSON object' if isinstance(text, dict) else type(text).__name__}"
                                       " - at `$`", "$")
            problem = checked.problem(text) if checked is not None else None
            if problem is not None:
                raise ArgumentsInvalid(f"{problem} - at `$`", "$")
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
        """Validate ``args``; return the value the handler is invoked with. Raises ``ArgumentsInvalid``.

        Converting the arguments runs user code (pydantic validators, a dataclass ``__post_init__``, a Struct's
        ``__post_init__``); whatever it raises is an ``ArgumentsInvalid`` naming the exception type, so the call
        is answered ``invalid_arguments`` like any other invalid argument."""
        try:
            return self._validate(args)
        except ArgumentsInvalid:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: the call is answered, the turn goes on
            raise _validator_error(exc) from None

    def invoke(self, value: Any) -> Any:
        """Call the handler with a value returned by ``validate`` (the result may be awaitable)."""
        return self._invoke(self.handler, value)
