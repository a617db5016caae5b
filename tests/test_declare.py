"""Declarations and tool choice for every dialect: golden fragments, validation against the official SDKs'
request types (pydantic over the TypedDicts, with key sets checked since TypedDicts accept unknown keys;
google-genai's models forbid unknown fields), nearest equivalents, limits, and the ``declare`` command."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

import toolwire
from toolwire.cli import main
from toolwire.codecs.capabilities import CAPABILITIES
from toolwire.codecs.declare import (
    DIALECTS,
    DeclarationLimitError,
    ToolChoice,
    ToolChoiceError,
    ToolSpec,
    declare,
    declare_tool,
    load_tools,
    translate_choice,
)
from toolwire.registry.errors import DuplicateToolError, ToolDeclarationError
from toolwire.schema_tools import SchemaConversionError, StrictSchemaError

from .dialects import adapter
from .dialects.gemini import validate_gemini
from .dialects.openai_chat import validate_openai_chat

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
SEARCH_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                 "additionalProperties": False}


def _weather(args: dict) -> dict:
    return {"temp": 20}


WEATHER = toolwire.Tool.from_schema("get_weather", WEATHER_SCHEMA, _weather, effect="read",
                                    description="Current weather")
SEARCH = {"name": "search_docs", "description": "Search the docs", "input_schema": SEARCH_SCHEMA}
TOOLS = [WEATHER, SEARCH]


# ---- SDK validators (each dialect's test adapter has its own: check_declaration) ---------------------------------
VALIDATORS = {d: adapter(d).check_declaration for d in DIALECTS}


def test_validators_cover_every_dialect():
    """Every registered dialect has a declarations part and an SDK validator (its test adapter's)."""
    assert set(VALIDATORS) == set(DIALECTS) == set(toolwire.PROVIDERS)


def test_validators_catch_a_wrong_field_name():
    """A misspelt field fails the validator of each dialect (the key-set checks are not vacuous)."""
    good = {d: declare(d, TOOLS).fragment for d in DIALECTS}
    bad = {
        "openai-chat": {**good["openai-chat"], "tools": [{"type": "function", "function": {
            "name": "x", "parameters": {}, "strict_mode": True}}]},
        "openai-responses": {**good["openai-responses"], "tools": [{"type": "function", "name": "x",
                                                                     "parameters": {}, "strict": False,
                                                                     "input_schema": {}}]},
        "anthropic": {**good["anthropic"], "tool_choice": {"type": "auto", "parallel": False}},
        "gemini": {**good["gemini"], "toolConfig": {"functionCallingConfig": {"mode": "AUTO",
                                                                              "allowedFunctions": ["x"]}}},
        "gemini-interactions": {**good["gemini-interactions"], "generation_config": {
            "tool_choice": {"allowed": {"mode": "any", "tools": ["x"]}}}},
    }
    for dialect, fragment in bad.items():
        VALIDATORS[dialect](good[dialect])
        with pytest.raises((AssertionError, ValidationError)):
            VALIDATORS[dialect](fragment)


# ---- golden fragments ----------------------------------------------------------------------------------------------

GOLDEN_DEFAULT = {
    "openai-chat": {
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                              "parameters": WEATHER_SCHEMA}},
            {"type": "function", "function": {"name": "search_docs", "description": "Search the docs",
                                              "parameters": SEARCH_SCHEMA}},
        ],
        "tool_choice": "auto",
    },
    "openai-responses": {
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Current weather",
             "parameters": WEATHER_SCHEMA, "strict": False},
            {"type": "function", "name": "search_docs", "description": "Search the docs",
             "parameters": SEARCH_SCHEMA, "strict": False},
        ],
        "tool_choice": "auto",
    },
    "anthropic": {
        "tools": [
            {"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA},
            {"name": "search_docs", "description": "Search the docs", "input_schema": SEARCH_SCHEMA},
        ],
        "tool_choice": {"type": "auto"},
    },
    "gemini": {
        "tools": [{"functionDeclarations": [
            {"name": "get_weather", "description": "Current weather", "parametersJsonSchema": WEATHER_SCHEMA},
            {"name": "search_docs", "description": "Search the docs", "parametersJsonSchema": SEARCH_SCHEMA},
        ]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    },
    "gemini-interactions": {
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Current weather",
             "parameters": WEATHER_SCHEMA},
            {"type": "function", "name": "search_docs", "description": "Search the docs",
             "parameters": SEARCH_SCHEMA},
        ],
        "generation_config": {"tool_choice": "auto"},
    },
}


@pytest.mark.parametrize("dialect", list(GOLDEN_DEFAULT))
def test_golden_default_declaration(dialect):
    """The default declaration (choice auto, not strict) of each dialect is exactly the golden fragment."""
    result = declare(dialect, TOOLS)
    assert result.fragment == GOLDEN_DEFAULT[dialect]
    assert result.warnings == () and result.losses == ()
    VALIDATORS[dialect](result.fragment)


