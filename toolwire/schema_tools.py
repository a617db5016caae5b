"""Schema transforms for declarations: OpenAI strict mode and Gemini's OpenAPI 3.0 subset.

A tool's input schema is JSON Schema (Draft 2020-12). Two providers want something else:

* **OpenAI strict mode** (``strict: true``) accepts a subset: every object closed with
  ``additionalProperties: false``, every property listed in ``required``, an optional property written as a
  union with ``null``. ``strict_schema`` rewrites a schema into that form, or raises ``StrictSchemaError``
  naming the construct strict mode cannot express (``patternProperties``, an open ``additionalProperties`` map,
  ``oneOf``, ``allOf``, ``not``, a schema without a type, …). Keywords strict mode does not accept but that only
  narrow values (``minLength``, ``uniqueItems``, …) or only annotate (``default``, ``examples``) are dropped and
  reported: toolwire still validates arguments against the original schema before a handler runs.
  ``from_strict_arguments`` undoes the optional-as-null encoding on arguments that come back.

* **Gemini's ``parameters``** is an OpenAPI 3.0 ``Schema``: no ``$ref`` (references are inlined; a
  recursive one is refused), nullability as ``nullable: true`` (``anyOf [X, null]`` and ``type: [X, "null"]``
  map onto it), ``type`` in upper case, string-only ``enum``, no ``oneOf``/``allOf``/``not``/``const``/
  ``additionalProperties``. ``gemini_schema`` converts and returns every loss. Every loss it reports widens
  the set of accepted values (a dropped constraint), except where a missing ``type`` had to be assumed; no
  loss is ever silent.

* Google documents that its JSON-Schema fields (Gemini's and Interactions' JSON Schema parameters) ignore some
  keywords: ``ignored_keywords`` reports them.

Which transform a dialect applies, and where the result goes in its declaration, is its declarations part's
business (``toolwire.codecs.declare``); the transforms here know schemas, not requests.

Paths in ``Loss`` and in errors are ``$``-rooted paths into the *original* schema (``$.properties.tags.items``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from .registry.errors import ToolDeclarationError

__all__ = [
    "Loss",
    "Conversion",
    "StrictSchemaError",
    "SchemaConversionError",
    "strict_schema",
    "from_strict_arguments",
    "gemini_schema",
    "ignored_keywords",
    "accepts_null",
    "schema_stats",
    "STRICT_FORMATS",
    "GOOGLE_IGNORED_KEYWORDS",
]


class Loss(msgspec.Struct, frozen=True, kw_only=True):
    """One thing a transform dropped or approximated: where (``path``), which ``keyword``, and why (``detail``).

    ``tool`` is filled in by the declaration that asked for the transform.
    """

    path: str
    keyword: str
    detail: str
    tool: str | None = None


class Conversion(msgspec.Struct, frozen=True, kw_only=True):
    """A transformed schema and the losses of the transform (empty when it is exact)."""

    schema: dict[str, Any]
    losses: tuple[Loss, ...] = ()


class _SchemaRefusal(ToolDeclarationError):
    """A schema a transform cannot express, in ``dialect``, at ``path``.

    ``declare`` transforms every tool before it raises, so the error it raises tells about the whole tool set:
    ``errors`` holds every refusal of the declaration (one per tool, this one first; ``(self,)`` when raised by a
    transform alone) and ``findings`` the limits the rest of the declaration breaks (``LimitFinding``s).
    """

    def __init__(self, message: str, *, tool: str | None, dialect: str | None, path: str, rule: str) -> None:
        super().__init__(message, tool=tool, rule=rule)
        self.dialect = dialect
        self.path = path
        self.errors: tuple[_SchemaRefusal, ...] = (self,)
        self.findings: tuple[Any, ...] = ()


class StrictSchemaError(_SchemaRefusal):
    """OpenAI strict mode cannot express a schema.

    Attributes: ``tool``, ``dialect``, ``path`` (``$``-rooted, into the original schema), ``construct`` (the
    keyword or construct, e.g. ``patternProperties``), ``rule`` (``"strict mode subset"``), and from ``declare``
    ``errors`` (every tool's refusal) and ``findings`` (the limits the other tools break).
    """

    def __init__(self, message: str, *, tool: str | None = None, dialect: str | None = None, path: str = "$",
                 construct: str) -> None:
        super().__init__(message, tool=tool, dialect=dialect, path=path, rule="strict mode subset")
        self.construct = construct


class SchemaConversionError(_SchemaRefusal):
    """A schema cannot be converted to Gemini's OpenAPI subset at all (a recursive ``$ref``, ``false``).

    Attributes: ``tool``, ``dialect``, ``path``, ``keyword``, ``rule`` (``"OpenAPI 3.0 subset"``), and from
    ``declare`` ``errors`` and ``findings`` as for ``StrictSchemaError``.
    """

    def __init__(self, message: str, *, tool: str | None = None, dialect: str | None = None, path: str = "$",
                 keyword: str) -> None:
        super().__init__(message, tool=tool, dialect=dialect, path=path, rule="OpenAPI 3.0 subset")
        self.keyword = keyword


# ---- shared helpers ----------------------------------------------------------------------------------------

_MISSING = object()
_ANNOTATIONS = ("description", "title")
_SILENT = frozenset({"$schema", "$id", "$comment", "$anchor"})


def _path(parts: Iterable[str | int]) -> str:
    out = ["$"]
    for p in parts:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif p.isidentifier():
            out.append(f".{p}")
        else:
            out.append(f"[{p!r}]")
    return "".join(out)


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    """Resolve a local ``#/...`` JSON pointer against ``root``; KeyError when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise KeyError(ref)
    node: Any = root
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(key)]
        elif isinstance(node, Mapping):
            node = node[key]
        else:
            raise KeyError(ref)
    return node


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def accepts_null(schema: Any, root: Mapping[str, Any] | None = None, _seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``schema`` accepts JSON ``null`` (a conservative reading: unknown constructs say True).

    ``root`` resolves local ``$ref``s (defaults to ``schema`` itself).
    """
    if root is None:
        root = schema if isinstance(schema, Mapping) else {}
    if schema is True:
        return True
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in _seen:
            return False
        try:
            target = _resolve(root, ref)
        except (KeyError, IndexError, ValueError):
            return True
        if not accepts_null(target, root, _seen | {ref}):
            return False
    if "enum" in schema and None not in schema["enum"]:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    typ = schema.get("type")
    if isinstance(typ, str) and typ != "null":
        return False
    if isinstance(typ, list) and "null" not in typ:
        return False
    if "anyOf" in schema and not any(accepts_null(b, root, _seen) for b in schema["anyOf"]):
        return False
    if "oneOf" in schema and not any(accepts_null(b, root, _seen) for b in schema["oneOf"]):
        return False
    if "allOf" in schema and not all(accepts_null(b, root, _seen) for b in schema["allOf"]):
        return False
    return True


# ---- OpenAI strict mode ------------------------------------------------------------------------------------

#: string formats strict mode accepts (OpenAI Structured Outputs, "supported properties")
STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_STRICT_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_STRICT_SCALARS = frozenset({"string", "number", "integer", "boolean"})
_STRICT_KEEP = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs",
    "definitions", "description", "title", "pattern", "format", "multipleOf", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
})
_STRICT_DROP_CONSTRAINT = frozenset({
    "minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties", "contains", "minContains",
    "maxContains",
})
_STRICT_DROP_ANNOTATION = frozenset({
    "default", "examples", "example", "readOnly", "writeOnly", "deprecated", "contentEncoding", "contentMediaType",
    "contentSchema",
})
_STRICT_REFUSE = {
    "patternProperties": "properties matched by a pattern (an open map)",
    "propertyNames": "a rule on property names (an open map)",
    "unevaluatedProperties": "unevaluatedProperties",
    "unevaluatedItems": "unevaluatedItems",
    "dependentRequired": "dependentRequired (documented as unsupported)",
    "dependentSchemas": "dependentSchemas (documented as unsupported)",
    "dependencies": "dependencies",
    "if": "if/then/else (documented as unsupported)",
    "then": "if/then/else (documented as unsupported)",
    "else": "if/then/else (documented as unsupported)",
    "not": "not (documented as unsupported)",
    "allOf": "allOf with more than one schema (documented as unsupported)",
    "oneOf": "oneOf (only anyOf is supported)",
    "prefixItems": "prefixItems (tuples)",
    "$dynamicRef": "$dynamicRef",
    "$recursiveRef": "$recursiveRef",
}


class _StrictCtx:
    def __init__(self, root: Mapping[str, Any], tool: str | None, dialect: str | None) -> None:
        self.root = root
        self.tool = tool
        self.dialect = dialect
        self.losses: list[Loss] = []

    def refuse(self, parts: tuple, construct: str, why: str) -> StrictSchemaError:
        path = _path(parts)
        who = f"tool {self.tool!r}: " if self.tool else ""
        return StrictSchemaError(f"{who}strict mode cannot express {why} at {path}", tool=self.tool,
                                 dialect=self.dialect, path=path, construct=construct)

    def lose(self, parts: tuple, keyword: str, detail: str) -> None:
        self.losses.append(Loss(path=_path(parts), keyword=keyword, detail=detail, tool=self.tool))


def _merge_exact(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any] | str:
    """Both schemas as one, when no keyword conflicts; otherwise the first conflicting keyword."""
    out = dict(first)
    for key, value in second.items():
        if key not in out or out[key] == value:
            out[key] = value
        elif key in _ANNOTATIONS:
            continue  # the first one's annotation wins
        else:
            return key
    return out


def _strict_nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` or null: a ``type`` list for plain scalars, otherwise ``anyOf`` with ``{"type": "null"}``."""
    typ = node.get("type")
    if "enum" not in node and "const" not in node and "anyOf" not in node and "$ref" not in node:
        if isinstance(typ, str) and typ in _STRICT_SCALARS:
            return {**node, "type": [typ, "null"]}
        if isinstance(typ, list) and typ and all(t in _STRICT_SCALARS for t in typ):
            return {**node, "type": [*typ, "null"]}
    if set(node) <= {"anyOf", *_ANNOTATIONS} and "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    return {"anyOf": [node, {"type": "null"}]}


def _strict(node: Any, parts: tuple, ctx: _StrictCtx, *, root: bool = False,
            inlining: frozenset[str] = frozenset()) -> dict[str, Any]:
    if node is True or (isinstance(node, Mapping) and not (set(node) - set(_ANNOTATIONS) - _SILENT)):
        raise ctx.refuse(parts, "{}", "a schema that accepts any value (strict mode needs a type)")
    if not isinstance(node, Mapping):
        raise ctx.refuse(parts, "false", "a schema that accepts nothing")
    node = {k: v for k, v in node.items() if k not in _SILENT}

    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise ctx.refuse(parts, "$ref", f"the remote reference {ref!r}")
        try:
            target = _resolve(ctx.root, ref)
        except (KeyError, IndexError, ValueError):
            raise ctx.refuse(parts, "$ref", f"the unresolvable reference {ref!r}") from None
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return {"$ref": ref}
        # strict mode refuses $ref with sibling keywords: inline the target (one level) when that is exact
        if ref in inlining or not isinstance(target, Mapping):
            extra = set(siblings) - set(_ANNOTATIONS)
            if extra:
                raise ctx.refuse(parts, "$ref", f"$ref {ref!r} beside {sorted(extra)} on a recursive reference")
            ctx.lose(parts, next(iter(siblings)), f"annotation beside the recursive $ref {ref!r} dropped")
            return {"$ref": ref}
        merged = _merge_exact(siblings, target)
        if isinstance(merged, str):
            raise ctx.refuse(parts, "$ref", f"$ref {ref!r} whose sibling {merged!r} conflicts with its target")
        return _strict(merged, parts, ctx, root=root, inlining=inlining | {ref})

    if "allOf" in node:
        subs = node["allOf"]
        if isinstance(subs, list) and len(subs) == 1 and isinstance(subs[0], Mapping) and "$ref" not in subs[0]:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            merged = _merge_exact(rest, subs[0])
            if isinstance(merged, dict):
                return _strict(merged, parts, ctx, root=root, inlining=inlining)
        raise ctx.refuse(parts + ("allOf",), "allOf", _STRICT_REFUSE["allOf"])

    out: dict[str, Any] = {}
    for key in node:
        if key in _STRICT_REFUSE:
            raise ctx.refuse(parts + (key,), key, _STRICT_REFUSE[key])
        if key in _STRICT_DROP_CONSTRAINT:
            ctx.lose(parts + (key,), key, "not in strict mode's subset: dropped from the declaration "
                                          "(toolwire still validates it)")
        elif key in _STRICT_DROP_ANNOTATION:
            ctx.lose(parts + (key,), key, "annotation strict mode does not accept: dropped")
        elif key.startswith("x-"):
            ctx.lose(parts + (key,), key, "extension keyword dropped")
        elif key not in _STRICT_KEEP:
            raise ctx.refuse(parts + (key,), key, f"the keyword {key!r}")

    typ = node.get("type")
    types = [typ] if isinstance(typ, str) else list(typ) if isinstance(typ, list) else []
    if typ is not None and (not types or any(t not in _STRICT_TYPES for t in types)):
        raise ctx.refuse(parts + ("type",), "type", f"the type {typ!r}")
    if typ is None and not any(k in node for k in ("enum", "const", "anyOf")):
        raise ctx.refuse(parts, "type", "a schema without a type")
    if root and (types != ["object"] or "anyOf" in node):
        raise ctx.refuse(parts, "type", "a root that is not a plain object (strict mode needs type: object)")

    for key in ("description", "title", "pattern", "multipleOf", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "minItems", "maxItems", "enum", "const"):
        if key in node:
            out[key] = copy.deepcopy(node[key])
    if typ is not None:
        out["type"] = copy.deepcopy(typ)
    if "format" in node:
        if node["format"] in STRICT_FORMATS:
            out["format"] = node["format"]
        else:
            ctx.lose(parts + ("format",), "format", f"format {node['format']!r} is not one strict mode accepts: "
                                                    "dropped")
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise ctx.refuse(parts + ("anyOf",), "anyOf", "an empty anyOf")
        out["anyOf"] = [_strict(b, parts + ("anyOf", i), ctx, inlining=inlining) for i, b in enumerate(branches)]
    for defs_key in ("$defs", "definitions"):
        if defs_key in node:
            out[defs_key] = {name: _strict(sub, parts + (defs_key, name), ctx)
                             for name, sub in node[defs_key].items()}

    if "object" in types:
        _strict_object(node, out, parts, ctx, root=root, inlining=inlining)
    elif any(k in node for k in ("properties", "additionalProperties", "required")):
        # these keywords only constrain objects, and this schema admits no object: nothing to keep
        pass
    if "array" in types:
        items = node.get("items", _MISSING)
        if items is _MISSING:
            raise ctx.refuse(parts, "items", "an array without an item schema")
        if not isinstance(items, Mapping):
            raise ctx.refuse(parts + ("items",), "items", f"items {items!r}")
        out["items"] = _strict(items, parts + ("items",), ctx, inlining=inlining)
    # keep the original keyword order (added keywords last)
    return {**{k: out[k] for k in node if k in out}, **out}


def _strict_object(node: Mapping[str, Any], out: dict[str, Any], parts: tuple, ctx: _StrictCtx, *, root: bool,
                   inlining: frozenset[str]) -> None:
    props = node.get("properties", _MISSING)
    extra = node.get("additionalProperties", _MISSING)
    if extra is not _MISSING and extra is not False:
        raise ctx.refuse(parts + ("additionalProperties",), "additionalProperties",
                         f"an open additionalProperties map ({extra!r})")
    if props is _MISSING:
        if extra is False:
            props = {}
        elif root:
            props = {}
            ctx.lose(parts, "additionalProperties", "open root object without properties closed: the tool takes "
                                                    "no arguments in strict mode")
        else:
            raise ctx.refuse(parts, "additionalProperties", "an object without properties (an open map)")
    elif extra is _MISSING:
        ctx.lose(parts, "additionalProperties", "object closed: undeclared keys are refused in strict mode")
    if not isinstance(props, Mapping):
        raise ctx.refuse(parts + ("properties",), "properties", "properties that are not an object")
    required = node.get("required", [])
    missing = [name for name in required if name not in props]
    if missing:
        raise ctx.refuse(parts + ("required",), "required", f"required names {missing} that are not declared "
                                                            "properties")
    new_props: dict[str, Any] = {}
    for name, sub in props.items():
        sub_parts = parts + ("properties", name)
        converted = _strict(sub, sub_parts, ctx, inlining=inlining)
        if name not in required:
            if accepts_null(sub, ctx.root):
                ctx.lose(sub_parts, "required", "optional property that already accepts null: absent and null "
                                                "are no longer distinguished")
            else:
                converted = _strict_nullable(converted)
        new_props[name] = converted
    out["properties"] = new_props
    out["required"] = list(props)
    out["additionalProperties"] = False


def strict_schema(schema: Mapping[str, Any], *, tool: str | None = None, dialect: str | None = None) -> Conversion:
    """Rewrite ``schema`` into the subset OpenAI strict mode accepts.

    Every object gets ``additionalProperties: false`` and lists every property in ``required``; an optional
    property becomes ``["T", "null"]`` (plain scalars) or ``anyOf [T, {"type": "null"}]``. Constraints strict
    mode does not accept are dropped and reported in ``losses``, as is every object that was open.

    Raises ``StrictSchemaError`` (with ``path`` and ``construct``) for what strict mode cannot express:
    ``patternProperties``, ``propertyNames``, open ``additionalProperties`` maps, objects without properties,
    ``oneOf``, ``allOf`` of several schemas, ``not``, ``if``/``then``/``else``, ``prefixItems``, arrays without
    ``items``, schemas without a type, remote ``$ref``, unknown keywords, and a root that is not an object.
    """
    ctx = _StrictCtx(schema, tool, dialect)
    out = _strict(schema, (), ctx, root=True)
    return Conversion(schema=out, losses=tuple(ctx.losses))


def from_strict_arguments(args: Any, schema: Mapping[str, Any]) -> Any:
    """Undo strict mode's optional-as-null encoding: drop ``null`` values of optional properties whose
    original schema does not accept ``null``, so the arguments validate against ``schema`` again.

    Follows ``properties``, ``items``, local ``$ref`` and, for ``anyOf``, the first branch whose ``type``
    matches the value. Returns a new value; ``args`` is not changed.
    """
    return _unfill(args, schema, schema, 0)


def _unfill(value: Any, node: Any, root: Mapping[str, Any], depth: int) -> Any:
    if depth > 64 or not isinstance(node, Mapping):
        return value
    if "$ref" in node:
        try:
            target = _resolve(root, node["$ref"])
        except (KeyError, IndexError, ValueError):
            target = None
        if isinstance(target, Mapping):
            value = _unfill(value, target, root, depth + 1)
    if "anyOf" in node and isinstance(node["anyOf"], list):
        kind = _json_type(value)
        for branch in node["anyOf"]:
            btype = branch.get("type") if isinstance(branch, Mapping) else None
            btypes = [btype] if isinstance(btype, str) else btype if isinstance(btype, list) else []
            if kind in btypes or (kind == "integer" and "number" in btypes):
                value = _unfill(value, branch, root, depth + 1)
                break
    if isinstance(value, dict) and isinstance(node.get("properties"), Mapping):
        required = set(node.get("required", ()))
        out = {}
        for key, item in value.items():
            sub = node["properties"].get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not accepts_null(sub, root):
                continue
            else:
                out[key] = _unfill(item, sub, root, depth + 1)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_unfill(item, node["items"], root, depth + 1) for item in value]
    return value


