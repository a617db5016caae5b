"""Schema transforms: OpenAI strict mode, Gemini's OpenAPI 3.0 subset, and keywords Google ignores.

Table-driven cases pin each rule and each refusal (error type and attributes); hypothesis properties check
that the transforms keep the meaning of random schemas of the supported subset, judged by jsonschema-rs on
generated instances.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema_rs
import pytest
from google.genai import types as gtypes
from hypothesis import given
from hypothesis import strategies as st

from toolwire.schema_tools import (
    STRICT_FORMATS,
    Loss,
    SchemaConversionError,
    StrictSchemaError,
    accepts_null,
    from_strict_arguments,
    gemini_schema,
    ignored_keywords,
    schema_stats,
    strict_schema,
)

# ---- helpers ---------------------------------------------------------------------------------------------------


def valid(schema: dict, instance: Any) -> bool:
    return jsonschema_rs.validator_for(schema).is_valid(instance)


def keywords(losses) -> set[str]:
    return {loss.keyword for loss in losses}


def openapi_to_json_schema(node: Any) -> Any:
    """Read a Gemini OpenAPI Schema back as JSON Schema (``nullable: true`` = "or null"), to validate with it."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            out["type"] = value.lower()
        elif key == "properties":
            out["properties"] = {k: openapi_to_json_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = openapi_to_json_schema(value)
        elif key == "anyOf":
            out["anyOf"] = [openapi_to_json_schema(v) for v in value]
        elif key in ("nullable", "propertyOrdering", "example", "format"):
            continue
        else:
            out[key] = value
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


# ---- strict mode: rules ------------------------------------------------------------------------------------------


def test_strict_closes_objects_and_requires_every_property():
    """Every object is closed and lists all properties; optional scalars become ["T", "null"]."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city"]}
    conv = strict_schema(schema)
    assert conv.schema == {"type": "object",
                           "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
                           "required": ["city", "days"], "additionalProperties": False}
    assert keywords(conv.losses) == {"additionalProperties"}


def test_strict_leaves_input_unchanged():
    """The transform copies: the caller's schema is not mutated."""
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    before = copy.deepcopy(schema)
    strict_schema(schema)
    assert schema == before


@pytest.mark.parametrize("prop, expected", [
    ({"type": "string", "enum": ["a", "b"]}, {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}),
    ({"$ref": "#/$defs/D"}, {"anyOf": [{"$ref": "#/$defs/D"}, {"type": "null"}]}),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]},
     {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
    ({"type": ["string", "integer"]}, {"type": ["string", "integer", "null"]}),
    ({"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]},
     {"anyOf": [{"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"],
                 "additionalProperties": False}, {"type": "null"}]}),
], ids=["enum", "ref", "anyOf", "type-list", "object"])
def test_strict_optional_forms(prop, expected):
    """An optional property becomes a null union in the form strict mode takes for its kind of schema."""
    schema = {"type": "object", "properties": {"p": prop}, "$defs": {"D": {"type": "string"}}}
    assert strict_schema(schema).schema["properties"]["p"] == expected


def test_strict_optional_already_nullable_is_reported():
    """An optional property that already accepts null is left as is, and the merge of absent/null is reported."""
    schema = {"type": "object", "properties": {"p": {"type": ["string", "null"]}}}
    conv = strict_schema(schema)
    assert conv.schema["properties"]["p"] == {"type": ["string", "null"]}
    assert any(loss.keyword == "required" and loss.path == "$.properties.p" for loss in conv.losses)


@pytest.mark.parametrize("keyword, value", [
    ("minLength", 2), ("maxLength", 5), ("default", "x"), ("examples", ["x"]),
])
def test_strict_drops_and_reports_unsupported_constraints(keyword, value):
    """Constraints and annotations strict mode does not take are dropped, each with a loss naming it."""
    schema = {"type": "object", "properties": {"s": {"type": "string", keyword: value}}, "required": ["s"],
              "additionalProperties": False}
    conv = strict_schema(schema)
    assert keyword not in conv.schema["properties"]["s"]
    assert [(loss.path, loss.keyword) for loss in conv.losses] == [(f"$.properties.s.{keyword}", keyword)]


