"""Declarations people already write: the ``@toolwire.tool`` decorator, docstring parameter descriptions (Google,
NumPy, Sphinx), pydantic models, TypedDicts, dataclasses and ``Annotated`` descriptions as parameters, and the
``from_schema`` / ``from_mcp`` handler convention checked when the tool is built.

Every tool is dispatched through ``Dispatcher.run`` and ``arun`` from a response of every dialect, and declared
with ``toolwire.declare`` for every dialect. (No ``from __future__ import annotations`` here: handlers annotated
with classes local to a test must keep real annotations.)
"""

import asyncio
import dataclasses
import functools
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

import jsonschema_rs
import msgspec
import pydantic
import pytest
import typing_extensions
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire import Dispatcher, HandlerSignatureError, Registry, ResultKind, Tool, ToolDeclarationError
from toolwire.registry.tool import ArgumentsInvalid

from .bodies import PROVIDERS, body
from .conftest import ROOT

MODES = ("run", "arun")


def dispatch(provider: str, registry: Registry, calls: list[tuple[str, dict[str, Any]]], mode: str = "run"
             ) -> list[toolwire.ToolResult]:
    """Parse one ``provider`` response carrying ``calls`` (name, args) and dispatch it with ``run`` or ``arun``."""
    turn = toolwire.parse(provider, body(provider, [(f"call_{i}", name, args) for i, (name, args) in
                                                     enumerate(calls)]))
    dispatcher = Dispatcher(registry)
    if mode == "arun":
        return asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    return dispatcher.run(turn, conversation_id="c")


def invalid(tool: Tool, args: Any) -> ArgumentsInvalid:
    with pytest.raises(ArgumentsInvalid) as info:
        tool.validate(args)
    return info.value


# ---- the declarations used across the tests ----------------------------------------------------------------------

class Guest(pydantic.BaseModel):
    name: str
    age: int | None = None


class BookingRequest(pydantic.BaseModel):
    """A table booking."""

    city: str = pydantic.Field(description="the city of the restaurant")
    guests: int = pydantic.Field(gt=0, description="how many people")
    lead: Guest


class Node(pydantic.BaseModel):
    """A tree node."""

    label: str
    children: list["Node"] = []


@dataclasses.dataclass
class Window:
    start: str
    days: int = 1


class Filters(TypedDict):
    cuisine: str
    max_price: int


BOOKED: list[Any] = []


@toolwire.tool(effect="read")
def get_weather(city: str, days: int = 1) -> dict:
    """Look up the weather.

    Forecasts come from the national service.

    Args:
        city: the city to look up
        days: how many days ahead
    """
    return {"city": city, "days": days}


@toolwire.tool(effect="write", idempotency_key=lambda args: f"{args['city']}:{args['lead']['name']}")
def book(req: BookingRequest) -> str:
    BOOKED.append(req)
    return f"booked {req.guests} in {req.city} for {req.lead.name}"


@toolwire.tool(effect="write")
def book_table(req: BookingRequest, note: Annotated[str, pydantic.Field(max_length=20)] = "") -> str:
    """Book a table.

    :param req: the booking
    :param note: a note for the restaurant
    """
    return f"{req.city}/{req.guests}/{note}"


@toolwire.tool(effect="read")
def find_restaurants(window: Window, filters: Filters,
                     area: Annotated[str, msgspec.Meta(description="a neighbourhood")] = "centre") -> dict:
    """Find restaurants.

    Parameters
    ----------
    window : Window
        when to eat
    filters : Filters
        what to look for
    area : str
        ignored: the Meta description wins
    """
    return {"start": window.start, "days": window.days, "cuisine": filters["cuisine"], "area": area,
            "window_is_a_dataclass": isinstance(window, Window), "filters_is_a_dict": isinstance(filters, dict)}


@toolwire.tool(effect="read")
def count_nodes(tree: Node) -> int:
    def size(n: Node) -> int:
        return 1 + sum(size(c) for c in n.children)
    return size(tree)


TOOLS = [get_weather, book, book_table, find_restaurants, count_nodes]