def schema_stats(schema: Any) -> tuple[int, int, int]:
    """``(depth, properties, enum_values)`` of a schema: ``depth`` counts nested object levels (the root
    object is 1; ``$defs`` bodies count from 1; ``$ref`` is not followed), ``properties`` all declared
    properties, ``enum_values`` all enum values (``const`` counts one)."""
    depth = props = enums = 0

    def walk(node: Any, level: int) -> None:
        nonlocal depth, props, enums
        if not isinstance(node, Mapping):
            return
        typ = node.get("type")
        is_object = typ == "object" or (isinstance(typ, list) and "object" in typ) or "properties" in node
        here = level + 1 if is_object else level
        depth = max(depth, here)
        if isinstance(node.get("properties"), Mapping):
            props += len(node["properties"])
            for sub in node["properties"].values():
                walk(sub, here)
        if isinstance(node.get("enum"), list):
            enums += len(node["enum"])
        if "const" in node:
            enums += 1
        for key in ("items", "additionalProperties", "not"):
            walk(node.get(key), here)
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(node.get(key), list):
                for sub in node[key]:
                    walk(sub, here)
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), Mapping):
                for sub in node[key].values():
                    walk(sub, 0)

    walk(schema, 0)
    return depth, props, enums


# ---- Gemini OpenAPI 3.0 subset -----------------------------------------------------------------------------