STRICT_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}

GOLDEN_FORCED_STRICT = {
    "openai-chat": {
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                              "parameters": STRICT_WEATHER, "strict": True}},
            {"type": "function", "function": {"name": "search_docs", "description": "Search the docs",
                                              "parameters": SEARCH_SCHEMA, "strict": True}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
    },
    "openai-responses": {
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Current weather",
             "parameters": STRICT_WEATHER, "strict": True},
            {"type": "function", "name": "search_docs", "description": "Search the docs",
             "parameters": SEARCH_SCHEMA, "strict": True},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
    },
    "anthropic": {
        "tools": [
            {"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA,
             "strict": True},
            {"name": "search_docs", "description": "Search the docs", "input_schema": SEARCH_SCHEMA,
             "strict": True},
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
    },
    "gemini": {
        "tools": [{"functionDeclarations": [
            {"name": "get_weather", "description": "Current weather", "parametersJsonSchema": WEATHER_SCHEMA},
            {"name": "search_docs", "description": "Search the docs", "parametersJsonSchema": SEARCH_SCHEMA},
        ]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    },
    "gemini-interactions": {
        "tools": GOLDEN_DEFAULT["gemini-interactions"]["tools"],
        "generation_config": {"tool_choice": {"allowed_tools": {"mode": "any", "tools": ["get_weather"]}}},
    },
}


@pytest.mark.parametrize("dialect", list(GOLDEN_FORCED_STRICT))
def test_golden_forced_tool_strict(dialect):
    """Forcing one tool with strict on gives exactly the golden fragment of each dialect."""
    result = declare(dialect, TOOLS, choice=ToolChoice.tool("get_weather"), strict=True)
    assert result.fragment == GOLDEN_FORCED_STRICT[dialect]
    VALIDATORS[dialect](result.fragment)


def test_golden_gemini_openapi():
    """schema_mode='openapi' sends Gemini's OpenAPI subset as parameters; a tool without parameters has none."""
    tools = [WEATHER, {"name": "ping", "input_schema": {"type": "object", "properties": {}}}]
    result = declare("gemini", tools, schema_mode="openapi")
    assert result.fragment["tools"] == [{"functionDeclarations": [
        {"name": "get_weather", "description": "Current weather",
         "parameters": {"type": "OBJECT", "properties": {
             "city": {"type": "STRING", "description": "City name"},
             "unit": {"type": "STRING", "enum": ["c", "f"]}}, "required": ["city"]}},
        {"name": "ping"},
    ]}]
    validate_gemini(result.fragment)


# ---- every choice, every dialect, validated -------------------------------------------------------------------------

CHOICES = [
    ToolChoice.auto(),
    ToolChoice.required(),
    ToolChoice.none(),
    ToolChoice.tool("search_docs"),
    ToolChoice.allowed_tools(["get_weather"]),
    ToolChoice.allowed_tools(["get_weather", "search_docs"], required=True),
    ToolChoice.allowed_tools(["search_docs"], required=True),
    ToolChoice.auto(parallel=False),
    ToolChoice.required(parallel=True),
    ToolChoice(mode="none", parallel=False),
]


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: f"{c.mode}-{c.name}-{c.allowed}-{c.parallel}")
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_choice_validates_against_the_sdk(dialect, choice, strict):
    """Every tool choice, strict or not, gives tools and tool_choice the official SDK types accept."""
    result = declare(dialect, TOOLS, choice=choice, strict=strict)
    VALIDATORS[dialect](result.fragment)


@pytest.mark.parametrize("dialect", ["gemini", "gemini-interactions"])
def test_openapi_and_lossy_schemas_validate(dialect):
    """Lossy schemas in both Gemini schema modes still give declarations the SDK models accept."""
    lossy = {"name": "lossy", "input_schema": {"type": "object", "properties": {
        "n": {"type": "integer", "enum": [1, 2]}, "m": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "t": {"type": "array", "items": {"type": "string", "minLength": 2}, "uniqueItems": True}},
        "additionalProperties": False}}
    for mode in ("json_schema", "openapi"):
        result = declare(dialect, [lossy], schema_mode=mode)
        VALIDATORS[dialect](result.fragment)
        assert result.losses


# ---- nearest equivalents -------------------------------------------------------------------------------------------

NAMES = ["get_weather", "search_docs"]


@pytest.mark.parametrize("dialect, choice, strict, fragment, keep, codes", [
    ("openai-chat", ToolChoice.allowed_tools(["get_weather"]), False,
     {"tool_choice": {"type": "allowed_tools", "allowed_tools": {
         "mode": "auto", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}}}, None, []),
    ("openai-responses", ToolChoice.allowed_tools(["get_weather"], required=True), False,
     {"tool_choice": {"type": "allowed_tools", "mode": "required",
                      "tools": [{"type": "function", "name": "get_weather"}]}}, None, []),
    ("openai-chat", ToolChoice.auto(), True, {"tool_choice": "auto", "parallel_tool_calls": False}, None,
     ["parallel_off_for_strict"]),
    ("openai-responses", ToolChoice.auto(parallel=True), True, {"tool_choice": "auto", "parallel_tool_calls": True},
     None, ["parallel_with_strict"]),
    ("openai-chat", ToolChoice.none(), False, {"tool_choice": "none"}, None, []),
    ("anthropic", ToolChoice.required(parallel=False), False,
     {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}, None, []),
    ("anthropic", ToolChoice.allowed_tools(["get_weather"]), False, {"tool_choice": {"type": "auto"}},
     ("get_weather",), ["allowed_filtered"]),
    ("anthropic", ToolChoice.allowed_tools(["get_weather", "search_docs"], required=True), False,
     {"tool_choice": {"type": "any"}}, ("get_weather", "search_docs"), ["allowed_filtered"]),
    ("anthropic", ToolChoice.allowed_tools(["search_docs"], required=True, parallel=True), False,
     {"tool_choice": {"type": "tool", "name": "search_docs", "disable_parallel_tool_use": False}}, None, []),
    ("anthropic", ToolChoice(mode="none", parallel=False), False, {"tool_choice": {"type": "none"}}, None,
     ["parallel_without_calls"]),
    ("gemini", ToolChoice.allowed_tools(["get_weather"]), False,
     {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}, ("get_weather",), ["allowed_auto_filtered"]),
    ("gemini", ToolChoice.allowed_tools(["get_weather"], required=True), False,
     {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}}, None, []),
    ("gemini", ToolChoice.auto(parallel=False), False, {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}},
     None, ["parallel_not_expressible"]),
    ("gemini", ToolChoice.auto(), True, {"toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}}}, None,
     ["strict_validated"]),
    ("gemini", ToolChoice.none(), False, {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}, None, []),
    ("gemini-interactions", ToolChoice.allowed_tools(["get_weather"]), False,
     {"generation_config": {"tool_choice": {"allowed_tools": {"mode": "auto", "tools": ["get_weather"]}}}}, None,
     []),
    ("gemini-interactions", ToolChoice.required(parallel=False), False,
     {"generation_config": {"tool_choice": "any"}}, None, ["parallel_not_expressible"]),
    ("gemini-interactions", ToolChoice.allowed_tools(["get_weather"]), True,
     {"generation_config": {"tool_choice": {"allowed_tools": {"mode": "validated", "tools": ["get_weather"]}}}},
     None, ["strict_validated"]),
])
def test_choice_translation_and_nearest_equivalents(dialect, choice, strict, fragment, keep, codes):
    """Each choice maps to its dialect's form; what a dialect cannot express comes back as a warning."""
    result = translate_choice(dialect, choice, NAMES, strict=strict)
    assert result.fragment == fragment
    assert result.keep == keep
    assert [w.code for w in result.warnings] == codes