def test_strict_format_kept_only_when_supported():
    """Formats strict mode documents stay; others are dropped and reported."""
    assert "uuid" in STRICT_FORMATS
    schema = {"type": "object", "properties": {"a": {"type": "string", "format": "uuid"},
                                               "b": {"type": "string", "format": "uri"}},
              "required": ["a", "b"], "additionalProperties": False}
    conv = strict_schema(schema)
    assert conv.schema["properties"]["a"]["format"] == "uuid"
    assert "format" not in conv.schema["properties"]["b"]
    assert [(loss.path, loss.keyword) for loss in conv.losses] == [("$.properties.b.format", "format")]


def test_strict_ref_with_siblings_is_inlined():
    """A $ref beside other keywords is inlined (strict mode refuses siblings), its target made strict."""
    schema = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P", "description": "the point"}},
              "required": ["p"], "additionalProperties": False,
              "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
                              "additionalProperties": False}}}
    conv = strict_schema(schema)
    assert conv.schema["properties"]["p"] == {"description": "the point", "type": "object",
                                              "properties": {"x": {"type": "number"}}, "required": ["x"],
                                              "additionalProperties": False}
    assert conv.losses == ()


def test_strict_keeps_recursive_refs():
    """Recursion through $defs stays a $ref (strict mode supports recursive schemas)."""
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}}, "required": ["tree"],
              "additionalProperties": False,
              "$defs": {"node": {"type": "object", "properties": {
                  "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                  "required": ["children"], "additionalProperties": False}}}
    conv = strict_schema(schema)
    assert conv.schema["$defs"]["node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/node"}
    assert valid(conv.schema, {"tree": {"children": [{"children": []}]}})


def test_strict_root_without_properties_takes_no_arguments():
    """An open root object without properties becomes a closed empty object, and that is reported."""
    conv = strict_schema({"type": "object"})
    assert conv.schema == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert keywords(conv.losses) == {"additionalProperties"}


def test_strict_single_allof_is_merged():
    """allOf with one schema is merged into its parent."""
    schema = {"type": "object", "properties": {"a": {"allOf": [{"type": "string"}], "description": "d"}},
              "required": ["a"], "additionalProperties": False}
    assert strict_schema(schema).schema["properties"]["a"] == {"description": "d", "type": "string"}


@pytest.mark.parametrize("prop, construct, path", [
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties",
     "$.properties.p.patternProperties"),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties",
     "$.properties.p.additionalProperties"),
    ({"type": "object", "properties": {}, "additionalProperties": True}, "additionalProperties",
     "$.properties.p.additionalProperties"),
    ({"type": "object"}, "additionalProperties", "$.properties.p"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf", "$.properties.p.oneOf"),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, "allOf", "$.properties.p.allOf"),
    ({"type": "string", "not": {"const": "x"}}, "not", "$.properties.p.not"),
    ({"type": "string", "if": {"const": "a"}, "then": {"maxLength": 1}}, "if", "$.properties.p.if"),
    ({"type": "array", "prefixItems": [{"type": "string"}]}, "prefixItems", "$.properties.p.prefixItems"),
    ({"type": "array"}, "items", "$.properties.p"),
    ({}, "{}", "$.properties.p"),
    ({"description": "anything"}, "{}", "$.properties.p"),
    ({"$ref": "https://example.com/s.json"}, "$ref", "$.properties.p"),
    ({"type": "string", "nullable": True}, "nullable", "$.properties.p.nullable"),
    ({"type": "date"}, "type", "$.properties.p.type"),
    ({"type": "object", "propertyNames": {"pattern": "^a"}, "properties": {}}, "propertyNames",
     "$.properties.p.propertyNames"),
], ids=["patternProperties", "typed-map", "open-map", "no-properties", "oneOf", "allOf", "not", "if",
        "prefixItems", "no-items", "any", "annotation-only", "remote-ref", "unknown-keyword", "bad-type",
        "propertyNames"])
def test_strict_refuses_what_it_cannot_express(prop, construct, path):
    """Constructs outside strict mode's subset raise StrictSchemaError naming the construct and its path."""
    schema = {"type": "object", "properties": {"p": prop}, "required": ["p"], "additionalProperties": False}
    with pytest.raises(StrictSchemaError) as info:
        strict_schema(schema, tool="t", dialect="openai-chat")
    err = info.value
    assert (err.construct, err.path, err.tool, err.dialect) == (construct, path, "t", "openai-chat")
    assert path in str(err) and "'t'" in str(err)
    assert err.rule == "strict mode subset"


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {}, "anyOf": [{"required": ["a"]}]},
    {"type": ["object", "null"], "properties": {}},
], ids=["root-anyOf", "root-nullable"])
def test_strict_refuses_non_plain_root(schema):
    """The root must be a plain object (no union, not nullable)."""
    with pytest.raises(StrictSchemaError) as info:
        strict_schema(schema)
    assert info.value.path == "$"


