"""Tool declarations (from_function, from_schema, from_mcp), name rules, and the closed, frozen registry."""

from __future__ import annotations

import types
from typing import Annotated, Literal

import jsonschema_rs
import msgspec
import pytest

import toolwire
from toolwire.registry import (
    DuplicateToolError,
    Registry,
    Tool,
    ToolDeclarationError,
    ToolNameError,
    assert_registry_matches,
)
from toolwire.registry.tool import ArgumentsInvalid

from .tools_demo import DemoWorld


def _noop(args):
    return args


def _errors(tool: Tool, args) -> str:
    with pytest.raises(ArgumentsInvalid) as info:
        tool.validate(args)
    return info.value.message


class Portion(msgspec.Struct):
    food: str
    grams: Annotated[float, msgspec.Meta(gt=0)]


class Node(msgspec.Struct):
    label: str
    children: list["Node"] = []


# ---- from_function ---------------------------------------------------------------------------------------------


def test_from_function_schema_is_an_object_of_the_parameters():
    """from_function builds an object schema: properties, required, defaults, no extra properties."""
    def save_measurement(kind: Literal["height", "weight"], value: float, unit: str = "kg") -> dict:
        """Save a body measurement."""
        return {}

    tool = Tool.from_function(save_measurement, effect="write")
    s = tool.input_schema
    assert s["type"] == "object"
    assert s["required"] == ["kind", "value"]
    assert s["properties"]["unit"] == {"type": "string", "default": "kg"}
    assert s["properties"]["kind"] == {"enum": ["height", "weight"]}
    assert s["additionalProperties"] is False
    assert "$ref" not in s and "title" not in s
    assert tool.name == "save_measurement" and tool.effect == "write"
    assert tool.description == "Save a body measurement."


def test_from_function_name_and_description_overrides():
    """An explicit name and description win over the function's own."""
    def f(x: int) -> int:
        """Doc."""
        return x

    tool = Tool.from_function(f, effect="read", name="double_it", description="Doubles.", timeout=2)
    assert (tool.name, tool.description, tool.timeout) == ("double_it", "Doubles.", 2.0)


def test_from_function_validation_keeps_the_json_path():
    """A wrong type is reported as msgspec does, with the JSON path of the value."""
    def lookup(height: int) -> int:
        return height

    tool = Tool.from_function(lookup, effect="read")
    assert _errors(tool, {"height": "170"}) == "Expected `int`, got `str` - at `$.height`"


def test_from_function_is_strict_and_refuses_unknown_fields():
    """No string-to-number coercion; an unknown argument name and a missing one are refused."""
    def lookup(key: str, limit: int = 3) -> str:
        return key

    tool = Tool.from_function(lookup, effect="read")
    assert "unknown field `keyy`" in _errors(tool, {"key": "a", "keyy": "b"})
    assert "missing required field `key`" in _errors(tool, {})
    assert "- at `$`" in _errors(tool, {})
    assert tool.validate({"key": "a"}).limit == 3


def test_from_function_struct_parameters_inline_and_validate_nested_paths():
    """A Struct-typed parameter is inlined in the schema, and its errors carry the nested path."""
    def add_portion(meal: str, portion: Portion) -> str:
        return portion.food

    tool = Tool.from_function(add_portion, effect="write")
    props = tool.input_schema["properties"]
    assert props["portion"]["type"] == "object"
    assert props["portion"]["properties"]["grams"] == {"type": "number", "exclusiveMinimum": 0}
    assert "$defs" not in tool.input_schema
    assert _errors(tool, {"meal": "x", "portion": {"food": "arroz", "grams": 0}}) == \
        "Expected `float` > 0.0 - at `$.portion.grams`"
    value = tool.validate({"meal": "lunch", "portion": {"food": "arroz", "grams": 150}})
    assert tool.invoke(value) == "arroz"


def test_from_function_recursive_types_keep_resolvable_refs():
    """A recursive Struct keeps a $defs entry whose $ref resolves against the root schema."""
    def draw(tree: Node) -> int:
        return 1

    tool = Tool.from_function(draw, effect="read")
    schema = tool.input_schema
    assert "Node" in schema["$defs"]
    validator = jsonschema_rs.validator_for(schema)
    assert validator.is_valid({"tree": {"label": "a", "children": [{"label": "b"}]}})
    assert not validator.is_valid({"tree": {"label": "a", "children": [{"label": 1}]}})


def test_from_function_handler_gets_keyword_arguments():
    """The handler is called with the validated arguments as keywords (defaults filled in)."""
    def f(a: int, b: str = "x") -> str:
        return f"{a}{b}"

    tool = Tool.from_function(f, effect="read")
    assert tool.invoke(tool.validate({"a": 1})) == "1x"