def test_filtered_allowed_subset_declares_only_allowed_tools():
    """When a dialect restricts by declaring fewer tools, only the allowed ones are in the fragment."""
    for dialect in ("anthropic", "gemini"):
        result = declare(dialect, TOOLS, choice=ToolChoice.allowed_tools(["search_docs"]))
        text = json.dumps(result.fragment["tools"])
        assert "search_docs" in text and "get_weather" not in text
        assert result.warnings


def test_anthropic_strict_warns_schema_untransformed():
    """Anthropic strict sends strict: true with the schema as given and says so."""
    result = declare("anthropic", TOOLS, strict=True)
    assert [w.code for w in result.warnings] == ["strict_not_transformed"]


@pytest.mark.parametrize("text, expected", [
    ("auto", ToolChoice.auto()),
    ("required", ToolChoice.required()),
    ("none", ToolChoice.none()),
    ("tool:get_weather", ToolChoice.tool("get_weather")),
    ("allowed:a,b", ToolChoice.allowed_tools(["a", "b"])),
    ("allowed:a,b:required", ToolChoice.allowed_tools(["a", "b"], required=True)),
    ("allowed:a:auto", ToolChoice.allowed_tools(["a"])),
])
def test_choice_parse(text, expected):
    """The CLI choice syntax parses to the canonical ToolChoice."""
    assert ToolChoice.parse(text) == expected


@pytest.mark.parametrize("text", ["any", "tool:", "allowed:", "allowed:a,,b", "allowed:a:any", "force:x",
                                  "allowed:a,a"])