def test_from_strict_arguments_drops_encoded_absences():
    """Nulls standing for absent optional properties are dropped; nulls the schema accepts are kept."""
    schema = {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": ["string", "null"]}, "c": {"type": "string"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/I"}}}, "required": ["c"],
        "$defs": {"I": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    args = {"a": None, "b": None, "c": "k", "items": [{"x": None}, {"x": 3}]}
    out = from_strict_arguments(args, schema)
    assert out == {"b": None, "c": "k", "items": [{}, {"x": 3}]}
    assert args["a"] is None  # not mutated
    assert valid(schema, out)


def test_accepts_null_reads_refs_and_unions():
    """accepts_null follows $ref, anyOf, enum and type lists."""
    root = {"$defs": {"N": {"type": "null"}, "S": {"type": "string"}}}
    assert accepts_null({"$ref": "#/$defs/N"}, root)
    assert not accepts_null({"$ref": "#/$defs/S"}, root)
    assert accepts_null({"anyOf": [{"type": "string"}, {"type": "null"}]}, root)
    assert not accepts_null({"type": ["string", "null"], "enum": ["a"]}, root)
    assert accepts_null({}, root)


def test_schema_stats_counts_depth_properties_and_enums():
    """schema_stats: object nesting from 1 at the root, all properties, all enum values."""
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"enum": [1, 2]}}}}},
        "d": {"type": "array", "items": {"type": "object", "properties": {"e": {"const": 1}}}}}}
    assert schema_stats(schema) == (3, 5, 3)


# ---- Gemini: rules ------------------------------------------------------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name", "minLength": 1},
        "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]},
        "days": {"type": ["integer", "null"], "minimum": 1, "maximum": 14},
        "when": {"type": "string", "format": "date-time"},
        "place": {"$ref": "#/$defs/Place"},
        "kind": {"const": "forecast"},
    },
    "required": ["city"],
    "$defs": {"Place": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                        "required": ["lat", "lon"]}},
}


def test_gemini_golden_conversion():
    """A schema inside the subset converts exactly: nullable unions, inlined $ref, const as a one-value enum."""
    conv = gemini_schema(WEATHER)
    assert conv.schema == {
        "type": "OBJECT",
        "properties": {
            "city": {"type": "STRING", "description": "City name", "minLength": 1},
            "unit": {"type": "STRING", "enum": ["c", "f"], "nullable": True},
            "days": {"type": "INTEGER", "minimum": 1, "maximum": 14, "nullable": True},
            "when": {"type": "STRING", "format": "date-time"},
            "place": {"type": "OBJECT", "properties": {"lat": {"type": "NUMBER"}, "lon": {"type": "NUMBER"}},
                      "required": ["lat", "lon"]},
            "kind": {"type": "STRING", "enum": ["forecast"]},
        },
        "required": ["city"],
    }
    assert conv.losses == ()


def test_gemini_conversion_is_a_valid_sdk_schema():
    """The converted schema is accepted by google-genai's Schema model (which forbids unknown fields)."""
    gtypes.Schema.model_validate(gemini_schema(WEATHER).schema)
    lossy = {"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2], "exclusiveMinimum": 0},
                                              "m": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}},
             "additionalProperties": False}
    gtypes.Schema.model_validate(gemini_schema(lossy).schema)