_G_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
            "array": "ARRAY", "object": "OBJECT", "null": "NULL"}
#: formats Gemini's Schema documents per type; others are ignored by the API
_G_FORMATS = {"string": frozenset({"enum", "date-time"}), "number": frozenset({"float", "double"}),
              "integer": frozenset({"int32", "int64"})}
_G_KEEP_BY_TYPE = {
    "string": ("minLength", "maxLength", "pattern"),
    "number": ("minimum", "maximum"),
    "integer": ("minimum", "maximum"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
    "boolean": (),
    "null": (),
}
#: keywords that only constrain values of some JSON types (dropped without loss where they cannot apply)
_TYPE_SPECIFIC = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType",
                         "contentSchema"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
                        "maxContains", "unevaluatedItems"}),
    "object": frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                         "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
                         "unevaluatedProperties", "dependencies"}),
}
_TYPE_SPECIFIC["integer"] = _TYPE_SPECIFIC["number"]
_ALL_TYPE_SPECIFIC = frozenset().union(*_TYPE_SPECIFIC.values())
_G_ANNOTATIONS = ("description", "title", "default")
_G_CONSUMED = frozenset({"type", "enum", "const", "examples", "example", "$defs", "definitions", "nullable"})
_G_DROP_LOSSY = {
    "not": "not: Gemini's subset has no negation; dropped",
    "if": "if/then/else: dropped",
    "then": "if/then/else: dropped",
    "else": "if/then/else: dropped",
    "readOnly": "annotation dropped",
    "writeOnly": "annotation dropped",
    "deprecated": "annotation dropped",
}