def test_from_function_refuses_varargs():
    """*args, **kwargs and positional-only parameters cannot be tool parameters."""
    def star(*items: int) -> None: ...

    def kw(**opts: int) -> None: ...

    def pos(a: int, /) -> None: ...

    for fn in (star, kw, pos):
        with pytest.raises(ToolDeclarationError) as info:
            Tool.from_function(fn, effect="read")
        assert info.value.rule == "keyword-compatible parameters"


def test_from_function_detects_async_handlers():
    """An async handler is recognised as such."""
    async def fetch(key: str) -> str:
        return key

    assert Tool.from_function(fetch, effect="read").is_async
    assert not Tool.from_function(_noop, effect="read").is_async


# ---- from_schema / from_mcp --------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "filters": {"type": "array", "items": {"type": "integer"}},
        "meta data": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def test_from_schema_messages_carry_the_instance_path():
    """jsonschema-rs errors are reported with the instance path in msgspec's notation."""
    tool = Tool.from_schema("search_foods", SCHEMA, _noop, effect="read", description="Search.")
    assert _errors(tool, {"query": "a", "filters": [1, "x"]}) == '"x" is not of type "integer" - at `$.filters[1]`'
    assert '- at `$["meta data"].n`' in _errors(tool, {"query": "a", "meta data": {"n": "1"}})
    assert "\"query\" is a required property - at `$`" in _errors(tool, {})
    msg = _errors(tool, {"query": "", "extra": 1})
    assert "- at `$.query`" in msg and "'extra' was unexpected" in msg


def test_from_schema_handler_receives_the_argument_dict():
    """A from_schema handler gets one positional argument: the validated dict."""
    tool = Tool.from_schema("search_foods", SCHEMA, lambda args: args["query"].upper(), effect="read")
    assert tool.invoke(tool.validate({"query": "arroz"})) == "ARROZ"