@pytest.mark.parametrize("prop, keyword", [
    ({"type": "integer", "enum": [1, 2, 3]}, "enum"),
    ({"type": "integer", "const": 3}, "const"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     "additionalProperties"),
    ({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}, "additionalProperties"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
    ({"allOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"},
                {"type": "string", "pattern": "^b"}]}, "pattern"),
    ({"type": "string", "format": "email"}, "format"),
    ({"type": "number", "exclusiveMinimum": 0}, "exclusiveMinimum"),
    ({"type": "integer", "multipleOf": 5}, "multipleOf"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "string", "not": {"const": "x"}}, "not"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
    ({"type": "array"}, "items"),
    ({}, "type"),
    ({"type": "string", "x-order": 1}, "x-order"),
    ({"type": "string", "examples": ["a", "b"]}, "examples"),
], ids=["enum-int", "const-int", "additionalProperties", "typed-map", "oneOf", "allOf-conflict", "format",
        "exclusiveMinimum", "multipleOf", "uniqueItems", "not", "patternProperties", "no-items", "any",
        "extension", "examples"])
def test_gemini_reports_every_loss(prop, keyword):
    """Each keyword outside the subset is dropped or approximated and reported once, with its path."""
    conv = gemini_schema({"type": "object", "properties": {"p": prop}}, tool="t")
    mine = [loss for loss in conv.losses if loss.keyword == keyword]
    assert len(mine) == 1, conv.losses
    assert mine[0].path.startswith("$.properties.p") and mine[0].tool == "t"
    gtypes.Schema.model_validate(conv.schema)


def test_gemini_allof_merges_exactly():
    """allOf of compatible objects becomes one object with the union of properties and required."""
    schema = {"type": "object", "properties": {"p": {"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer", "minimum": 0}}, "required": ["b"]},
        {"properties": {"b": {"maximum": 9}}}]}}}
    conv = gemini_schema(schema)
    assert conv.losses == ()
    assert conv.schema["properties"]["p"] == {
        "type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"type": "INTEGER", "minimum": 0,
                                                                         "maximum": 9}},
        "required": ["a", "b"]}


def test_gemini_multi_type_becomes_anyof():
    """type: [string, integer, null] becomes a nullable anyOf of the two types."""
    conv = gemini_schema({"type": "object", "properties": {"v": {"type": ["string", "integer", "null"]}}})
    assert conv.schema["properties"]["v"] == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}], "nullable": True}
    assert conv.losses == ()


def test_gemini_enum_without_null_is_not_nullable():
    """type: [string, null] with an enum that lacks null accepts no null, so it is not made nullable."""
    conv = gemini_schema({"type": "object", "properties": {"v": {"type": ["string", "null"], "enum": ["a"]}}})
    assert conv.schema["properties"]["v"] == {"type": "STRING", "enum": ["a"]}


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "object", "properties": {"t": {"$ref": "#/$defs/T"}},
      "$defs": {"T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}}}},
     "$ref"),
    ({"type": "object", "properties": {"t": {"$ref": "other.json#/x"}}}, "$ref"),
    ({"type": "object", "properties": {"t": False}}, "false"),
], ids=["recursive", "remote", "false"])
def test_gemini_refuses_what_it_cannot_express(schema, keyword):
    """A recursive or remote $ref, or a false schema, raises SchemaConversionError with path and keyword."""
    with pytest.raises(SchemaConversionError) as info:
        gemini_schema(schema, tool="t", dialect="gemini")
    err = info.value
    assert (err.keyword, err.tool, err.dialect) == (keyword, "t", "gemini")
    assert err.path.startswith("$.properties.t")
    assert "json_schema" in str(err)


def test_ignored_keywords_found_by_structure():
    """Keywords Google ignores are reported where they are keywords, never for a property of that name."""
    schema = {"type": "object", "properties": {
        "minLength": {"type": "string", "maxLength": 3},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}}}
    losses = ignored_keywords(schema, tool="t")
    assert {(loss.path, loss.keyword) for loss in losses} == {
        ("$.properties.minLength.maxLength", "maxLength"), ("$.properties.tags.uniqueItems", "uniqueItems"),
        ("$.properties.tags.items.minLength", "minLength")}
    assert all(isinstance(loss, Loss) and loss.tool == "t" for loss in losses)


# ---- property tests -------------------------------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c", "d"])


def _optional(base: dict, **options) -> st.SearchStrategy:
    return st.fixed_dictionaries({k: st.just(v) for k, v in base.items()}, optional=options)


_STRING = _optional({"type": "string"}, minLength=st.integers(0, 2), maxLength=st.integers(1, 4),
                    pattern=st.just("^[ab]*$"), format=st.sampled_from(["date", "uuid", "email", "uri"]))