_MERGE_MIN = frozenset({"minimum", "minLength", "minItems", "minProperties", "exclusiveMinimum", "minContains"})
_MERGE_MAX = frozenset({"maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMaximum", "maxContains"})


class _GeminiCtx:
    def __init__(self, root: Mapping[str, Any], tool: str | None, dialect: str | None) -> None:
        self.root = root
        self.tool = tool
        self.dialect = dialect
        self.losses: list[Loss] = []

    def lose(self, parts: tuple, keyword: str, detail: str) -> None:
        self.losses.append(Loss(path=_path(parts), keyword=keyword, detail=detail, tool=self.tool))

    def refuse(self, parts: tuple, keyword: str, why: str) -> SchemaConversionError:
        path = _path(parts)
        who = f"tool {self.tool!r}: " if self.tool else ""
        return SchemaConversionError(f"{who}Gemini's OpenAPI subset cannot express {why} at {path}; declare it "
                                     "with schema_mode='json_schema' (a JSON Schema)", tool=self.tool,
                                     dialect=self.dialect, path=path, keyword=keyword)


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _types_of(typ: Any) -> list[str] | None:
    if typ is None:
        return None
    return [typ] if isinstance(typ, str) else list(typ)


def _g_merge(first: Mapping[str, Any], second: Mapping[str, Any], parts: tuple, ctx: _GeminiCtx,
             why: str) -> dict[str, Any]:
    """The conjunction of two schemas as one: exact where keywords combine (bounds, required, properties,
    types, enums); a conflict keeps the first value and is reported (a widening)."""
    out = dict(first)
    for key, value in second.items():
        if key not in out or out[key] == value:
            out[key] = copy.deepcopy(value)
        elif key in _G_ANNOTATIONS or key in _ANNOTATIONS or key in ("examples", "example"):
            continue
        elif key == "properties" and isinstance(value, Mapping) and isinstance(out[key], Mapping):
            merged = dict(out[key])
            for name, sub in value.items():
                merged[name] = sub if name not in merged or merged[name] == sub else {"allOf": [merged[name], sub]}
            out[key] = merged
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in _MERGE_MIN and isinstance(value, (int, float)):
            out[key] = max(out[key], value)
        elif key in _MERGE_MAX and isinstance(value, (int, float)):
            out[key] = min(out[key], value)
        elif key == "type":
            mine, theirs = _types_of(out[key]) or [], _types_of(value) or []
            both = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
            both += [t for t in theirs if t == "integer" and "number" in mine and t not in both]
            if not both:
                ctx.lose(parts + ("type",), "type", f"{why}: the types {out[key]!r} and {value!r} never overlap; "
                                                    "kept the first")
            else:
                out[key] = both[0] if len(both) == 1 else both
        elif key == "enum" and isinstance(value, list):
            out[key] = [v for v in out[key] if v in value]
        else:
            ctx.lose(parts + (key,), key, f"{why}: conflicting {key!r}; kept the first")
    return out