def test_choice_parse_rejects_malformed(text):
    """Malformed choice text raises ToolChoiceError (a UsageError) with reason malformed."""
    with pytest.raises(ToolChoiceError) as info:
        ToolChoice.parse(text)
    assert info.value.reason == "malformed"
    assert isinstance(info.value, toolwire.UsageError)


@pytest.mark.parametrize("kwargs", [
    {"mode": "tool"}, {"mode": "auto", "name": "x"}, {"mode": "none", "allowed": ("x",)},
    {"mode": "tool", "name": "x", "allowed": ("x",)}, {"mode": "auto", "allowed": ()}, {"mode": "sometimes"},
])
def test_choice_construction_is_checked(kwargs):
    """ToolChoice refuses inconsistent fields at construction."""
    with pytest.raises(ToolChoiceError):
        ToolChoice(**kwargs)


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_choice_naming_an_undeclared_tool_is_refused(dialect):
    """A choice naming a tool that is not declared raises ToolChoiceError (unknown_tool) in every dialect."""
    with pytest.raises(ToolChoiceError) as info:
        declare(dialect, TOOLS, choice=ToolChoice.allowed_tools(["get_weather", "nope"]))
    assert (info.value.reason, info.value.dialect) == ("unknown_tool", dialect)


# ---- limits --------------------------------------------------------------------------------------------------------


def _spec(name: str, schema: dict | None = None) -> ToolSpec:
    return ToolSpec(name=name, input_schema=schema or {"type": "object", "properties": {}})


def test_name_too_long_for_openai():
    """A 70-character name breaks OpenAI's 64 (name_length) but not Anthropic's or Gemini's 128."""
    name = "n" * 70
    for dialect in ("openai-chat", "openai-responses"):
        with pytest.raises(DeclarationLimitError) as info:
            declare(dialect, [_spec(name)])
        err = info.value
        assert (err.tool, err.limit, err.value, err.max, err.dialect) == (name, "name_length", 70, 64, dialect)
        assert isinstance(err, ToolDeclarationError) and err.rule == "name_length"
    for dialect in ("anthropic", "gemini", "gemini-interactions"):
        declare(dialect, [_spec(name)])


def test_name_starting_with_a_digit_for_gemini():
    """A name starting with a digit breaks Gemini's name pattern; OpenAI and Anthropic accept it."""
    for dialect in ("gemini", "gemini-interactions"):
        with pytest.raises(DeclarationLimitError) as info:
            declare(dialect, [_spec("9lives")])
        assert (info.value.tool, info.value.limit, info.value.value) == ("9lives", "name_pattern", "9lives")
        assert info.value.max == "^" + CAPABILITIES[dialect].name_pattern + "$"
    for dialect in ("openai-chat", "openai-responses", "anthropic"):
        declare(dialect, [_spec("9lives")])


def test_dotted_name_only_for_gemini():
    """Dots are allowed in Gemini names and refused by OpenAI and Anthropic."""
    declare("gemini", [_spec("crm.lookup")])
    with pytest.raises(DeclarationLimitError) as info:
        declare("anthropic", [_spec("crm.lookup")])
    assert info.value.limit == "name_pattern"


def test_too_many_tools_for_openai():
    """130 tools break OpenAI's 128 (max_tools, naming the first tool past the limit); Gemini takes 512."""
    specs = [_spec(f"tool_{i:03d}") for i in range(130)]
    with pytest.raises(DeclarationLimitError) as info:
        declare("openai-chat", specs)
    err = info.value
    assert (err.tool, err.limit, err.value, err.max) == ("tool_128", "max_tools", 130, 128)
    declare("gemini", specs)
    declare("anthropic", specs)  # not documented for Messages: not checked


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}, "required": ["x"], "additionalProperties": False}
    return schema


def test_strict_schema_depth_limit():
    """Eleven nested objects break strict mode's 10 levels; without strict the limit does not apply."""
    with pytest.raises(DeclarationLimitError) as info:
        declare("openai-chat", [_spec("deep", _nested(11))], strict=True)
    assert (info.value.limit, info.value.value, info.value.max) == ("schema_depth", 11, 10)
    declare("openai-chat", [_spec("deep", _nested(11))])
    declare("openai-chat", [_spec("ok", _nested(10))], strict=True)


def test_gemini_openapi_parameter_names():
    """Gemini's OpenAPI parameters refuse a top-level parameter named with a dash; JSON Schema mode does not."""
    spec = _spec("t", {"type": "object", "properties": {"user-id": {"type": "string"}}})
    with pytest.raises(DeclarationLimitError) as info:
        declare("gemini", [spec], schema_mode="openapi")
    assert (info.value.limit, info.value.value) == ("parameter_name", "user-id")
    declare("gemini", [spec])