VALID = [
    ("get_weather", {"city": "Lisbon"}, {"city": "Lisbon", "days": 1}),
    ("book", {"city": "Porto", "guests": 2, "lead": {"name": "Ana"}}, "booked 2 in Porto for Ana"),
    ("book_table", {"req": {"city": "Braga", "guests": 4, "lead": {"name": "Rui"}}, "note": "window"},
     "Braga/4/window"),
    ("find_restaurants", {"window": {"start": "2025-06-01"}, "filters": {"cuisine": "fish", "max_price": 30}},
     {"start": "2025-06-01", "days": 1, "cuisine": "fish", "area": "centre", "window_is_a_dataclass": True,
      "filters_is_a_dict": True}),
    ("count_nodes", {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}, 3),
]

INVALID = [
    ("get_weather", {"city": "Lisbon", "days": "2"}, "`$.days`"),
    ("book", {"city": "Porto", "guests": 0, "lead": {"name": "Ana"}}, "`$.guests`"),
    ("book", {"city": "Porto", "guests": 2, "lead": {"name": 7}}, "`$.lead.name`"),
    ("book_table", {"req": {"city": "Braga", "guests": "4", "lead": {"name": "Rui"}}}, "`$.req.guests`"),
    ("book_table", {"req": {"city": "Braga", "guests": 4, "lead": {"name": "Rui"}}, "notes": "x"}, "`$.notes`"),
    ("find_restaurants", {"window": {"start": "x", "days": "1"}, "filters": {"cuisine": "f", "max_price": 1}},
     "`$.window.days`"),
    ("find_restaurants", {"window": {"start": "x"}, "filters": {"cuisine": "f", "max_price": 1.5}},
     "`$.filters.max_price`"),
    ("count_nodes", {"label": "a", "children": [{"label": "b", "children": [{"label": 3}]}]},
     "`$.children[0].children[0].label`"),
]


# ---- the decorator ----------------------------------------------------------------------------------------------

def test_decorator_gives_the_tool_from_function_would():
    """@toolwire.tool(effect=...) returns a Tool equal to Tool.from_function's; the function is its handler."""
    assert isinstance(get_weather, Tool)
    twin = Tool.from_function(get_weather.handler, effect="read")
    assert (get_weather.name, get_weather.effect, get_weather.input_schema, get_weather.description) == \
        (twin.name, twin.effect, twin.input_schema, twin.description)
    assert get_weather.handler(city="Oslo") == {"city": "Oslo", "days": 1}
    assert toolwire.tool(get_weather.handler, effect="read").input_schema == twin.input_schema


def test_decorator_passes_every_from_function_option():
    """name, description, timeout and idempotency_key reach the Tool."""
    def key(args: dict) -> str:
        return args["day"]

    @toolwire.tool(effect="write", name="save_day", description="Save a day.", timeout=5, idempotency_key=key)
    def save(day: str) -> str:
        """Ignored: description wins."""
        return day

    assert (save.name, save.description, save.timeout, save.effect, save.idempotency_key) == \
        ("save_day", "Save a day.", 5.0, "write", key)
    assert toolwire.tool(effect="read", timeout=None, name="t")(save.handler).timeout is None


def test_decorator_without_an_effect_is_a_clear_error():
    """A bare @toolwire.tool, or one without effect, raises ToolDeclarationError saying how to write it."""
    with pytest.raises(ToolDeclarationError) as info:
        @toolwire.tool
        def search(query: str) -> str:
            return query
    message = str(info.value)
    assert "'search'" in message and 'effect="read"' in message and 'effect="write"' in message
    assert info.value.tool == "search" and "effect" in info.value.rule
    with pytest.raises(ToolDeclarationError, match="needs an effect"):
        toolwire.tool()
    with pytest.raises(ToolDeclarationError, match="needs an effect for 'lookup'"):
        toolwire.tool(name="lookup", timeout=3)