def _is_null_only(node: Any) -> bool:
    return isinstance(node, Mapping) and (node.get("type") == "null" or node.get("type") == ["null"]) and \
        not (set(node) - {"type", *_ANNOTATIONS})


def _g_nullable(out: dict[str, Any]) -> dict[str, Any]:
    if out.get("type") == "NULL":
        return out
    return {**out, "nullable": True}


def _g_expand_ref(node: Mapping[str, Any], parts: tuple, ctx: _GeminiCtx, stack: tuple[str, ...]
                  ) -> tuple[dict[str, Any], tuple[str, ...]]:
    ref = node["$ref"]
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ctx.refuse(parts, "$ref", f"the remote reference {ref!r}")
    if ref in stack:
        raise ctx.refuse(parts, "$ref", f"the recursive reference {ref!r}")
    try:
        target = _resolve(ctx.root, ref)
    except (KeyError, IndexError, ValueError):
        raise ctx.refuse(parts, "$ref", f"the unresolvable reference {ref!r}") from None
    if target is True:
        target = {}
    if not isinstance(target, Mapping):
        raise ctx.refuse(parts, "$ref", f"a reference to {target!r}")
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    return _g_merge(siblings, target, parts, ctx, f"$ref {ref!r} beside other keywords"), stack + (ref,)


