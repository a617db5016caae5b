"""A custom tool's declared ``format`` (a regex or a Lark grammar) is checked on the text the model sent before the
handler runs: a server that ignored the constraint (an OpenAI-compatible endpoint, a proxy) cannot reach the
handler with text outside it.

Every test goes through the public API (``toolwire.parse``, then ``Dispatcher.run`` / ``arun``) for every dialect
that declares custom tools.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool, ToolDeclarationError
from toolwire.codecs import dialects
from toolwire.registry import FORMAT_CHECK_MAX_CHARS, formats

from ..bodies import body
from ..test_codec_openai_responses import custom_item, encode, stream

K = ResultKind
MODES = ("sync", "async")
#: the dialects that can declare a custom (free-text) tool
CUSTOM = tuple(d.id for d in dialects() if "custom" in d.capabilities.tool_kinds)

REGEX = {"type": "grammar", "syntax": "regex", "definition": r"SELECT [a-z_]+ FROM [a-z_]+"}
#: a grammar as the OpenAI documentation writes them: a common import, an ignored terminal and the {m,n}
#: repetition of the Lark variant the Responses API reads
LARK = {"type": "grammar", "syntax": "lark", "definition": "\n".join([
    'start: "SELECT " columns " FROM " NAME',
    'columns: NAME ("," NAME){0,7}',
    "NAME: /[a-z_]+/",
    '%ignore " "',
])}
FORMATS = {"regex": (REGEX, "SELECT id FROM users"), "lark": (LARK, "SELECT id,name FROM users")}
#: texts a server that ignored the format could send: another statement, a second one after a newline, a prefix
OUTSIDE = ["DROP TABLE users", "SELECT id FROM users\nDROP TABLE users", "SELECT id FROM", ""]


def dispatch(mode: str, d: Dispatcher, turn: toolwire.Turn, **kw) -> list[toolwire.ToolResult]:
    if mode == "sync":
        return d.run(turn, **kw)
    return asyncio.run(d.arun(turn, **kw))


def sql_tool(fmt, seen: list[str], **kw) -> Tool:
    def run_sql(text: str) -> str:
        seen.append(text)
        return "3 rows"

    return Tool.custom("run_sql", run_sql, effect="write", format=fmt, **kw)


def custom_turn(provider: str, text: str) -> toolwire.Turn:
    turn = toolwire.parse(provider, body(provider, [("call_1", "run_sql", text)], custom=True))
    assert turn.calls[0].kind is toolwire.CallKind.CUSTOM and turn.runnable_calls
    return turn


def test_both_openai_dialects_declare_custom_tools():
    """The dialect registry names the dialects these tests cover (a new one with custom tools joins them)."""
    assert {"openai-chat", "openai-responses"} <= set(CUSTOM)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("syntax", FORMATS)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_custom_call_outside_its_declared_format_is_invalid_arguments_and_runs_nothing(provider, syntax, mode):
    """Text outside the tool's regex or Lark grammar is answered invalid_arguments under its call id; the
    handler never runs."""
    fmt, _ = FORMATS[syntax]
    for text in OUTSIDE:
        seen: list[str] = []
        [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, text),
                       conversation_id=f"c-{text}")
        assert (r.kind, r.call_id, seen) == (K.INVALID_ARGUMENTS, "call_1", []), (text, r)
        assert f"{syntax} format" in r.content and "Nothing was run" in r.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("syntax", FORMATS)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_custom_call_inside_its_declared_format_runs_its_handler_once(provider, syntax, mode):
    """Text the regex or grammar accepts (the whole text, to its start rule) reaches the handler unchanged."""
    fmt, text = FORMATS[syntax]
    seen: list[str] = []
    [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, text),
                   conversation_id="c")
    assert (r.kind, r.content, seen) == (K.OK, "3 rows", [text])


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_responses_custom_call_outside_its_grammar_is_invalid_arguments(mode):
    """A custom_tool_call streamed in input deltas is checked on its whole text, like a whole response."""
    seen: list[str] = []
    data, _ = encode(stream(custom_item(0, "ctc_1", "call_9", "run_sql", "SELECT id FROM users; DROP TABLE x")))
    turn = toolwire.parse("openai-responses", data)
    [r] = dispatch(mode, Dispatcher(Registry([sql_tool(LARK, seen)])), turn, conversation_id="c")
    assert (r.kind, r.call_id, seen) == (K.INVALID_ARGUMENTS, "call_9", [])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_backtracking_regex_format_answers_a_long_hostile_text_at_once(provider, mode):
    """A nested-quantifier regex on text built to make a backtracking engine try every split is answered
    invalid_arguments (the check runs in time linear in the text)."""
    seen: list[str] = []
    fmt = {"type": "grammar", "syntax": "regex", "definition": r"(a+)+b"}
    [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, "a" * 50_000 + "c"),
                   conversation_id="c")
    assert (r.kind, r.call_id, seen) == (K.INVALID_ARGUMENTS, "call_1", [])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_check_that_outlasts_its_budget_is_invalid_arguments(provider, mode, monkeypatch):
    """A grammar so ambiguous that parsing grows cubic in the text is given FORMAT_CHECK_SECONDS, then the call is
    answered invalid_arguments (naming the budget) instead of holding the turn for minutes."""
    monkeypatch.setattr(formats, "FORMAT_CHECK_SECONDS", 0.25)
    seen: list[str] = []
    fmt = {"type": "grammar", "syntax": "lark", "definition": 'start: x+\nx: "a" | "a" "a" | x x'}
    [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, "a" * 600),
                   conversation_id="c")
    assert (r.kind, r.call_id, seen) == (K.INVALID_ARGUMENTS, "call_1", [])
    assert "within 0.25 s" in r.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_text_longer_than_the_format_check_bound_is_invalid_arguments(provider, mode):
    """Text longer than toolwire checks against a format is refused (naming the bound), never run unchecked."""
    seen: list[str] = []
    fmt = {"type": "grammar", "syntax": "regex", "definition": r"[a-z]*"}
    text = "a" * (FORMAT_CHECK_MAX_CHARS + 1)
    [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, text),
                   conversation_id="c")
    assert (r.kind, r.call_id, seen) == (K.INVALID_ARGUMENTS, "call_1", [])
    assert f"{FORMAT_CHECK_MAX_CHARS:,}" in r.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", CUSTOM)
def test_check_format_false_lets_any_text_reach_the_handler(provider, mode):
    """``check_format=False`` is the explicit opt-out: the format is still declared, the text is not checked."""
    seen: list[str] = []
    tool = sql_tool(LARK, seen, check_format=False)
    assert tool.format == LARK
    [r] = dispatch(mode, Dispatcher(Registry([tool])), custom_turn(provider, "DROP TABLE users"), conversation_id="c")
    assert (r.kind, seen) == (K.OK, ["DROP TABLE users"])


@pytest.mark.parametrize("syntax", FORMATS)
def test_a_grammar_format_without_the_grammar_extra_is_a_clear_declaration_error(syntax, monkeypatch):
    """Declaring a regex or Lark format where its checker is not installed fails at declaration, naming the extra
    and the opt-out; with ``check_format=False`` the tool is declared."""
    monkeypatch.setitem(sys.modules, "llguidance", None)
    fmt, _ = FORMATS[syntax]
    with pytest.raises(ToolDeclarationError) as caught:
        sql_tool(fmt, [])
    assert "toolwire[grammar]" in str(caught.value) and "check_format=False" in str(caught.value)
    assert caught.value.tool == "run_sql"
    assert sql_tool(fmt, [], check_format=False).format == fmt
    assert sql_tool({"type": "text"}, []).format == {"type": "text"}  # nothing to check: no extra needed
    assert sql_tool(None, []).format is None


@pytest.mark.parametrize("fmt", [
    {"type": "grammar", "syntax": "regex", "definition": r"(?=SELECT)SELECT .*"},  # look-around: not Rust regex
    {"type": "grammar", "syntax": "regex", "definition": r"(a)\1"},  # a back-reference
    {"type": "grammar", "syntax": "regex", "definition": r"SELECT ("},
    {"type": "grammar", "syntax": "lark", "definition": "start: missing_rule"},
    {"type": "grammar", "syntax": "lark", "definition": 'start: ("a" '},  # an unclosed group
])
def test_a_format_definition_the_checker_cannot_compile_fails_at_declaration(fmt):
    """A regex or grammar the provider's syntax does not accept is refused when the tool is declared (the provider
    would refuse the request), unless the check is turned off."""
    with pytest.raises(ToolDeclarationError) as caught:
        sql_tool(fmt, [])
    assert caught.value.tool == "run_sql" and fmt["syntax"] in str(caught.value)
    assert sql_tool(fmt, [], check_format=False).format == fmt


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", CUSTOM)
def test_a_text_format_lets_any_text_through(provider, mode):
    """A ``{"type": "text"}`` format (or none) constrains nothing: every text runs."""
    for fmt in ({"type": "text"}, None):
        seen: list[str] = []
        [r] = dispatch(mode, Dispatcher(Registry([sql_tool(fmt, seen)])), custom_turn(provider, "anything at all"),
                       conversation_id="c")
        assert (r.kind, seen) == (K.OK, ["anything at all"])


def test_check_format_takes_only_a_bool():
    """``check_format`` is True or False: a truthy or falsy stand-in ("no", 0) is refused, not guessed at."""
    for bad in ("no", 0, None):
        with pytest.raises(ToolDeclarationError):
            sql_tool(LARK, [], check_format=bad)