def test_decorator_refuses_a_bad_effect_a_positional_effect_and_a_key_on_a_read():
    """effect="delete", @toolwire.tool("read") and an idempotency_key on a read fail where the function is."""
    with pytest.raises(ToolDeclarationError, match="'read' or 'write'"):
        toolwire.tool(effect="delete", name="erase")(lambda x: x)
    with pytest.raises(ToolDeclarationError, match="by keyword"):
        toolwire.tool("read")
    with pytest.raises(ToolDeclarationError, match="for writes"):
        @toolwire.tool(effect="read", idempotency_key=lambda a: "k")
        def look(q: str) -> str:
            return q


def test_decorator_is_exported_from_toolwire_and_toolwire_registry():
    """toolwire.tool is toolwire.registry.tool, both listed in __all__; the tool module still imports by name."""
    import toolwire.registry

    assert toolwire.tool is toolwire.registry.tool and callable(toolwire.tool)
    assert "tool" in toolwire.__all__ and "tool" in toolwire.registry.__all__
    assert "HandlerSignatureError" in toolwire.__all__ and "HandlerSignatureError" in toolwire.registry.__all__
    from toolwire.registry.tool import Tool as ToolClass
    assert ToolClass is Tool


# ---- docstrings ---------------------------------------------------------------------------------------------------

DOCSTRINGS = {
    "google": """Find flights.

        Searches every airline.

        Args:
            origin: the airport to leave from
            destination (str): the airport to arrive at,
                as an IATA code
            ghost: documented but not a parameter

        Returns:
            The flights found.
        """,
    "numpy": """Find flights.

        Searches every airline.

        Parameters
        ----------
        origin : str
            the airport to leave from
        destination : str
            the airport to arrive at,
            as an IATA code
        ghost : int
            documented but not a parameter

        Returns
        -------
        list
            The flights found.
        """,
    "sphinx": """Find flights.

        Searches every airline.

        :param origin: the airport to leave from
        :param str destination: the airport to arrive at,
            as an IATA code
        :param ghost: documented but not a parameter
        :returns: The flights found.
        """,
}


def flights_with(doc: str | None):
    def find_flights(origin: str, destination: str, passengers: int = 1) -> list:
        return [origin, destination, passengers]

    find_flights.__doc__ = doc
    return find_flights


@pytest.mark.parametrize("style", sorted(DOCSTRINGS))
def test_parameter_descriptions_come_from_google_numpy_and_sphinx_docstrings(style):
    """Each documented parameter's text becomes its property's description; the summary the tool's description."""
    tool = Tool.from_function(flights_with(DOCSTRINGS[style]), effect="read")
    props = tool.input_schema["properties"]
    assert props["origin"]["description"] == "the airport to leave from"
    assert re.sub(r"\s+", " ", props["destination"]["description"]) == "the airport to arrive at, as an IATA code"
    assert "description" not in props["passengers"]
    assert set(props) == {"origin", "destination", "passengers"}  # "ghost" is ignored
    assert tool.description == "Find flights.\n\nSearches every airline."


def test_descriptions_declared_on_the_type_win_over_the_docstring():
    """msgspec.Meta and pydantic.Field descriptions are kept; the docstring only fills in the others."""
    def plan(a: Annotated[int, msgspec.Meta(description="from Meta")], b: int) -> int:
        """Plan.

        Args:
            a: from the docstring
            b: also from the docstring
        """
        return a + b

    def plan_p(a: Annotated[int, pydantic.Field(description="from Field")], b: int) -> int:
        return a + b

    plan_p.__doc__ = plan.__doc__
    for fn, declared in ((plan, "from Meta"), (plan_p, "from Field")):
        props = Tool.from_function(fn, effect="read").input_schema["properties"]
        assert props["a"]["description"] == declared
        assert props["b"]["description"] == "also from the docstring"


def test_a_model_parameter_documented_in_the_docstring_takes_that_description():
    """A parameter's docstring text replaces its type's own docstring; a Field description on it would win."""
    props = book_table.input_schema["properties"]
    assert props["req"]["description"] == "the booking"
    assert props["note"]["description"] == "a note for the restaurant"
    assert book_table.description == "Book a table."


def test_an_explicit_description_replaces_the_docstring_summary():
    """description= replaces the summary; parameter descriptions still come from the docstring."""
    tool = Tool.from_function(flights_with(DOCSTRINGS["google"]), effect="read", description="Flights.")
    assert tool.description == "Flights."
    assert tool.input_schema["properties"]["origin"]["description"] == "the airport to leave from"


