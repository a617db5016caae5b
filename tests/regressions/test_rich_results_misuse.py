"""Rich results used the odd ways people use them: a data URL for base64, raw bytes, MIME types in capitals, a
``ToolError`` subclass that never called ``super().__init__``, an async handler raising under a timeout, a custom
tool and a computer call answered with an image, a text twin of ``structured`` longer than its JSON, thousands of
parts, a hand-built ``ToolResult`` whose parts cannot be sent, and a rich write completed in one process and
replayed in another."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

import toolwire
from toolwire import (
    Content,
    Dispatcher,
    ImagePart,
    LinkPart,
    OutcomeUnknown,
    Registry,
    ResultKind,
    SQLiteLedger,
    TextPart,
    Tool,
    ToolError,
)

from ..bodies import PROVIDERS
from ..rich import JPEG, PNG, STRUCTURED, turn_of
from ..test_results_encoding import check_sdk, responses_body

K = ResultKind
ROOT = Path(__file__).resolve().parents[2]


def answer_with(value: Any, *, effect: str = "read", **kw: Any) -> Dispatcher:
    def show(n: int) -> Any:
        """Show."""
        if isinstance(value, BaseException):
            raise value
        return value
    return Dispatcher(Registry([Tool.from_function(show, effect=effect, **kw)]), read_retries=2, backoff=0)


def test_a_data_url_given_as_base64_is_result_unusable_with_a_hint():
    """``data="data:image/png;base64,…"`` is refused (result_unusable) with a reason saying what to give."""
    turn = turn_of("anthropic", ("show", {"n": 1}))
    [r] = answer_with(ImagePart(data="data:image/png;base64," + PNG, mime_type="image/png")).run(
        turn, conversation_id="c")
    assert r.kind is K.RESULT_UNUSABLE and "data URL" in r.content and PNG not in r.content


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses", "gemini"])
def test_mime_types_in_capitals_and_image_jpg_are_sent_as_the_provider_spells_them(provider):
    """``IMAGE/JPG`` is read as image/jpeg and sent in lower case, which the SDK literals accept."""
    turn = turn_of(provider, ("show", {"n": 1}))
    [r] = answer_with(ImagePart(data=JPEG, mime_type="IMAGE/JPG")).run(turn, conversation_id="c")
    encoded = toolwire.encode_results(turn, [r])
    for m in encoded:
        check_sdk(provider, m)
    assert "image/jpeg" in json.dumps(encoded) and "IMAGE/JPG" not in json.dumps(encoded)


def test_a_tool_error_subclass_without_super_init_is_still_a_tool_error():
    """A ToolError subclass that skips ``super().__init__`` (no ``content``) answers tool_error with its text."""
    class Refused(ToolError):
        def __init__(self, why: str) -> None:  # noqa: D107 - deliberately no super().__init__
            self.why = why

        def __str__(self) -> str:
            return f"refused: {self.why}"

    turn = turn_of("openai-chat", ("show", {"n": 1}))
    [r] = answer_with(Refused("closed")).run(turn, conversation_id="c")
    assert r.kind is K.TOOL_ERROR and r.content == "refused: closed"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_async_handler_raising_tool_error_under_a_timeout(mode):
    """An async handler with a timeout that raises ToolError is tool_error (not a timeout), attempted once."""
    runs = []

    async def show(n: int) -> Any:
        """Show."""
        runs.append(n)
        await asyncio.sleep(0)
        raise ToolError(Content(parts=[TextPart(text="no"), ImagePart(data=PNG, mime_type="image/png")]))

    dispatcher = Dispatcher(Registry([Tool.from_function(show, effect="read", timeout=5.0)]), read_retries=2)
    turn = turn_of("gemini-interactions", ("show", {"n": 1}))
    if mode == "sync":
        [r] = dispatcher.run(turn, conversation_id="c")
    else:
        [r] = asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    assert r.kind is K.TOOL_ERROR and runs == [1] and isinstance(r.parts[1], ImagePart)


def test_a_custom_tool_answered_with_an_image_fits_the_sdk():
    """A Responses custom tool whose handler returns Content gets custom_tool_call_output with a list output."""
    turn = responses_body({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_sql", "name": "plot",
                           "input": "SELECT 1"})
    dispatcher = Dispatcher(Registry([Tool.custom("plot", lambda text: Content(
        parts=[TextPart(text="the plot:"), ImagePart(data=PNG, mime_type="image/png")]), effect="read")]))
    [r] = dispatcher.run(turn, conversation_id="c")
    [item] = toolwire.encode_results(turn, [r])
    assert item["type"] == "custom_tool_call_output"
    assert [i["type"] for i in item["output"]] == ["input_text", "input_image"]
    check_sdk("openai-responses", item)


def test_a_computer_call_answered_with_an_image_is_its_screenshot():
    """A Responses computer call whose handler returns an ImagePart is answered with that screenshot, no note."""
    turn = responses_body({"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "status": "completed",
                           "pending_safety_checks": [], "action": {"type": "screenshot"}})
    dispatcher = Dispatcher(Registry([Tool.from_schema("computer", {"type": "object"},
                                                       lambda args: ImagePart(data=PNG, mime_type="image/png"),
                                                       effect="read")]))
    [r] = dispatcher.run(turn, conversation_id="c")
    encoded = toolwire.encode_results(turn, [r])
    assert encoded == [{"type": "computer_call_output", "call_id": "call_cu",
                        "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{PNG}"}}]
    check_sdk("openai-responses", encoded[0])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_text_twin_longer_than_its_json_stays_within_the_cap(provider):
    """A text part repeating ``structured`` with escaped characters (longer than the compact JSON) counts what
    it adds: at the smallest cap the answer still fits (the twin is dropped, the object stays)."""
    structured = {"name": "é" * 60}
    twin = json.dumps(structured)  # ASCII escapes: six bytes per character
    turn = turn_of(provider, ("show", {"n": 1}))
    [r] = Dispatcher(Registry([Tool.from_function(lambda n: Content(parts=[TextPart(text=twin)],
                                                                    structured=structured),
                                                  name="show", effect="read")]),
                     max_result_bytes=512).run(turn, conversation_id="c")
    assert r.kind is K.OK and r.content == structured
    encoded = toolwire.encode_results(turn, [r])
    assert twin not in json.dumps(encoded, ensure_ascii=False)
    for m in encoded:
        check_sdk(provider, m)


def test_thousands_of_parts_are_capped_to_one_marker():
    """200,000 link parts: the answer is bounded by max_result_bytes and ends with one marker counting the rest."""
    parts = [LinkPart(uri=f"https://example.com/{i}") for i in range(200_000)]
    turn = turn_of("openai-responses", ("show", {"n": 1}))
    [r] = answer_with(Content(parts=parts)).run(turn, conversation_id="c")
    assert r.kind is K.OK and len(r.content.encode()) <= 1 << 20
    assert sum(isinstance(p, TextPart) for p in r.parts) == 1 and "link" in r.parts[-1].text
    [item] = toolwire.encode_results(turn, [r])
    assert len(item["output"].encode()) <= 1 << 20


@pytest.mark.parametrize("parts", [[ImagePart(data="not base64", mime_type="image/png")],
                                   [{"type": "image", "data": PNG}], [TextPart(text=7)]],  # type: ignore[list-item]
                         ids=["bad_base64", "a_dict", "text_not_a_string"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hand_built_result_with_parts_that_cannot_be_sent_is_a_usage_error(provider, parts):
    """encode_results and history_messages check a ToolResult's parts like the dispatcher does: a UsageError,
    never a malformed request or an AttributeError."""
    turn = turn_of(provider, ("show", {"n": 1}))
    [call] = turn.calls
    result = toolwire.ToolResult(call_id=call.call_id, local_id=call.local_id, name=call.name, content="x",
                                 is_error=False, kind=K.OK, parts=parts)
    for encode in (toolwire.encode_results, toolwire.history_messages):
        with pytest.raises(toolwire.UsageError, match="parts that cannot be sent"):
            encode(turn, [result])


def test_a_structured_struct_is_sent_as_its_object():
    """``structured`` given as a msgspec Struct is taken as the JSON object it encodes to."""
    class Weather(msgspec.Struct):
        city: str
        temp_c: int

    turn = turn_of("gemini", ("show", {"n": 1}))
    [r] = answer_with(Content(structured=Weather("Paris", 21))).run(turn, conversation_id="c")  # type: ignore[arg-type]
    assert r.kind is K.OK and r.content == STRUCTURED


# ==== across processes ===========================================================================================
CHILD = textwrap.dedent("""
    import sys
    import toolwire
    from toolwire import Content, ImagePart, OutcomeUnknown, TextPart

    PNG = {png!r}

    def save(kind: str):
        \"\"\"Save.\"\"\"
        if kind == "lost":
            raise OutcomeUnknown("the upstream connection closed")
        return Content(parts=[TextPart(text="saved"), ImagePart(data=PNG, mime_type="image/png")],
                       structured={{"saved": kind}})

    registry = toolwire.Registry([toolwire.Tool.from_function(save, effect="write")])
    turn = toolwire.parse(sys.argv[1], open(sys.argv[2], "rb").read())
    dispatcher = toolwire.Dispatcher(registry, ledger=toolwire.SQLiteLedger(sys.argv[3]))
    [result] = dispatcher.run(turn, conversation_id="c")
    print(result.kind.value)