def _gemini(node: Any, parts: tuple, ctx: _GeminiCtx, stack: tuple[str, ...], *, root: bool = False
            ) -> dict[str, Any]:
    if node is False:
        raise ctx.refuse(parts, "false", "a schema that accepts nothing")
    if node is True:
        node = {}
    if not isinstance(node, Mapping):
        raise ctx.refuse(parts, "schema", f"the schema {node!r}")
    node = {k: v for k, v in node.items() if k not in _SILENT}

    while "$ref" in node:
        node, stack = _g_expand_ref(node, parts, ctx, stack)
        node = {k: v for k, v in node.items() if k not in _SILENT}

    if "allOf" in node:
        subs = node.pop("allOf")
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            sub_stack = stack
            if isinstance(sub, Mapping):
                while "$ref" in sub:
                    sub, sub_stack = _g_expand_ref(sub, parts + ("allOf", i), ctx, sub_stack)
                node = _g_merge(node, sub, parts + ("allOf", i), ctx, "allOf")
            elif sub is False:
                raise ctx.refuse(parts + ("allOf", i), "false", "a schema that accepts nothing")
        return _gemini(node, parts, ctx, stack, root=root)

    if "oneOf" in node:
        branches = node.pop("oneOf")
        if "anyOf" in node:
            ctx.lose(parts + ("oneOf",), "oneOf", "oneOf beside anyOf: dropped")
        else:
            ctx.lose(parts + ("oneOf",), "oneOf", "oneOf approximated as anyOf: 'exactly one' is not enforced")
            node["anyOf"] = branches

    if "anyOf" in node:
        branches = node.pop("anyOf")
        if not isinstance(branches, list) or not branches:
            raise ctx.refuse(parts + ("anyOf",), "anyOf", "an empty anyOf")
        others = [(i, b) for i, b in enumerate(branches) if not _is_null_only(b)]
        notes = {k: node.pop(k) for k in _ANNOTATIONS if k in node}
        # a null branch counts only when the keywords beside anyOf let null through too
        nulls = len(others) < len(branches) and accepts_null(node, ctx.root)
        if not others:
            res = _gemini(_g_merge(node, {"type": "null"}, parts, ctx, "anyOf"), parts, ctx, stack)
            return {**res, **notes}
        if len(others) == 1:
            i, only = others[0]
            merged = _g_merge(node, only if isinstance(only, Mapping) else {}, parts + ("anyOf", i), ctx, "anyOf")
            res = _gemini(merged, parts + ("anyOf", i), ctx, stack)
            res = {**res, **notes}
            return _g_nullable(res) if nulls else res
        out_branches = []
        for i, branch in others:
            if branch is True:
                branch = {}
            if not isinstance(branch, Mapping):
                raise ctx.refuse(parts + ("anyOf", i), "anyOf", f"the branch {branch!r}")
            branch_stack = stack
            while "$ref" in branch:
                branch, branch_stack = _g_expand_ref(branch, parts + ("anyOf", i), ctx, branch_stack)
            merged = _g_merge(node, branch, parts + ("anyOf", i), ctx, "anyOf") if node else dict(branch)
            out_branches.append(_gemini(merged, parts + ("anyOf", i), ctx, branch_stack))
        res = {**notes, "anyOf": out_branches}
        if root:
            ctx.lose(parts, "anyOf", "a root that is a union: Gemini parameters must be one object")
        return _g_nullable(res) if nulls else res

    typ = node.get("type")
    nullable = False
    if isinstance(typ, list):
        kinds = [t for t in typ if t != "null"]
        nullable = "null" in typ
        if not kinds:
            typ = "null"
        elif len(kinds) == 1:
            typ = kinds[0]
        else:
            rest = {k: v for k, v in node.items() if k != "type" and k not in _ANNOTATIONS}
            union = {k: node[k] for k in _ANNOTATIONS if k in node}
            union["anyOf"] = [{**rest, "type": k} for k in kinds] + ([{"type": "null"}] if nullable else [])
            return _gemini(union, parts, ctx, stack, root=root)

    if typ is None:
        if isinstance(node.get("enum"), list) and node["enum"]:
            values = node["enum"]
            kinds = {_json_type(v) for v in values if v is not None}
            if None in values:
                nullable = True
            if kinds == {"integer", "number"}:
                kinds = {"number"}
            if len(kinds) == 1:
                typ = kinds.pop()
            elif not kinds:
                typ = "null"
            else:
                union = {k: node[k] for k in _ANNOTATIONS if k in node}
                union["anyOf"] = [{"enum": [v for v in values if v is not None and _json_type(v) == k]}
                                  for k in sorted(kinds)]
                if nullable:
                    union["anyOf"].append({"type": "null"})
                return _gemini(union, parts, ctx, stack, root=root)
        elif "const" in node:
            typ = _json_type(node["const"])
        else:
            hinted = [t for t in ("object", "array", "string", "number") if
                      set(node) & (_TYPE_SPECIFIC[t] - {"format"})]
            if len(hinted) == 1:
                typ = hinted[0]
                ctx.lose(parts + ("type",), "type", f"no type: assumed {typ!r} from its keywords (values of other "
                                                    "types are no longer accepted)")
            else:
                ctx.lose(parts + ("type",), "type", "no type (any JSON value): Gemini's subset has no any-type; "
                                                    "sent without a type")
                return {k: copy.deepcopy(node[k]) for k in _G_ANNOTATIONS if k in node}

    if typ not in _G_TYPES:
        raise ctx.refuse(parts + ("type",), "type", f"the type {typ!r}")
    if ("enum" in node and None not in node["enum"]) or ("const" in node and node["const"] is not None):
        nullable = False  # type: [X, "null"] beside an enum or const without null: null is not accepted

    out: dict[str, Any] = {"type": _G_TYPES[typ]}
    for key in _G_ANNOTATIONS:
        if key in node:
            out[key] = copy.deepcopy(node[key])
    if "example" in node:
        out["example"] = copy.deepcopy(node["example"])
    elif isinstance(node.get("examples"), list) and node["examples"]:
        out["example"] = copy.deepcopy(node["examples"][0])
        if len(node["examples"]) > 1:
            ctx.lose(parts + ("examples",), "examples", "only the first example is kept")

    if "enum" in node:
        values = node["enum"]
        if typ == "string":
            out["enum"] = [v for v in values if isinstance(v, str)]
        elif typ != "null":
            matching = [v for v in values if _json_type(v) == typ or (typ == "number" and _json_type(v) == "integer")]
            ctx.lose(parts + ("enum",), "enum", f"enum on {_a(typ)} field: Gemini enums are strings only; "
                                                f"dropped (values {matching!r})")
    if "const" in node:
        const = node["const"]
        if typ == "string" and isinstance(const, str):
            out["enum"] = [v for v in out.get("enum", [const]) if v == const]
        elif typ == "null":
            pass
        elif _json_type(const) == typ or (typ == "number" and _json_type(const) == "integer"):
            ctx.lose(parts + ("const",), "const", f"const {const!r} on {_a(typ)} field: Gemini has no const and "
                                                  "enums are strings only; dropped")
    if "format" in node:
        fmt = node["format"]
        if fmt in _G_FORMATS.get(typ, ()):
            out["format"] = fmt
        elif "format" in _TYPE_SPECIFIC.get(typ, ()):
            ctx.lose(parts + ("format",), "format", f"format {fmt!r} is not one Gemini uses for {typ} fields; "
                                                    "dropped")
    for key in _G_KEEP_BY_TYPE[typ]:
        if key in node:
            out[key] = copy.deepcopy(node[key])

    if typ in ("number", "integer"):
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if key in node:
                value = node[key]
                pick = max if bound == "minimum" else min
                out[bound] = pick(out[bound], value) if bound in out else value
                ctx.lose(parts + (key,), key, f"exclusive bound {value!r} sent as the inclusive {bound}")
        if "multipleOf" in node:
            ctx.lose(parts + ("multipleOf",), "multipleOf", "multipleOf is not in Gemini's subset; dropped")

    if typ == "array":
        items = node.get("items", _MISSING)
        if "prefixItems" in node:
            ctx.lose(parts + ("prefixItems",), "prefixItems", "tuple items are not in Gemini's subset; dropped")
        if items is _MISSING:
            if "prefixItems" not in node:
                ctx.lose(parts + ("items",), "items", "array without an item schema: Gemini requires items; sent "
                                                      "without them")
        elif isinstance(items, Mapping) or items is True:
            out["items"] = _gemini(items, parts + ("items",), ctx, stack)
        else:
            ctx.lose(parts + ("items",), "items", f"items {items!r} is not in Gemini's subset; dropped")
        for key in ("uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"):
            if key in node:
                ctx.lose(parts + (key,), key, f"{key} is not in Gemini's subset; dropped")

    if typ == "object":
        props = node.get("properties", _MISSING)
        if isinstance(props, Mapping):
            out["properties"] = {name: _gemini(sub, parts + ("properties", name), ctx, stack)
                                 for name, sub in props.items()}
        elif not root:
            extra = node.get("additionalProperties", _MISSING)
            if extra is not False:
                ctx.lose(parts + ("properties",), "properties", "free-form object: Gemini's subset needs declared "
                                                                "properties; sent without them")
        if isinstance(node.get("required"), list):
            out["required"] = list(node["required"])
        extra = node.get("additionalProperties", _MISSING)
        if extra is False:
            ctx.lose(parts + ("additionalProperties",), "additionalProperties",
                     "closed object: Gemini's OpenAPI subset has no additionalProperties; undeclared keys are no "
                     "longer refused by the declaration (toolwire still validates)")
        elif extra is not _MISSING and extra is not True and extra != {}:
            ctx.lose(parts + ("additionalProperties",), "additionalProperties",
                     "additionalProperties schema (a typed map) is not in Gemini's subset; dropped")
        for key in ("patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
                    "unevaluatedProperties", "dependencies"):
            if key in node:
                ctx.lose(parts + (key,), key, f"{key} is not in Gemini's subset; dropped")

    if typ == "string":
        for key in ("contentEncoding", "contentMediaType", "contentSchema"):
            if key in node:
                ctx.lose(parts + (key,), key, f"{key} is not in Gemini's subset; dropped")

    for key in node:
        if key in _G_DROP_LOSSY:
            ctx.lose(parts + (key,), key, _G_DROP_LOSSY[key])
        elif key in _ALL_TYPE_SPECIFIC or key in _G_CONSUMED or key in _G_ANNOTATIONS:
            continue  # handled above, or cannot constrain a value of this type
        elif key.startswith("x-"):
            ctx.lose(parts + (key,), key, "extension keyword dropped")
        else:
            ctx.lose(parts + (key,), key, f"{key!r} is not in Gemini's OpenAPI subset; dropped")
    if "nullable" in node:
        ctx.lose(parts + ("nullable",), "nullable", "'nullable' is not JSON Schema (it has no effect there); "
                                                    "dropped")
    return _g_nullable(out) if nullable else out