def test_anthropic_request_size():
    """Tools larger than Anthropic's 32 MB request limit are refused (request_bytes, no tool named)."""
    spec = ToolSpec(name="big", input_schema={"type": "object"}, description="x" * (32 * 1024 * 1024))
    with pytest.raises(DeclarationLimitError) as info:
        declare("anthropic", [spec])
    assert (info.value.tool, info.value.limit) == (None, "request_bytes")


def test_limit_error_lists_every_finding():
    """DeclarationLimitError.findings lists all broken limits, the first one in the message."""
    with pytest.raises(DeclarationLimitError) as info:
        declare("gemini", [_spec("1a"), _spec("2b"), _spec("ok")])
    assert [f.tool for f in info.value.findings] == ["1a", "2b"]
    assert "'1a'" in str(info.value) and "1 more" in str(info.value)


def test_strict_refusal_names_tool_and_dialect():
    """Strict mode on a schema it cannot express raises StrictSchemaError naming tool, dialect and construct."""
    spec = _spec("tagger", {"type": "object", "properties": {
        "tags": {"type": "object", "additionalProperties": {"type": "string"}}}})
    with pytest.raises(StrictSchemaError) as info:
        declare("openai-responses", [spec], strict=True)
    err = info.value
    assert (err.tool, err.dialect, err.construct, err.path) == (
        "tagger", "openai-responses", "additionalProperties", "$.properties.tags.additionalProperties")


def test_gemini_openapi_refuses_recursion():
    """A recursive schema cannot be sent as Gemini OpenAPI parameters: SchemaConversionError."""
    spec = _spec("tree", {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "$defs": {
        "N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}})
    with pytest.raises(SchemaConversionError) as info:
        declare("gemini", [spec], schema_mode="openapi")
    assert (info.value.tool, info.value.dialect, info.value.keyword) == ("tree", "gemini", "$ref")
    declare("gemini", [spec])


# ---- inputs ----------------------------------------------------------------------------------------------------------


def test_declare_accepts_registry_tools():
    """A toolwire.Tool built from a function declares like its schema says."""
    def lookup(order_id: str, verbose: bool = False) -> str:
        """Look an order up."""
        return order_id

    tool = toolwire.Tool.from_function(lookup, effect="read")
    declaration, losses = declare_tool("openai-chat", tool)
    assert declaration["function"]["name"] == "lookup"
    assert declaration["function"]["description"] == "Look an order up."
    assert declaration["function"]["parameters"]["required"] == ["order_id"]
    strict, _ = declare_tool("openai-chat", tool, strict=True)
    assert strict["function"]["parameters"]["properties"]["verbose"]["type"] == ["boolean", "null"]


def test_duplicate_names_are_refused():
    """Two tools with one name raise DuplicateToolError."""
    with pytest.raises(DuplicateToolError):
        declare("anthropic", [SEARCH, SEARCH])


@pytest.mark.parametrize("doc", [
    [{"name": "a", "description": "d", "input_schema": SEARCH_SCHEMA}],
    {"tools": [{"name": "a", "description": "d", "inputSchema": SEARCH_SCHEMA}]},
    {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "description": "d", "inputSchema": SEARCH_SCHEMA}]}},
    [{"type": "function", "function": {"name": "a", "description": "d", "parameters": SEARCH_SCHEMA}}],
    [{"type": "function", "name": "a", "description": "d", "parameters": SEARCH_SCHEMA, "strict": False}],
    [{"functionDeclarations": [{"name": "a", "description": "d", "parametersJsonSchema": SEARCH_SCHEMA}]}],
    [{"type": "custom", "name": "a", "description": "d", "input_schema": SEARCH_SCHEMA}],
], ids=["canonical", "mcp", "mcp-jsonrpc", "chat", "responses", "gemini", "anthropic-typed"])
def test_load_tools_shapes(doc):
    """Canonical lists, MCP tools/list results and the dialects' own tools arrays all load to one spec."""
    assert load_tools(doc) == [ToolSpec(name="a", description="d", input_schema=SEARCH_SCHEMA)]


@pytest.mark.parametrize("doc", [
    {"nope": []}, "tools", [1], [{"description": "no name"}],
    [{"name": "a", "input_schema": {"type": "string"}}],
    [{"name": "a", "input_schema": {"type": "object", "properties": {"x": {"type": 5}}}}],
    [{"functionDeclarations": [{"name": "a", "parameters": {"type": "OBJECT"}}]}],
], ids=["no-tools", "string", "number", "no-name", "not-object", "bad-schema", "openapi"])
def test_load_tools_refuses_unusable(doc):
    """Documents that are not tool lists, or hold invalid schemas, raise ToolDeclarationError."""
    with pytest.raises(ToolDeclarationError):
        load_tools(doc)