@pytest.mark.parametrize("doc", [
    None, "", "   ", "Args:", "Summary.\n\nArgs:\n", "Summary.\n\n:param x y z w: broken\n:raises: nothing",
    "Summary.\n\n@param a b c d: epydoc gone wrong", "Parameters\n----------\n", ":::\n::\n@@@",
])
def test_docstrings_that_do_not_parse_never_break_the_declaration(doc):
    """Odd or malformed docstrings still give a tool; its description is text, no parameter is described wrongly."""
    tool = Tool.from_function(flights_with(doc), effect="read")
    assert isinstance(tool.description, str)
    assert all("description" not in p for p in tool.input_schema["properties"].values())


@given(st.text(max_size=300))
def test_any_docstring_gives_a_tool(doc):
    """Whatever text the docstring holds, the tool is declared and its schema still has exactly the parameters."""
    tool = Tool.from_function(flights_with(doc), effect="read")
    assert set(tool.input_schema["properties"]) == {"origin", "destination", "passengers"}
    assert isinstance(tool.description, str)


WORDS = st.lists(st.sampled_from(["the", "airport", "code", "of", "origin", "leave", "from", "IATA", "city", "3"]),
                 min_size=1, max_size=8).map(" ".join)


@given(style=st.sampled_from(["google", "numpy", "sphinx"]), origin=WORDS, destination=WORDS)
def test_generated_parameter_descriptions_reach_the_schema_in_every_style(style, origin, destination):
    """Any one-line descriptions written in any of the three styles become the properties' descriptions."""
    if style == "google":
        doc = f"Find flights.\n\nArgs:\n    origin: {origin}\n    destination: {destination}\n"
    elif style == "numpy":
        doc = (f"Find flights.\n\nParameters\n----------\norigin : str\n    {origin}\n"
               f"destination : str\n    {destination}\n")
    else:
        doc = f"Find flights.\n\n:param origin: {origin}\n:param destination: {destination}\n"
    tool = Tool.from_function(flights_with(doc), effect="read")
    props = tool.input_schema["properties"]
    assert (props["origin"]["description"], props["destination"]["description"]) == (origin, destination)
    assert tool.description == "Find flights."


# ---- models as parameters -----------------------------------------------------------------------------------------

def test_a_single_pydantic_model_signature_takes_the_models_fields_as_arguments():
    """def book(req: BookingRequest): the fields are the top-level properties; the handler gets the instance."""
    schema = book.input_schema
    assert set(schema["properties"]) == {"city", "guests", "lead"} and schema["required"] == ["city", "guests", "lead"]
    assert schema["properties"]["guests"] == {"description": "how many people", "exclusiveMinimum": 0,
                                              "type": "integer"}
    assert schema["properties"]["lead"]["properties"]["name"] == {"type": "string"}
    assert "$defs" not in schema and "title" not in json.dumps(schema)
    assert book.description == "A table booking."  # the model's docstring, the function having none
    assert "description" not in schema
    value = book.validate({"city": "Porto", "guests": 2, "lead": {"name": "Ana"}})
    assert isinstance(value, BookingRequest) and book.invoke(value) == "booked 2 in Porto for Ana"


def test_a_pydantic_model_among_other_parameters_is_one_nested_property():
    """With other parameters, a model is a property named after its parameter, and errors keep that prefix."""
    props = book_table.input_schema["properties"]
    assert set(props) == {"req", "note"} and props["req"]["type"] == "object"
    assert props["note"] == {"default": "", "description": "a note for the restaurant", "maxLength": 20,
                             "type": "string"}
    assert book_table.input_schema["additionalProperties"] is False
    err = invalid(book_table, {"req": {"city": "B", "guests": 1, "lead": {"name": "R", "age": "9"}}})
    assert err.path == "$.req.lead.age" and "- at `$.req.lead.age`" in err.message