def gemini_schema(schema: Mapping[str, Any], *, tool: str | None = None, dialect: str | None = None
                  ) -> Conversion:
    """Convert a JSON Schema into Gemini's OpenAPI 3.0 ``Schema`` subset (``FunctionDeclaration.parameters``).

    Local ``$ref``s are inlined; ``anyOf [X, null]`` and ``type: [X, "null"]`` become ``nullable: true``;
    ``type`` is upper case; ``const`` on a string becomes a one-value ``enum``; ``allOf`` is merged into one
    schema. What the subset cannot hold is dropped and reported in ``losses`` (``enum`` and ``const`` on
    non-string fields, ``additionalProperties``, ``oneOf`` (kept as ``anyOf``), ``multipleOf``, exclusive
    bounds (made inclusive), ``format``s Gemini ignores, ``uniqueItems``, ``patternProperties``, …).

    Raises ``SchemaConversionError`` for a recursive or remote ``$ref`` and for ``false`` schemas.
    """
    ctx = _GeminiCtx(schema, tool, dialect)
    out = _gemini(schema, (), ctx, (), root=True)
    return Conversion(schema=out, losses=tuple(ctx.losses))


# ---- keywords Google's JSON-Schema endpoints ignore --------------------------------------------------------

#: "Supports a subset of JSON Schema. minLength, maxLength, minProperties, maxProperties, uniqueItems, contains,
#: minContains, and maxContains are ignored and not enforced." (google-genai, Interactions ``Function.parameters``;
#: assumed for generateContent's JSON Schema parameters, where it is not documented)
GOOGLE_IGNORED_KEYWORDS = ("minLength", "maxLength", "minProperties", "maxProperties", "uniqueItems", "contains",
                           "minContains", "maxContains")