_STRING_ENUM = st.builds(lambda vals: {"type": "string", "enum": vals},
                         st.lists(st.sampled_from(["a", "b", "ab", ""]), min_size=1, max_size=3, unique=True))
_INTEGER = _optional({"type": "integer"}, minimum=st.integers(-2, 2), maximum=st.integers(0, 6),
                     exclusiveMinimum=st.integers(-2, 2), multipleOf=st.sampled_from([2, 3]))
_INT_ENUM = st.builds(lambda vals: {"type": "integer", "enum": vals},
                      st.lists(st.integers(-1, 4), min_size=1, max_size=3, unique=True))
_NUMBER = _optional({"type": "number"}, minimum=st.integers(-2, 2), maximum=st.sampled_from([1.5, 4, 6]))
_BOOLEAN = st.just({"type": "boolean"})
_CONST = st.sampled_from([{"const": "a"}, {"const": 2}, {"enum": ["a", "b"]}])
_PLAIN = st.one_of(_STRING, _STRING_ENUM, _INTEGER, _INT_ENUM, _NUMBER, _BOOLEAN, _CONST)


def _nullable_forms(leaf: dict) -> st.SearchStrategy:
    forms = [st.just(leaf), st.just({"anyOf": [leaf, {"type": "null"}]})]
    if isinstance(leaf.get("type"), str):
        forms.append(st.just({**leaf, "type": [leaf["type"], "null"]}))
    return st.one_of(forms)


_SCALAR = st.one_of(
    _PLAIN.flatmap(_nullable_forms),
    st.lists(_PLAIN, min_size=2, max_size=2).map(lambda bs: {"anyOf": bs}),
)


def _objects(inner: st.SearchStrategy, *, open_allowed: bool) -> st.SearchStrategy:
    @st.composite
    def build(draw):
        props = draw(st.dictionaries(_NAMES, inner, min_size=1, max_size=3))
        out = {"type": "object", "properties": props}
        required = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        if required:
            out["required"] = required
        if not open_allowed or draw(st.booleans()):
            out["additionalProperties"] = False
        return out
    return build()