# ---- custom (free-text) tools ---------------------------------------------------------------------------------


class FreeText:
    """A tool-like object as ``Tool.custom`` builds it: ``kind == "custom"``, a Responses ``format`` (or None), and
    the text input's schema."""

    def __init__(self, name: str, description: str = "", format: dict | None = None, kind: str = "custom") -> None:
        self.name = name
        self.description = description
        self.kind = kind
        self.format = format
        self.input_schema = {"type": "string"}


LARK = {"type": "grammar", "syntax": "lark", "definition": 'start: "SELECT " /[a-z_]+/'}
REGEX = {"type": "grammar", "syntax": "regex", "definition": r"^\d{4}-\d{2}-\d{2}$"}
FORMATS = {"none": None, "text": {"type": "text"}, "lark": LARK, "regex": REGEX}
OPENAI = ("openai-chat", "openai-responses")
NO_CUSTOM = ("anthropic", "gemini", "gemini-interactions")


def custom_tools() -> list[Any]:
    """The ways a custom tool reaches ``declare``: a tool-like object, a mapping and a ``ToolSpec`` (and
    ``Tool.custom`` where it exists)."""
    tools: list[Any] = [FreeText("run_sql", "Run a query", LARK),
                        {"name": "run_sql", "description": "Run a query", "kind": "custom", "format": LARK},
                        ToolSpec(name="run_sql", description="Run a query", kind="custom", format=LARK)]
    if hasattr(toolwire.Tool, "custom"):
        tools.append(toolwire.Tool.custom("run_sql", lambda text: text, effect="read", description="Run a query",
                                          format=LARK))
    return tools


def expected_custom(dialect: str, name: str, description: str, fmt: dict | None) -> dict:
    if dialect == "openai-responses":
        out: dict[str, Any] = {"type": "custom", "name": name}
        if description:
            out["description"] = description
        if fmt is not None:
            out["format"] = fmt
        return out
    inner: dict[str, Any] = {"name": name}
    if description:
        inner["description"] = description
    if fmt is not None:
        inner["format"] = fmt if fmt["type"] == "text" else {
            "type": "grammar", "grammar": {"syntax": fmt["syntax"], "definition": fmt["definition"]}}
    return {"type": "custom", "custom": inner}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("dialect", OPENAI)
def test_custom_tool_is_declared_as_a_custom_tool_for_openai(dialect, fmt):
    """A custom tool is declared as the dialect's custom tool (Responses flat, Chat nested, the grammar in each
    one's shape) next to function tools, and validates against the SDK's request types."""
    tool = FreeText("run_sql", "Run a read-only query", FORMATS[fmt])
    declaration = declare(dialect, [WEATHER, tool])
    assert declaration.fragment["tools"][1] == expected_custom(dialect, "run_sql", "Run a read-only query",
                                                               FORMATS[fmt])
    assert declaration.fragment["tools"][0]["type"] == "function"
    assert declaration.losses == ()
    VALIDATORS[dialect](declaration.fragment)
    bare = declare(dialect, [FreeText("free")]).fragment["tools"]
    assert bare == [expected_custom(dialect, "free", "", None)]
    VALIDATORS[dialect](declare(dialect, [FreeText("free")]).fragment)


@pytest.mark.parametrize("dialect", OPENAI)
def test_every_form_of_a_custom_tool_declares_the_same(dialect):
    """A tool-like object, a mapping with ``kind``, a ``ToolSpec`` and ``Tool.custom`` declare identically, through
    ``declare`` and ``declare_tool``."""
    want = expected_custom(dialect, "run_sql", "Run a query", LARK)
    for tool in custom_tools():
        assert declare(dialect, [tool]).fragment["tools"] == [want]
        assert declare_tool(dialect, tool) == (want, ())


@pytest.mark.parametrize("dialect", OPENAI)
def test_strict_leaves_custom_tools_as_they_are(dialect):
    """``strict`` rewrites function schemas only: a custom tool has no schema and no strict flag."""
    fragment = declare(dialect, [WEATHER, FreeText("run_sql", "Run a query", LARK)], strict=True).fragment
    assert fragment["tools"][1] == expected_custom(dialect, "run_sql", "Run a query", LARK)
    VALIDATORS[dialect](fragment)