_SUB_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SUB_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                   "unevaluatedProperties", "unevaluatedItems")


def _walk(node: Any, parts: tuple = ()) -> Iterator[tuple[tuple, Mapping[str, Any]]]:
    """Every sub-schema of ``node`` with its path (properties' names are never taken for keywords)."""
    if not isinstance(node, Mapping):
        return
    yield parts, node
    for key in _SUB_SCHEMA_MAPS:
        if isinstance(node.get(key), Mapping):
            for name, sub in node[key].items():
                yield from _walk(sub, parts + (key, name))
    for key in _SUB_SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield from _walk(sub, parts + (key, i))
    for key in _SUB_SCHEMA_ONE:
        yield from _walk(node.get(key), parts + (key,))


def ignored_keywords(schema: Mapping[str, Any], *, tool: str | None = None, documented: bool = True
                     ) -> tuple[Loss, ...]:
    """The ``GOOGLE_IGNORED_KEYWORDS`` used in ``schema``, as losses (Gemini / Interactions JSON-Schema fields).

    ``documented=False`` says so in each detail (generateContent does not document the list).
    """
    suffix = "" if documented else " (documented for Interactions; assumed for generateContent)"
    losses = []
    for parts, node in _walk(schema):
        for key in GOOGLE_IGNORED_KEYWORDS:
            if key in node:
                losses.append(Loss(path=_path(parts + (key,)), keyword=key,
                                   detail=f"ignored and not enforced by the provider{suffix}", tool=tool))
    return tuple(losses)