def test_pydantic_validation_is_strict_refuses_unknown_names_and_reports_every_path():
    """No "2" -> 2; unknown names are refused; up to three errors are listed, each with its path."""
    err = invalid(book_table, {"req": {"city": 1, "guests": "2", "lead": {}}, "nots": "x"})
    assert err.message.count(" - at `") == 3 and "(more errors not shown)" in err.message
    assert "`$.req.city`" in err.message and "`$.req.guests`" in err.message
    assert "Extra inputs are not permitted - at `$.nots`" in invalid(
        book_table, {"req": {"city": "B", "guests": 1, "lead": {"name": "R"}}, "nots": "x"}).message
    assert "Field required - at `$.req`" in invalid(book_table, {}).message


def test_typeddict_and_dataclass_parameters_are_described_and_converted_by_msgspec():
    """A dataclass parameter arrives as the dataclass, a TypedDict one as a dict; both schemas are inlined."""
    props = find_restaurants.input_schema["properties"]
    assert props["window"] == {"description": "when to eat", "type": "object",
                               "properties": {"start": {"type": "string"},
                                              "days": {"type": "integer", "default": 1}},
                               "required": ["start"]}
    assert props["filters"]["required"] == ["cuisine", "max_price"]
    assert props["area"]["description"] == "a neighbourhood"
    value = find_restaurants.validate({"window": {"start": "s"}, "filters": {"cuisine": "c", "max_price": 3}})
    assert find_restaurants.invoke(value)["window_is_a_dataclass"]
    assert invalid(find_restaurants, {"window": {"start": "s"}, "filters": {"cuisine": "c"}}).path == "$.filters"


def test_a_recursive_pydantic_model_keeps_a_ref_that_resolves_against_the_root():
    """A recursive model keeps its definition in the root's $defs, and the schema validates what pydantic does."""
    schema = count_nodes.input_schema
    assert set(schema["$defs"]) == {"Node"}
    validator = jsonschema_rs.validator_for(schema)
    assert validator.is_valid({"label": "a", "children": [{"label": "b", "children": []}]})
    assert not validator.is_valid({"label": "a", "children": [{"label": 1}]})
    assert count_nodes.description == "A tree node."


def test_pydantic_dataclasses_and_field_metadata_go_through_pydantic():
    """A pydantic dataclass parameter and Annotated[..., Field(...)] constraints are enforced by pydantic."""
    @pydantic.dataclasses.dataclass
    class Slot:
        hour: Annotated[int, pydantic.Field(ge=0, le=23)]

    def reserve(slot: Slot, seats: Annotated[int, pydantic.Field(gt=0)] = 2) -> int:
        return slot.hour * seats

    tool = Tool.from_function(reserve, effect="write")
    assert tool.input_schema["properties"]["slot"]["properties"]["hour"] == {"maximum": 23, "minimum": 0,
                                                                             "type": "integer"}
    assert tool.invoke(tool.validate({"slot": {"hour": 20}})) == 40
    assert invalid(tool, {"slot": {"hour": 24}}).path == "$.slot.hour"
    assert invalid(tool, {"slot": {"hour": 1}, "seats": 0}).path == "$.seats"


def test_parameters_named_like_model_attributes_or_private_names_work_with_pydantic():
    """Parameter names such as schema, copy or _hint are tool arguments like any other on the pydantic path."""
    def odd(schema: Guest, copy: int = 1, _hint: str = "") -> str:
        return f"{schema.name}{copy}{_hint}"

    tool = Tool.from_function(odd, effect="read")
    assert set(tool.input_schema["properties"]) == {"schema", "copy", "_hint"}
    assert tool.invoke(tool.validate({"schema": {"name": "a"}, "_hint": "!"})) == "a1!"
    assert invalid(tool, {"schema": {"name": "a"}, "p0": {"name": "b"}}).path == "$.p0"


def test_mixing_msgspec_structs_into_a_pydantic_signature_is_refused_clearly():
    """pydantic cannot describe a msgspec Struct: the error names the tool and says why."""
    class Point(msgspec.Struct):
        x: int

    def place(where: Point, who: Guest) -> None: ...

    with pytest.raises(ToolDeclarationError) as info:
        Tool.from_function(place, effect="write")
    assert info.value.tool == "place" and "no msgspec Structs" in str(info.value)