""")


@pytest.mark.parametrize("kind", ["receipt", "lost"])
@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_rich_write_from_another_process_is_replayed_typed_or_stays_unknown(provider, kind, tmp_path):
    """A write answered with Content in one process is replayed in this one with typed parts and runs nothing;
    one whose handler raised OutcomeUnknown there is outcome_unknown here and runs nothing."""
    from ..bodies import body

    response = tmp_path / "response.json"
    response.write_bytes(body(provider, [("call_0", "save", {"kind": kind})]))
    db = tmp_path / "ledger.db"
    child = tmp_path / "child.py"
    child.write_text(CHILD.format(png=PNG))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(child), provider, str(response), str(db)], capture_output=True,
                         text=True, timeout=120, env=env, check=True)
    assert out.stdout.strip() == ("ok" if kind == "receipt" else "outcome_unknown")
    runs = []

    def save(kind: str) -> Any:
        """Save."""
        runs.append(kind)
        raise OutcomeUnknown("must not run")

    turn = toolwire.parse(provider, response.read_bytes())
    [r] = Dispatcher(Registry([Tool.from_function(save, effect="write")]), ledger=SQLiteLedger(db)).run(
        turn, conversation_id="c")
    assert runs == []
    if kind == "receipt":
        assert r.kind is K.OK and r.content == {"saved": "receipt"}
        assert r.parts == [TextPart(text="saved"), ImagePart(data=PNG, mime_type="image/png")]
        assert isinstance(r.parts[1], ImagePart)
    else:
        assert r.kind is K.OUTCOME_UNKNOWN