@pytest.mark.parametrize("dialect", OPENAI)
def test_tool_choice_naming_a_custom_tool_uses_the_custom_form(dialect):
    """Forcing or allowing a custom tool names it as a custom tool (a function reference would not match it)."""
    tools = [WEATHER, FreeText("run_sql", "Run a query", LARK)]
    forced = declare(dialect, tools, choice=ToolChoice.tool("run_sql")).fragment
    allowed = declare(dialect, tools, choice=ToolChoice.allowed_tools(["get_weather", "run_sql"])).fragment
    if dialect == "openai-chat":
        assert forced["tool_choice"] == {"type": "custom", "custom": {"name": "run_sql"}}
        assert allowed["tool_choice"]["allowed_tools"]["tools"] == [
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "custom", "custom": {"name": "run_sql"}}]
    else:
        assert forced["tool_choice"] == {"type": "custom", "name": "run_sql"}
        assert allowed["tool_choice"]["tools"] == [{"type": "function", "name": "get_weather"},
                                                   {"type": "custom", "name": "run_sql"}]
    VALIDATORS[dialect](forced)
    VALIDATORS[dialect](allowed)
    assert translate_choice(dialect, ToolChoice.tool("run_sql"), ["get_weather", "run_sql"],
                            custom=["run_sql"]).fragment["tool_choice"] == forced["tool_choice"]


@pytest.mark.parametrize("dialect", NO_CUSTOM)
def test_custom_tool_is_refused_by_dialects_without_free_text_tools(dialect):
    """Anthropic, Gemini and Interactions have no free-text tools: declaring one raises DeclarationLimitError
    (a ToolDeclarationError) naming the tool and the dialect, never a function declaration in its place."""
    for tool in custom_tools():
        with pytest.raises(DeclarationLimitError) as info:
            declare(dialect, [WEATHER, tool])
        err = info.value
        assert isinstance(err, ToolDeclarationError)
        assert (err.tool, err.dialect, err.limit, err.value, err.rule) == ("run_sql", dialect, "tool_kind", "custom",
                                                                           "tool_kind")
        assert "run_sql" in str(err) and dialect in str(err) and "custom" in str(err)
        with pytest.raises(DeclarationLimitError, match="run_sql"):
            declare_tool(dialect, tool)
    with pytest.raises(DeclarationLimitError) as info:
        declare(dialect, [FreeText("a"), WEATHER, FreeText("b")])
    assert [f.tool for f in info.value.findings] == ["a", "b"]
    with pytest.raises(DeclarationLimitError, match="run_sql"):
        translate_choice(dialect, ToolChoice.auto(), ["run_sql"], custom=["run_sql"])


@pytest.mark.parametrize("tool", [
    FreeText("t", format={"type": "json"}),
    FreeText("t", format={"type": "grammar", "syntax": "pcre", "definition": "x"}),
    FreeText("t", format={"type": "grammar", "syntax": "lark"}),
    FreeText("t", format="text"),
    FreeText("t", kind="builtin"),
    {"name": "t", "kind": "custom", "format": {"type": "grammar", "syntax": "regex", "definition": ""}},
], ids=["unknown-type", "unknown-syntax", "no-definition", "not-an-object", "unknown-kind", "empty-definition"])
def test_malformed_custom_tool_is_refused(tool):
    """A custom tool format outside the SDK's two shapes, or an unknown tool kind, raises ToolDeclarationError."""
    for dialect in OPENAI:
        with pytest.raises(ToolDeclarationError, match="'t'"):
            declare(dialect, [tool])


@pytest.mark.parametrize("doc", [
    [{"type": "custom", "name": "run_sql", "description": "Run a query", "format": LARK}],
    [{"type": "custom", "custom": {"name": "run_sql", "description": "Run a query",
                                   "format": {"type": "grammar", "grammar": {"syntax": "lark",
                                                                             "definition": LARK["definition"]}}}}],
    [{"name": "run_sql", "description": "Run a query", "kind": "custom", "format": LARK}],
], ids=["responses", "chat", "canonical"])
def test_load_tools_reads_custom_tools(doc):
    """A custom tool in a Responses or Chat tools array (or canonical with ``kind``) loads as a custom spec, not
    as a function without parameters, and declares back to the same entry."""
    (spec,) = load_tools(doc)
    assert (spec.name, spec.kind, spec.format) == ("run_sql", "custom", LARK)
    for dialect in OPENAI:
        assert declare(dialect, [spec]).fragment["tools"] == [expected_custom(dialect, "run_sql", "Run a query",
                                                                              LARK)]


# ---- the declare command -------------------------------------------------------------------------------------------


@pytest.fixture
def tools_file(tmp_path):
    def write(doc: Any) -> str:
        path = tmp_path / "tools.json"
        path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
        return str(path)
    return write


def test_cli_declare_prints_fragment(tools_file, capsys):
    """declare prints the fragment (tools, tool_choice, parallel_tool_calls) as JSON and exits 0."""
    path = tools_file({"tools": [{"name": "search_docs", "description": "Search the docs",
                                  "inputSchema": SEARCH_SCHEMA}]})
    code = main(["declare", path, "--provider", "openai-chat", "--choice", "tool:search_docs", "--no-parallel"])
    out = capsys.readouterr().out
    assert code == 0
    fragment = json.loads(out)
    assert fragment == {"tools": GOLDEN_DEFAULT["openai-chat"]["tools"][1:],
                        "tool_choice": {"type": "function", "function": {"name": "search_docs"}},
                        "parallel_tool_calls": False}
    validate_openai_chat(fragment)