def test_typeddicts_and_dataclasses_holding_pydantic_models_go_through_pydantic():
    """A TypedDict or dataclass whose fields are pydantic models is validated by pydantic, nested paths kept."""
    class Party(typing_extensions.TypedDict):
        lead: Guest

    @dataclasses.dataclass
    class Table:
        guest: Guest

    def seat(party: Party, table: Table) -> str:
        return f"{party['lead'].name}/{table.guest.name}"

    tool = Tool.from_function(seat, effect="write")
    assert tool.invoke(tool.validate({"party": {"lead": {"name": "a"}}, "table": {"guest": {"name": "b"}}})) == "a/b"
    assert invalid(tool, {"party": {"lead": {"name": 1}}, "table": {"guest": {"name": "b"}}}).path == \
        "$.party.lead.name"


def test_a_pydantic_field_as_a_default_is_refused_with_the_annotated_spelling():
    """def f(x: int = Field(gt=0)) is refused, saying to write Annotated[int, Field(...)] = default."""
    def limit(n: int = pydantic.Field(default=1, gt=0)) -> int:
        return n

    with pytest.raises(ToolDeclarationError, match=r"n: Annotated\[T, Field\(\.\.\.\)\] = default"):
        Tool.from_function(limit, effect="read")


def test_pydantic_is_imported_only_when_a_handler_uses_it():
    """Declaring and dispatching msgspec, dataclass and TypedDict tools leaves pydantic unimported."""
    code = textwrap.dedent("""
        import dataclasses, sys
        from typing import TypedDict
        import toolwire

        @dataclasses.dataclass
        class Window:
            start: str

        class Filters(TypedDict):
            cuisine: str

        @toolwire.tool(effect="read")
        def find(window: Window, filters: Filters, limit: int = 3) -> str:
            '''Find.

            Args:
                limit: how many
            '''
            return window.start + filters["cuisine"]

        turn = toolwire.parse("anthropic", b'{"type": "message", "id": "m1", "role": "assistant", "content": '
            b'[{"type": "tool_use", "id": "t1", "name": "find", "input": {"window": {"start": "a"}, '
            b'"filters": {"cuisine": "b"}}}], "stop_reason": "tool_use"}')
        [result] = toolwire.Dispatcher(toolwire.Registry([find])).run(turn, conversation_id="c")
        assert result.content == "ab", result
        toolwire.declare("gemini", [find])
        print("pydantic" in sys.modules)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ---- dispatching them in every dialect ----------------------------------------------------------------------------

def dispatch_cases(provider: str, mode: str, cases: list[tuple[str, dict[str, Any], Any]]
                   ) -> list[toolwire.ToolResult]:
    """Dispatch one response carrying a call per case (name, args, expected) through the declared TOOLS."""
    BOOKED.clear()
    return dispatch(provider, Registry(TOOLS), [(name, args) for name, args, _ in cases], mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_declared_tools_run_with_valid_arguments_in_every_dialect(provider, mode):
    """One call per declaration style in one response: every call is ok with what its handler returned."""
    results = dispatch_cases(provider, mode, VALID)
    assert [(r.kind, r.content) for r in results] == [(ResultKind.OK, expected) for _, _, expected in VALID]
    assert len(BOOKED) == 1 and isinstance(BOOKED[0], BookingRequest)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_are_answered_with_their_json_path_in_every_dialect(provider, mode):
    """Each invalid call is invalid_arguments naming the JSON path of the offending value; nothing runs."""
    results = dispatch_cases(provider, mode, INVALID)
    for result, (_, _, path) in zip(results, INVALID, strict=True):
        assert result.kind is ResultKind.INVALID_ARGUMENTS and result.is_error and path in result.content
    assert BOOKED == []


NOT_AN_INT = st.one_of(st.text(max_size=5), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                       st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                            max_size=2))


@given(provider=st.sampled_from(PROVIDERS), guests=NOT_AN_INT, nested=st.booleans())
def test_any_guest_count_that_is_not_an_integer_is_refused_at_its_path(provider, guests, nested):
    """Whatever non-integer the model sends for guests, the answer names `$.guests` (or `$.req.guests`)."""
    req = {"city": "Porto", "guests": guests, "lead": {"name": "Ana"}}
    name, args, path = ("book_table", {"req": req}, "`$.req.guests`") if nested else ("book", req, "`$.guests`")
    [result] = dispatch(provider, Registry(TOOLS), [(name, args)])
    assert result.kind is ResultKind.INVALID_ARGUMENTS and path in result.content


# ---- declaring them -------------------------------------------------------------------------------------------------

def _declared_schemas(provider: str, fragment: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    from toolwire.codecs import dialect_for

    if provider not in ("openai-chat", "anthropic", "gemini", "openai-responses", "gemini-interactions"):
        # another dialect: its declarations part finds its tools (tools_in), their names (read_tool) and schemas
        part = dialect_for(provider).declarations
        return {part.read_tool(t, i)["name"]: part.schema_of(t) for i, t in enumerate(part.tools_in(fragment))}
    tools = fragment["tools"]
    if provider == "openai-chat":
        return {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if provider == "anthropic":
        return {t["name"]: t["input_schema"] for t in tools}
    if provider == "gemini":
        return {d["name"]: d["parametersJsonSchema"] for d in tools[0]["functionDeclarations"]}
    return {t["name"]: t["parameters"] for t in tools}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_declare_sends_the_declared_schemas_with_their_descriptions_in_every_dialect(provider):
    """toolwire.declare accepts every declaration style and sends each tool's schema and descriptions as built."""
    declaration = toolwire.declare(provider, TOOLS)
    schemas = _declared_schemas(provider, declaration.fragment)
    assert schemas == {t.name: t.input_schema for t in TOOLS}
    assert schemas["get_weather"]["properties"]["city"]["description"] == "the city to look up"
    assert "Forecasts come from the national service." in json.dumps(declaration.fragment)


def test_declare_in_strict_and_openapi_modes_accepts_the_non_recursive_declarations():
    """OpenAI strict mode and Gemini's OpenAPI subset take the generated schemas (refs inlined); the recursive
    one keeps working in strict mode and is refused, by name, in the OpenAPI subset only."""
    flat = [t for t in TOOLS if t is not count_nodes]
    for provider in ("openai-chat", "openai-responses"):
        toolwire.declare(provider, TOOLS, strict=True)
    toolwire.declare("gemini", flat, schema_mode="openapi")
    with pytest.raises(toolwire.SchemaConversionError, match="count_nodes"):
        toolwire.declare("gemini", [count_nodes], schema_mode="openapi")


def test_the_schema_holds_exactly_the_signatures_parameters():
    """Nothing but the handler's own parameters becomes a property (for each declaration style)."""
    assert {t.name: sorted(t.input_schema["properties"]) for t in TOOLS} == {
        "get_weather": ["city", "days"], "book": ["city", "guests", "lead"], "book_table": ["note", "req"],
        "find_restaurants": ["area", "filters", "window"], "count_nodes": ["children", "label"]}


@pytest.mark.skipif(not hasattr(toolwire, "ToolContext"), reason="toolwire.ToolContext is not in this tree yet")
def test_a_tool_context_parameter_never_reaches_the_schema():
    """A parameter annotated toolwire.ToolContext is left out of the schema, whatever the declaration style."""
    ctx_type = toolwire.ToolContext

    def with_ctx(req: BookingRequest, ctx: ctx_type) -> str:  # type: ignore[valid-type]
        return req.city

    def plain_with_ctx(city: str, ctx: ctx_type) -> str:  # type: ignore[valid-type]
        return city

    assert set(Tool.from_function(with_ctx, effect="write").input_schema["properties"]) == \
        {"city", "guests", "lead"}
    assert set(Tool.from_function(plain_with_ctx, effect="read").input_schema["properties"]) == {"city"}


# ---- the from_schema / from_mcp handler convention ---------------------------------------------------------------

SEARCH = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
          "required": ["query"]}