def test_from_schema_copies_the_schema():
    """Mutating the caller's schema afterwards does not change the declared tool."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    tool = Tool.from_schema("t", schema, _noop, effect="read")
    schema["properties"]["a"]["type"] = "string"
    assert tool.input_schema["properties"]["a"]["type"] == "integer"


@pytest.mark.parametrize("schema,rule", [
    ({"type": "object", "properties": {"a": {"type": "bogus"}}}, "valid JSON Schema"),
    ({"type": "array"}, "type: object"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}}, "valid JSON Schema"),
    ("not a schema", "schema is an object"),
], ids=["invalid", "not-object", "remote-ref", "not-a-mapping"])
def test_from_schema_rejects_bad_schemas_at_declaration(schema, rule):
    """Invalid schemas, non-object schemas and remote $refs fail when the tool is declared."""
    with pytest.raises(ToolDeclarationError) as info:
        Tool.from_schema("t", schema, _noop, effect="read")
    assert info.value.tool == "t"
    assert info.value.rule.startswith(rule)


def test_from_mcp_reads_a_tools_list_entry():
    """An MCP tools/list entry (dict or object) gives name, description and inputSchema."""
    entry = {"name": "get_weather", "description": "Weather for a city.",
             "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
             "annotations": {"readOnlyHint": True}}
    tool = Tool.from_mcp(entry, _noop, effect="read")
    assert (tool.name, tool.description, tool.effect) == ("get_weather", "Weather for a city.", "read")
    assert "- at `$.city`" in _errors(tool, {"city": 3})
    obj = types.SimpleNamespace(**entry)
    assert Tool.from_mcp(obj, _noop, effect="write").input_schema == entry["inputSchema"]
    with pytest.raises(ToolDeclarationError):
        Tool.from_mcp({"name": "x"}, _noop, effect="read")


# ---- names, effects, timeouts --------------------------------------------------------------------------------------


def test_name_of_64_characters_is_accepted():
    """64 characters of [A-Za-z0-9_-] starting with a letter is accepted by every provider."""
    assert Tool.from_schema("a" * 64, {"type": "object"}, _noop, effect="read").name == "a" * 64


@pytest.mark.parametrize("name,why", [
    ("a" * 65, "65 characters"),
    ("9lives", "start with a letter"),
    ("-dash", "start with a letter"),
    ("functions.save", "outside [A-Za-z0-9_-]"),
    ("save measurement", "outside [A-Za-z0-9_-]"),
    ("", "empty"),
    ("café", "outside [A-Za-z0-9_-]"),
])
def test_names_some_provider_rejects_fail_at_declaration(name, why):
    """A name that OpenAI, Anthropic or Gemini would reject raises ToolNameError naming the tool and rule."""
    with pytest.raises(ToolNameError) as info:
        Tool.from_schema(name, {"type": "object"}, _noop, effect="read")
    assert info.value.tool == name
    assert "{0,63}" in info.value.rule
    assert why in str(info.value) and repr(name) in str(info.value)


def test_from_function_checks_the_name_too():
    """from_function applies the name rule to an explicit name."""
    with pytest.raises(ToolNameError):
        Tool.from_function(_noop, effect="read", name="x" * 65)


def test_effect_and_timeout_are_checked():
    """The effect is read or write; the timeout is positive seconds or None."""
    with pytest.raises(ToolDeclarationError):
        Tool.from_schema("t", {"type": "object"}, _noop, effect="delete")
    with pytest.raises(ToolDeclarationError):
        Tool.from_schema("t", {"type": "object"}, _noop, effect="read", timeout=0)
    with pytest.raises(ToolDeclarationError):
        Tool.from_schema("t", {"type": "object"}, "not callable", effect="read")
    assert Tool.from_schema("t", {"type": "object"}, _noop, effect="read", timeout=None).timeout is None


def test_tool_is_frozen():
    """A declared tool cannot be changed."""
    tool = Tool.from_schema("t", {"type": "object"}, _noop, effect="read")
    with pytest.raises(AttributeError):
        tool.effect = "write"
    with pytest.raises(AttributeError):
        tool.handler = print


# ---- registry -------------------------------------------------------------------------------------------------------


def test_registry_rejects_duplicate_names():
    """Two tools with one name cannot share a registry."""
    a = Tool.from_schema("t", {"type": "object"}, _noop, effect="read")
    b = Tool.from_schema("t", {"type": "object"}, _noop, effect="write")
    with pytest.raises(DuplicateToolError) as info:
        Registry([a, b])
    assert info.value.tool == "t"


def test_registry_rejects_non_tools():
    """Only Tool objects can be registered."""
    with pytest.raises(ToolDeclarationError):
        Registry([_noop])


def test_registry_is_frozen():
    """Nothing can be added, replaced or removed after construction."""
    reg = DemoWorld().registry()
    with pytest.raises(AttributeError):
        reg.extra = 1
    with pytest.raises(TypeError):
        reg.tools["evil"] = reg["search_foods"]
    with pytest.raises(AttributeError):
        reg._by_name = {}
    assert not hasattr(reg, "add") and not hasattr(reg, "register")


def test_registry_lookup_is_exact():
    """Lookup neither folds case nor strips prefixes nor resolves attributes."""
    reg = DemoWorld().registry()
    assert reg.get("search_foods") is reg["search_foods"]
    for name in ("Search_Foods", "search_foods ", "functions.search_foods", "search-foods", "get", "__class__",
                 "names", None, 3):
        assert reg.get(name) is None
        assert name not in reg
    assert not hasattr(reg, "search_foods")
    with pytest.raises(KeyError):
        reg["SEARCH_FOODS"]


def test_registry_iterates_in_declaration_order():
    """names and iteration follow declaration order."""
    reg = DemoWorld().registry()
    assert reg.names == ("lookup_demo_value", "search_foods", "add_food_to_meal", "save_measurement")
    assert [t.name for t in reg] == list(reg.names) and len(reg) == 4


def test_assert_registry_matches_passes_when_equal():
    """Published names, Tools or declarations matching the registry pass."""
    reg = DemoWorld().registry()
    assert_registry_matches(reg, list(reg.names))
    reg.check_handlers(list(reg))
    reg.check_handlers([{"name": n, "description": ""} for n in reg.names])


def test_assert_registry_matches_fails_with_a_diff():
    """A published tool without a handler, or an unpublished handler, fails with both listed."""
    reg = DemoWorld().registry()
    published = ["lookup_demo_value", "search_foods", "add_food_to_meal", "delete_meal"]
    with pytest.raises(AssertionError) as info:
        assert_registry_matches(reg, published)
    text = str(info.value)
    assert "published without a handler: 'delete_meal'" in text
    assert "handler not published:       'save_measurement'" in text
    with pytest.raises(AssertionError, match="more than once"):
        reg.check_handlers(list(reg.names) + ["search_foods"])


def test_registry_names_are_public():
    """Tool, Registry and the helper are exported from toolwire."""
    assert toolwire.Tool is Tool and toolwire.Registry is Registry
    assert toolwire.assert_registry_matches is assert_registry_matches