def test_cli_declare_reports_approximations_on_stderr(tools_file, capsys):
    """Losses and nearest equivalents go to stderr; stdout stays one JSON document."""
    path = tools_file([{"name": "a", "input_schema": {"type": "object", "properties": {
        "n": {"type": "integer", "enum": [1, 2]}}}}, SEARCH])
    code = main(["declare", path, "--provider", "gemini", "--schema-mode", "openapi", "--choice", "allowed:a",
                 "--no-parallel"])
    captured = capsys.readouterr()
    assert code == 0
    validate_gemini(json.loads(captured.out))
    assert "allowed_auto_filtered" in captured.err and "parallel_not_expressible" in captured.err
    assert "$.properties.n.enum" in captured.err


def test_cli_declare_strict_refusal_exits_1(tools_file, capsys):
    """A schema strict mode cannot express: exit 1 with the construct named on stderr."""
    path = tools_file([{"name": "a", "input_schema": {"type": "object", "patternProperties": {
        "^x": {"type": "string"}}}}])
    assert main(["declare", path, "--provider", "openai-chat", "--strict"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "patternProperties" in captured.err


def test_cli_declare_limit_exits_1(tools_file, capsys):
    """A name over OpenAI's limit: exit 1 naming the tool and the limit."""
    name = "x" * 65
    path = tools_file([{"name": name, "input_schema": {"type": "object"}}])
    assert main(["declare", path, "--provider", "openai-responses"]) == 1
    err = capsys.readouterr().err
    assert name in err and "name_length" in err and "64" in err


def test_cli_declare_custom_tool_where_there_are_none_exits_1(tools_file, capsys):
    """A Responses custom tool declared for Anthropic: exit 1 naming the tool, the dialect and the kind."""
    path = tools_file([{"type": "custom", "name": "run_sql", "description": "Run a query", "format": LARK}])
    assert main(["declare", path, "--provider", "anthropic"]) == 1
    err = capsys.readouterr().err
    assert "anthropic: tool 'run_sql' is a custom tool, which anthropic cannot declare" in err
    assert main(["declare", path, "--provider", "openai-chat"]) == 0
    assert json.loads(capsys.readouterr().out)["tools"] == [expected_custom("openai-chat", "run_sql", "Run a query",
                                                                            LARK)]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"tools": "x"}),
                                     json.dumps([{"name": "a", "input_schema": {"type": "array"}}]), None])
def test_cli_declare_unusable_file_exits_1(tools_file, tmp_path, capsys, content):
    """An unreadable, non-JSON or invalid TOOLS.json exits 1 with a message on stderr."""
    path = tools_file(content) if content is not None else str(tmp_path / "missing.json")
    assert main(["declare", path, "--provider", "anthropic"]) == 1
    assert "toolwire declare" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--provider", "anthropic", "--choice", "sometimes"],
    ["--provider", "anthropic", "--choice", "tool:missing"],
    ["--provider", "nope"],
    [],
    ["--provider", "gemini", "--schema-mode", "yaml"],
])
def test_cli_declare_usage_errors_exit_2(tools_file, capsys, argv):
    """A bad choice, a choice naming an undeclared tool, an unknown provider or a missing option exit 2."""
    path = tools_file([SEARCH])
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(["declare", path, *argv]))
    assert info.value.code == 2
    assert capsys.readouterr().out == ""


def test_strict_refusals_of_every_tool_are_collected():
    """Strict mode refusing several tools raises for the first, carrying every refusal in errors, the limits
    the other tools break in findings, and the count of the others in its message."""
    open_map = {"type": "object",
                "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}}}
    one_of = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    plain = {"type": "object", "properties": {"y": {"type": "string"}}}
    with pytest.raises(StrictSchemaError) as info:
        declare("openai-chat", [_spec("tagger", open_map), _spec("fine", plain), _spec("matcher", one_of),
                                _spec("bad.name", plain)], strict=True)
    err = info.value
    assert [(e.tool, e.construct) for e in err.errors] == [("tagger", "additionalProperties"), ("matcher", "oneOf")]
    assert [(f.tool, f.limit) for f in err.findings] == [("bad.name", "name_pattern")]
    assert err.errors[0] is err and "(and 2 more)" in str(err) and "(and" not in err.message
    with pytest.raises(StrictSchemaError) as alone:
        declare("openai-chat", [_spec("tagger", open_map)], strict=True)
    assert alone.value.errors == (alone.value,) and alone.value.findings == () and "more" not in str(alone.value)