class SearchArgs(TypedDict):
    query: str


def written_for_keywords(query: str) -> str:
    return query


def named_like_a_property(query):
    return query


def annotated_as_a_model(args: Guest) -> str:
    return args.name


def two_required(query, limit):
    return query


def only_keywords(**kwargs):
    return kwargs


def keyword_only(*, args):
    return args


@pytest.mark.parametrize("handler,says", [
    (written_for_keywords, "annotated str, which a dict is not"),
    (named_like_a_property, "named like the schema property 'query'"),
    (annotated_as_a_model, "annotated Guest"),
    (two_required, "cannot be called that way"),
    (only_keywords, "cannot be called that way"),
    (keyword_only, "cannot be called that way"),
    (functools.partial(two_required, limit=3), "named like the schema property 'query'"),
], ids=["annotated-str", "named-like-a-property", "annotated-model", "two-required", "kwargs", "keyword-only",
        "partial"])
def test_from_schema_refuses_a_handler_that_would_not_get_the_argument_dict(handler, says):
    """A handler that cannot take the dict as one positional argument, or is written for keyword arguments, is
    refused when the tool is built, with what to do instead."""
    with pytest.raises(HandlerSignatureError) as info:
        Tool.from_schema("search", SEARCH, handler, effect="read")
    message = str(info.value)
    assert says in message and "Tool.from_function" in message and "args: dict" in message
    assert info.value.tool == "search" and info.value.rule == "handler(args: dict)"
    assert isinstance(info.value, toolwire.UsageError) and isinstance(info.value, ToolDeclarationError)


