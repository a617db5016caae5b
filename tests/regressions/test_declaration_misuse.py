"""Declaration misuse: tool shapes from_function cannot serve are refused when declared, the shapes it accepts are
callable, invalid arguments are answered with a JSON path that exists in the arguments, and no exception raised
while converting arguments escapes the dispatcher."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
import pytest

import toolwire
from tests.bodies import body
from toolwire import Tool

ROOT = Path(__file__).resolve().parents[2]
_PATH = re.compile(r" - at `([^`]*)`")


def run(tool: Any, args: Any, provider: str = "anthropic") -> list[tuple[str, Any]]:
    turn = toolwire.parse(provider, body(provider, [("c1", tool.name, args)]))
    results = toolwire.Dispatcher(toolwire.Registry([tool])).run(turn, conversation_id="c")
    return [(r.kind.value, r.content) for r in results]


def arun(tool: Any, args: Any, provider: str = "openai-chat") -> list[tuple[str, Any]]:
    turn = toolwire.parse(provider, body(provider, [("c1", tool.name, args)]))

    async def go() -> Any:
        return await toolwire.Dispatcher(toolwire.Registry([tool])).arun(turn, conversation_id="c")

    return [(r.kind.value, r.content) for r in asyncio.run(go())]


def python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this checkout's toolwire."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_method_decorated_in_its_class_body_is_refused() -> None:
    """@toolwire.tool on a method in its class body is refused; the bound method is declared."""
    with pytest.raises(toolwire.ToolDeclarationError, match=r"obj\.send"):
        class Service:
            @toolwire.tool(effect="write")
            def send(self, to: str) -> str:
                return f"sent to {to}"

    class Mailer:
        def send(self, to: str) -> str:
            return f"sent to {to}"

    tool = toolwire.tool(Mailer().send, effect="write")
    assert list(tool.input_schema["properties"]) == ["to"]
    assert run(tool, {"to": "x"}) == [("ok", "sent to x")]
    assert run(tool, {"self": "attacker", "to": "x"})[0][0] == "invalid_arguments"


def _base(a: int, b: str) -> str:
    return f"{a}{b}"


def test_partial_with_name_is_declared() -> None:
    """`functools.partial(f, a=1)` with name= declares a tool over the remaining parameters."""
    tool = Tool.from_function(functools.partial(_base, a=1), effect="read", name="p")
    assert "b" in tool.input_schema["properties"]
    assert run(tool, {"b": "x"}) == [("ok", "1x")]


class _Adder:
    def __call__(self, a: int) -> int:
        return a + 1


def test_callable_object_with_name_is_declared() -> None:
    """A callable object with name= declares a tool from its __call__ signature ."""
    tool = Tool.from_function(_Adder(), effect="read", name="adder")
    assert run(tool, {"a": 1}) == [("ok", 2)]


def test_from_schema_refuses_keyword_handler_annotated_any() -> None:
    """from_schema refuses `def search(query: Any)` for a schema with property `query` (written for keywords)."""
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def search(query: Any) -> list:
        return [query]

    with pytest.raises(toolwire.HandlerSignatureError):
        Tool.from_schema("search", schema, search, effect="read")


class _Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int


class _Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    bark: str


def _refs(node: Any) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, str) and v.startswith("#/"):
                out.append(v)
            out.extend(_refs(v))
    elif isinstance(node, list):
        for v in node:
            out.extend(_refs(v))
    return out


def test_discriminated_union_schema_has_no_dangling_refs() -> None:
    """Every `#/...` pointer left in a from_function schema resolves, discriminator mappings included."""
    def pet(p: Annotated[Union[_Cat, _Dog], pydantic.Field(discriminator="kind")]) -> str:
        return repr(p)

    schema = Tool.from_function(pet, effect="read").input_schema
    for ref in _refs(schema):
        node: Any = schema
        for part in ref[2:].split("/"):
            assert isinstance(node, dict) and part in node, f"dangling {ref} in {json.dumps(schema)}"
            node = node[part]


def test_plain_tool_declared_after_bare_import_pydantic() -> None:
    """After a bare `import pydantic`, `@toolwire.tool(effect="read")` declares a plain tool."""
    code = (
        "import pydantic, toolwire\n"
        "@toolwire.tool(effect='read')\n"
        "def f(a: int) -> int:\n"
        "    return a\n"
        "print(f.input_schema['properties'])\n"
    )
    proc = python(code)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert "AttributeError" not in proc.stderr


def test_defaulted_params_after_bare_import_pydantic() -> None:
    """A tool whose parameters have plain defaults is declared when pydantic is imported but pydantic.fields is not."""
    code = (
        "import sys, pydantic, toolwire\n"
        "assert 'pydantic.fields' not in sys.modules\n"
        "def g(a: int = 1, b: str = 'x') -> str:\n"
        "    return b * a\n"
        "t = toolwire.Tool.from_function(g, effect='read')\n"
    )
    proc = python(code)
    assert proc.returncode == 0, proc.stderr[-800:]


def test_msgspec_int_keyed_dict_accepts_json_object() -> None:
    """`d: dict[int, str]` accepts the JSON object `{"1": "a"}` the schema invites (JSON keys are strings)."""
    def f(d: dict[int, str]) -> str:
        return repr(d)

    t = Tool.from_function(f, effect="read")
    assert run(t, {"d": {"1": "a"}}) == [("ok", "{1: 'a'}")]


def test_msgspec_dict_key_error_names_a_json_path() -> None:
    """A bad key of `dict[int, str]` is reported at a well-formed JSON path under `$.d`."""
    def f(d: dict[int, str]) -> str:
        return repr(d)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"d": {"x": "a"}})
    assert kind == "invalid_arguments"
    paths = _PATH.findall(content)
    assert paths and all(p.startswith("$.d") for p in paths), content


class _A(pydantic.BaseModel):
    a: int


class _B(pydantic.BaseModel):
    b: str



def _paths(content: str) -> list[str]:
    return _PATH.findall(content)


def test_pydantic_union_of_models_error_path_is_json_path() -> None:
    """An error inside `Union[A, B]` is reported at paths that exist in the arguments (`$.y...`), not `$.y.A.a`."""
    def f(y: Union[_A, _B]) -> str:
        return repr(y)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"y": {"c": "s"}})
    assert kind == "invalid_arguments"
    assert set(_paths(content)) <= {"$.y", "$.y.a", "$.y.b", "$.y.c"}, content


def test_pydantic_union_of_scalars_error_path_is_json_path() -> None:
    """An error for `int | str` with pydantic metadata is reported at `$.x`, not at `$.x.int` / `$.x.str`."""
    def f(x: Annotated[Union[int, str], pydantic.Field(description="d")]) -> str:
        return repr(x)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"x": [1]})
    assert kind == "invalid_arguments"
    assert set(_paths(content)) == {"$.x"}, content


def test_pydantic_discriminated_union_error_path_is_json_path() -> None:
    """An error in a discriminated union member is reported at `$.p.lives`, not `$.p.cat.lives`."""
    def f(p: Annotated[Union[_Cat, _Dog], pydantic.Field(discriminator="kind")]) -> str:
        return repr(p)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"p": {"kind": "cat", "lives": "x"}})
    assert kind == "invalid_arguments"
    assert _paths(content) == ["$.p.lives"], content


def test_pydantic_dict_key_error_path_is_json_path() -> None:
    """A bad key of `dict[int, str]` (pydantic) is reported at `$.d.x`, not `$.d.x['[key]']`."""
    def f(d: Annotated[dict[int, str], pydantic.Field()]) -> str:
        return repr(d)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"d": {"x": "a"}})
    assert kind == "invalid_arguments"
    assert _paths(content) == ["$.d.x"], content


class _Picky(pydantic.BaseModel):
    a: int

    @pydantic.field_validator("a")
    @classmethod
    def _check(cls, v: int) -> int:
        if v == 1:
            raise KeyError("boom")
        return v


@dataclasses.dataclass
class _PickyDC:
    a: int

    def __post_init__(self) -> None:
        if self.a == 1:
            raise LookupError("boom")


def _picky_model(m: _Picky) -> str:
    return repr(m)


def _picky_dc(d: _PickyDC) -> str:
    return repr(d)


@pytest.mark.parametrize("fn,args", [(_picky_model, {"a": 1}), (_picky_dc, {"d": {"a": 1}})],
                         ids=["pydantic-validator", "dataclass-post-init"])
def test_validator_exception_is_answered_not_raised(fn, args) -> None:
    """A validator / __post_init__ raising KeyError is an answered call (not an exception out of Dispatcher.run)."""
    t = Tool.from_function(fn, effect="read")
    [(kind, _content)] = run(t, args)
    assert kind != "ok"


@pytest.mark.parametrize("fn,args", [(_picky_model, {"a": 1}), (_picky_dc, {"d": {"a": 1}})],
                         ids=["pydantic-validator", "dataclass-post-init"])
def test_validator_exception_is_answered_not_raised_async(fn, args) -> None:
    """Same with Dispatcher.arun: the call is answered, the exception does not escape."""
    t = Tool.from_function(fn, effect="read")
    [(kind, _content)] = arun(t, args)
    assert kind != "ok"


def test_validator_exception_does_not_block_other_calls() -> None:
    """One call whose validator raises must not keep the other calls of the turn from being answered."""
    ran: list[int] = []

    def w(x: int) -> str:
        ran.append(x)
        return "written"

    t = Tool.from_function(_picky_dc, effect="read")
    tw = Tool.from_function(w, effect="write")
    turn = toolwire.parse("anthropic", body("anthropic", [("c1", "w", {"x": 5}), ("c2", "_picky_dc", {"d": {"a": 1}})]))
    results = toolwire.Dispatcher(toolwire.Registry([t, tw])).run(turn, conversation_id="c")
    assert [r.kind.value for r in results][0] == "ok" and ran == [5]


def test_partial_binding_a_keyword_does_not_expose_it() -> None:
    """A parameter a partial binds by keyword is not a property: the model cannot override it."""
    tool = Tool.from_function(functools.partial(_base, a=1), effect="read", name="p")
    assert "a" not in tool.input_schema["properties"]
    assert run(tool, {"a": 2, "b": "x"})[0][0] == "invalid_arguments"


def test_partial_and_callable_object_without_name_are_told_to_pass_name() -> None:
    """A partial or callable object without name= is refused with a message saying to pass name=."""
    for fn in (functools.partial(_base, a=1), _Adder()):
        with pytest.raises(toolwire.ToolDeclarationError, match="name="):
            Tool.from_function(fn, effect="read")


def test_validator_exception_message_names_the_exception_type() -> None:
    """The invalid_arguments answer for a raising validator names the exception type and a JSON path."""
    t = Tool.from_function(_picky_dc, effect="read")
    [(kind, content)] = run(t, {"d": {"a": 1}})
    assert kind == "invalid_arguments"
    assert "LookupError" in content and _PATH.findall(content) == ["$"], content


def test_pydantic_non_identifier_dict_key_is_quoted_as_json() -> None:
    """An error under a dict key that is not an identifier is reported at `$.d["k k"]`."""
    def f(d: Annotated[dict[str, int], pydantic.Field()]) -> str:
        return repr(d)

    t = Tool.from_function(f, effect="read")
    [(kind, content)] = run(t, {"d": {"k k": "x"}})
    assert kind == "invalid_arguments"
    assert _paths(content) == ['$.d["k k"]'], content