def _arrays(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.builds(lambda items, extra: {"type": "array", "items": items, **extra}, inner,
                     st.fixed_dictionaries({}, optional={"minItems": st.integers(0, 2), "maxItems": st.integers(1, 3),
                                                         "uniqueItems": st.just(True)}))


def _schemas(*, gemini: bool) -> st.SearchStrategy:
    """Random root schemas of the subset both transforms take; ``gemini`` adds oneOf and allOf."""
    leaves = _SCALAR
    if gemini:
        leaves = st.one_of(_SCALAR, st.lists(_PLAIN, min_size=2, max_size=2).map(lambda bs: {"oneOf": bs}),
                           st.tuples(_STRING, _STRING).map(lambda ab: {"allOf": list(ab)}))
    inner = st.recursive(leaves, lambda kids: st.one_of(_objects(kids, open_allowed=True), _arrays(kids)),
                         max_leaves=6)

    @st.composite
    def root(draw):
        defs = draw(st.one_of(_PLAIN, _objects(_SCALAR, open_allowed=True)))
        props = draw(st.dictionaries(_NAMES, st.one_of(inner, st.just({"$ref": "#/$defs/D"}),
                                                       st.just({"$ref": "#/$defs/D", "description": "ref"})),
                                     min_size=1, max_size=4))
        out = {"type": "object", "properties": props, "$defs": {"D": defs}}
        required = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        if required:
            out["required"] = required
        if draw(st.booleans()):
            out["additionalProperties"] = False
        return out
    return root()


_NOISE = st.one_of(st.none(), st.integers(-2, 5), st.sampled_from([1.5, -0.5]), st.text("ab", max_size=2),
                   st.booleans(), st.just([]), st.just({}))


def _resolve(root: dict, node: dict) -> dict:
    while "$ref" in node:
        node = {**{k: v for k, v in node.items() if k != "$ref"}, **root["$defs"][node["$ref"].split("/")[-1]]}
    return node


def instances(root: dict, node: Any, *, extras: str = "closed") -> st.SearchStrategy:
    """Values for ``node``: mostly close to valid, sometimes noise, so both outcomes of validation occur.

    An undeclared key ``zz`` is added to objects that are closed (``extras="closed"``) or to any object
    (``extras="any"``).
    """
    node = _resolve(root, node)

    def sub(schema: Any) -> st.SearchStrategy:
        return instances(root, schema, extras=extras)

    def shaped() -> st.SearchStrategy:
        if "anyOf" in node or "oneOf" in node:
            return st.one_of([sub(b) for b in node.get("anyOf", node.get("oneOf"))])
        if "allOf" in node:
            return st.one_of([sub(b) for b in node["allOf"]])
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        typ = node.get("type")
        kinds = typ if isinstance(typ, list) else [typ]
        options = []
        for kind in kinds:
            if kind == "null":
                options.append(st.none())
            elif kind == "string":
                options.append(st.text("abc", max_size=5))
            elif kind == "integer":
                options.append(st.integers(-3, 8))
            elif kind == "number":
                options.append(st.one_of(st.integers(-3, 8), st.sampled_from([0.5, 2.5, 7.25])))
            elif kind == "boolean":
                options.append(st.booleans())
            elif kind == "array":
                options.append(st.lists(sub(node["items"]), max_size=4))
            elif kind == "object":
                props = node.get("properties", {})
                obj = st.fixed_dictionaries({}, optional={name: sub(s) for name, s in props.items()})
                if extras == "any" or node.get("additionalProperties") is False:
                    obj = st.tuples(obj, st.booleans(), _NOISE).map(
                        lambda t: {**t[0], "zz": t[2]} if t[1] else t[0])
                options.append(obj)
        return st.one_of(options) if options else _NOISE

    return st.integers(0, 9).flatmap(lambda k: _NOISE if k == 0 else shaped())


def fill(value: Any, node: Any, root: dict) -> Any:
    """Strict mode's encoding of ``value``: every absent property of a declared object given as null."""
    if not isinstance(node, dict):
        return value
    node = _resolve(root, node)
    if "anyOf" in node:
        return value  # anyOf branches are scalars in these schemas
    if isinstance(value, dict) and isinstance(node.get("properties"), dict):
        out = {k: fill(v, node["properties"].get(k), root) for k, v in value.items()}
        for name in node["properties"]:
            out.setdefault(name, None)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [fill(v, node["items"], root) for v in value]
    return value


_STRICT_NARROWING = {"minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties", "contains"}


@given(st.data())
def test_strict_transform_preserves_validity(data):
    """Strict transform T of schema S, with fill(I) = I plus null for every absent declared property.

    Encoding: an instance I valid under S gives fill(I) valid under T, and from_strict_arguments(fill(I)) valid
    under S again. Decoding: whatever the model sends, J = fill(I) for any generated I (noise included), is
    valid under T exactly when from_strict_arguments(J) is valid under S, unless the transform reported a
    dropped constraint (minLength, uniqueItems, ...), in which case only "valid under S' => valid under T"
    is required. Undeclared keys are generated only where S is closed, since closing open objects is the
    documented (and reported) narrowing of strict mode.
    """
    schema = data.draw(_schemas(gemini=False))
    conv = strict_schema(schema)
    narrowing = keywords(conv.losses) & _STRICT_NARROWING
    instance = data.draw(instances(schema, schema))
    encoded = fill(instance, schema, schema)
    decoded = from_strict_arguments(encoded, schema)
    if valid(schema, instance):
        assert valid(conv.schema, encoded), (schema, conv.schema, instance)
        assert valid(schema, decoded)
    if not narrowing:
        assert valid(conv.schema, encoded) == valid(schema, decoded), (schema, conv.schema, encoded)


@given(st.data())
def test_gemini_conversion_preserves_validity_or_reports(data):
    """Gemini conversion G of schema S, read back as JSON Schema (nullable = "or null").

    Every instance valid under S is valid under G (all reported losses widen), and when no loss is reported
    the two accept exactly the same instances; the converted schema is also a valid google-genai Schema.
    """
    schema = data.draw(_schemas(gemini=True))
    conv = gemini_schema(schema)
    back = openapi_to_json_schema(conv.schema)
    gtypes.Schema.model_validate(conv.schema)
    instance = data.draw(instances(schema, schema, extras="any"))
    if valid(schema, instance):
        assert valid(back, instance), (schema, conv.schema, instance)
    if not conv.losses:
        assert valid(back, instance) == valid(schema, instance), (schema, conv.schema, instance)