def test_from_mcp_and_the_constructor_check_the_handler_the_same_way():
    """Tool.from_mcp and Tool(...) apply the same check as from_schema."""
    entry = {"name": "search", "description": "Search.", "inputSchema": SEARCH}
    with pytest.raises(HandlerSignatureError):
        Tool.from_mcp(entry, written_for_keywords, effect="read")
    with pytest.raises(HandlerSignatureError):
        Tool("search", "Search.", SEARCH, "read", written_for_keywords)


class CallableHandler:
    def __call__(self, args):
        return args["query"]

    def method(self, args: dict) -> str:
        return args["query"]


async def async_handler(args: dict[str, Any]) -> str:
    return args["query"]


def optional_extra(args, *, verbose=False):
    return args["query"]


@pytest.mark.parametrize("handler", [
    lambda args: args["query"], lambda *a: a[0]["query"], CallableHandler(), CallableHandler().method,
    async_handler, optional_extra, functools.partial(optional_extra, verbose=True),
])
def test_from_schema_accepts_handlers_that_take_the_argument_dict(handler):
    """Unannotated, dict, Mapping, TypedDict, Any and *args handlers, callables, methods and partials are fine."""
    Tool.from_schema("search", SEARCH, handler, effect="read")


def test_from_schema_accepts_dict_annotations_and_a_property_name_annotated_as_a_dict():
    """Annotations a dict satisfies pass, even on a parameter named like a property (not `Any`); builtins pass."""
    def as_mapping(args: Mapping[str, Any]) -> str: ...
    def as_typeddict(args: SearchArgs) -> str: ...
    def as_optional(args: dict | None = None) -> str: ...
    def as_any(args: Any) -> str: ...
    def as_dict(query: dict) -> str: ...

    for handler in (as_mapping, as_typeddict, as_optional, as_any, as_dict, dict, print):
        Tool.from_schema("search", SEARCH, handler, effect="read")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_from_schema_handler_gets_the_argument_dict_in_every_dialect(provider, mode):
    """A dict handler declared with from_schema or from_mcp receives the validated argument object."""
    seen: list[Any] = []

    def search(args: dict) -> int:
        seen.append(args)
        return len(args)

    tools = [Tool.from_schema("search", SEARCH, search, effect="read"),
             Tool.from_mcp({"name": "mcp_search", "inputSchema": SEARCH}, search, effect="read")]
    results = dispatch(provider, Registry(tools), [("search", {"query": "q"}), ("mcp_search", {"query": "r"})],
                       mode)
    assert [r.kind for r in results] == [ResultKind.OK, ResultKind.OK]
    assert seen == [{"query": "q"}, {"query": "r"}]
