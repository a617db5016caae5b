"""The registry of dialects: built from the modules of ``toolwire.codecs``, the one place everything asks; and a toy
dialect added to it alone (a binary framing, AWS event-stream's; its tools and choice inside one configuration
object; its results as nested blocks) is parsed, framed by the transport, declared, audited, read back by
``load_tools`` and repaired, without any other change."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from typing import Any, Collection, Sequence

import msgspec
import pytest

import toolwire
from toolwire.codecs import Dialect, dialect_for, dialects, dialects_with
from toolwire.codecs import base as codec_base
from toolwire.codecs.capabilities import Capabilities, Limit, capabilities_for
from toolwire.codecs.declare import Declarations, declare, load_tools
from toolwire.codecs.declare._common import ChoiceResult, ToolChoice, ToolSpec
from toolwire.codecs.eventstream import EventStreamDecoder
from toolwire.codecs.requests import HTTP
from toolwire.codecs.results import Results
from toolwire.codecs.results._blocks import BlockLayout, place_result_blocks
from toolwire.codecs.results._common import wire_id
from toolwire.errors import FramingError
from toolwire.framing import SSEMessage
from toolwire.types import FinishReason


# ---- the registry --------------------------------------------------------------------------------------------------
def test_the_registry_lists_every_dialect_module_in_its_order():
    """The registry holds the six dialects, in their order, and PROVIDERS is its list of ids."""
    assert [d.id for d in dialects()] == ["openai-chat", "anthropic", "openai-responses", "gemini",
                                          "gemini-interactions", "bedrock-converse"]
    assert toolwire.PROVIDERS == tuple(d.id for d in dialects())
    assert [d.order for d in dialects()] == sorted(d.order for d in dialects())


def test_every_record_has_its_parts():
    """Each record's codec, declarations, results and capabilities parts are of the documented types, its
    capabilities name it, and its optional HTTP and simulator parts (when it has them) too, the simulator's loaded on
    demand."""
    for d in dialects():
        assert issubclass(d.codec, codec_base.Codec) and d.codec.provider == d.id
        assert isinstance(d.declarations, Declarations) and d.declarations.dialect == d.id
        assert isinstance(d.results, Results) and d.results.dialect == d.id
        assert isinstance(d.capabilities, Capabilities) and d.capabilities.dialect == d.id
        assert d.http is None or (isinstance(d.http, HTTP) and d.http.dialect == d.id)
        assert d.sim is None or d.simulator().name == d.id
    with_http = {d.id for d in dialects_with("http")}
    assert with_http == {d.id for d in dialects() if d.http is not None} and with_http <= set(toolwire.PROVIDERS)
    assert {d.id for d in dialects_with("sim")} == {d.id for d in dialects() if d.sim is not None}


def test_unknown_dialects_and_parts_are_usage_errors():
    """An unknown dialect id or part name is a UsageError naming what exists."""
    with pytest.raises(toolwire.UsageError, match="expected one of: openai-chat"):
        dialect_for("cohere")
    with pytest.raises(toolwire.UsageError, match="http, sim"):
        dialects_with("websocket")


def test_import_toolwire_imports_no_simulator():
    """The records name their simulator parts lazily: importing toolwire (and asking the registry) leaves
    toolwire.sim unimported."""
    code = ("import sys, toolwire; from toolwire.codecs import dialects_with; dialects_with('sim'); "
            "print('toolwire.sim' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- a toy dialect, added through the registry alone ---------------------------------------------------------------
class ToyFramer:
    """AWS event-stream messages (``toolwire.codecs.eventstream``, a binary framing) as the codec's items, the way
    SSE's are: the ``:event-type`` header is the event, the payload its data."""

    def __init__(self, max_message_bytes: int) -> None:
        self.decoder = EventStreamDecoder(max_message_bytes)

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        return [SSEMessage(m.payload, m.event_type, None, None) for m in self.decoder.feed(chunk)]

    def close(self) -> list[SSEMessage]:
        return [SSEMessage(m.payload, m.event_type, None, None) for m in self.decoder.close()]


def sniff(head: bytes) -> bool | None:
    """An event-stream message starts with a 12-byte prelude whose last four bytes are the CRC-32 of the first
    eight."""
    return None if len(head) < 12 else zlib.crc32(head[:8]) == struct.unpack(">I", head[8:12])[0]


def frames(*payloads: Any) -> bytes:
    """One event-stream message per payload, typed by its one key (an encoder of the format, not the decoder's)."""
    out = b""
    for p in payloads:
        data = json.dumps(p).encode()
        kind = next(iter(p)).encode()
        headers = bytes([11]) + b":event-type" + bytes([7]) + struct.pack(">H", len(kind)) + kind
        prelude = struct.pack(">II", 16 + len(headers) + len(data), len(headers))
        message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + data
        out += message + struct.pack(">I", zlib.crc32(message))
    return out


class ToyCodec(codec_base.Codec):
    """``{"call": {id, name, args}}`` is a whole call, ``{"text": ...}`` text, ``{"end": reason}`` the turn's end."""

    provider = "toy"
    framing = codec_base.Framing(name="toyframe", make=ToyFramer, sniff=sniff)

    def on_payload(self, event: str | None, data: bytes) -> None:
        try:
            doc = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            self.unrecognised(exc, data)
            return
        asm = self.asm
        if "call" in doc:
            call = doc["call"]
            rec = asm.open_call(call_id=call.get("id"), name=call.get("name"),
                                initial=json.dumps(call.get("args", {})))
            asm.complete(rec)
        elif "text" in doc:
            asm.add_text(doc["text"])
        elif "end" in doc:
            asm.stream_ended("end")
            reason = {"tool_use": FinishReason.TOOL_CALLS, "end_turn": FinishReason.STOP}.get(doc["end"],
                                                                                              FinishReason.LENGTH)
            asm.end_choice(0, reason, doc["end"], "end")
        else:
            self.skip("no known member")


class ToyDeclarations(Declarations):
    """Tools and the choice in one configuration object, as ``{"toolSpec": {name, inputSchema: {json}}}``."""

    dialect = "toy"
    tools_at = ("toolConfig", "tools")
    choice_at = ("toolConfig", "toolChoice")

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        return {"toolSpec": {"name": spec.name, "inputSchema": {"json": spec.input_schema}}}, ()

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        return declaration["toolSpec"]["inputSchema"]["json"]

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        value = {"tool": {"name": choice.name}} if choice.mode == "tool" else {"any": {}} \
            if choice.mode == "required" else {"auto": {}}
        return ChoiceResult(fragment={"toolConfig": {"toolChoice": value}})

    def read_tool(self, raw: Any, index: int) -> dict[str, Any] | None:
        spec = raw.get("toolSpec")
        if not isinstance(spec, dict):
            return None
        return {"name": spec.get("name"), "description": spec.get("description"),
                "input_schema": (spec.get("inputSchema") or {}).get("json")}


class ToyLayout(BlockLayout):
    id_key = result_id_key = "toolUseId"
    arguments_key = "input"
    call_word, result_word, id_prefix = "toolUse", "toolResult", "tw_toy"

    def call_of(self, block: Any) -> dict[str, Any] | None:
        return block.get("toolUse") if isinstance(block, dict) and isinstance(block.get("toolUse"), dict) else None

    def result_of(self, block: Any) -> dict[str, Any] | None:
        return block.get("toolResult") if isinstance(block, dict) and isinstance(block.get("toolResult"),
                                                                                 dict) else None

    def missing(self, call_id: str, name: Any) -> dict[str, Any]:
        return {"toolResult": {"toolUseId": call_id, "status": "error", "content": [{"text": "no result"}]}}

    def text(self, text: str) -> dict[str, Any]:
        return {"text": text}


class ToyResults(Results):
    dialect = "toy"

    def encode(self, turn: Any, pairs: list[Any], *, echo_ids: bool = True) -> Any:
        return {"role": "user", "content": [{"toolResult": {"toolUseId": wire_id(turn, c), "content": [
            {"json": r.content}]}} for c, r in pairs]}

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: Any) -> Any:
        return place_result_blocks(messages, ToyLayout(), counter)


class ToyHTTP(HTTP):
    api_key_env = ("TOY_API_KEY",)
    base_url_env = "TOY_BASE_URL"
    default_base_url = "https://toy.invalid"
    provider_name = "toy"

    def url(self, base: str, *, model: str, stream: bool) -> str:
        return f"{base}/model/{model}/{'converse-stream' if stream else 'converse'}"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        return {"messages": list(history), **tools_fragment}


TOY = Dialect(id="toy", codec=ToyCodec, declarations=ToyDeclarations(), results=ToyResults(),
              capabilities=Capabilities(
                  dialect="toy", endpoint="POST /model/{m}/converse", name_pattern=r"[a-zA-Z0-9_-]{1,64}",
                  name_max=64, name_source="toy", max_tools=Limit(None, "toy", documented=False),
                  schema_depth=Limit(None, "toy", documented=False),
                  max_request_bytes=Limit(200, "toy: a tiny request"), ids_echoed="toolUseId",
                  signatures="none", tool_turn_finish=("tool_use", "end_turn"), transient_statuses=(503,),
                  permanent_statuses=(400,), transient_error_types=(), delay_hints=()),
              http=ToyHTTP("toy"), order=99)


@pytest.fixture
def toy(monkeypatch):
    """The toy dialect in the registry for one test (as a module of toolwire.codecs defining it would be)."""
    import toolwire.codecs as codecs

    registry = dict(codecs._discover())
    registry["toy"] = TOY
    monkeypatch.setattr(codecs, "_REGISTRY", registry)
    return TOY


STREAM = frames({"text": "Checking."}, {"call": {"id": "tu_1", "name": "get_weather", "args": {"city": "Paris"}}},
                {"end": "tool_use"})


def test_a_new_dialect_is_a_provider_with_its_capabilities(toy):
    """Once registered, the dialect is a provider everywhere the registry is asked."""
    from toolwire.codecs import PROVIDERS

    assert PROVIDERS[-1] == "toy" and capabilities_for("toy") is toy.capabilities
    assert [d.id for d in dialects_with("http")][-1] == "toy" and "toy" not in [d.id for d in dialects_with("sim")]


def test_its_binary_framing_is_parsed_explicitly_and_recognised_by_auto(toy):
    """Its framing's name is a format for it; auto recognises the frames from their first bytes, even one byte at a
    time; the whole input and any split give the same turn."""
    explicit = toolwire.parse("toy", STREAM, format="toyframe")
    assert explicit.finished_cleanly and explicit.text == "Checking."
    assert [(c.call_id, c.name, c.args) for c in explicit.runnable_calls] == [("tu_1", "get_weather",
                                                                                {"city": "Paris"})]
    parser = toolwire.StreamParser("toy", format="auto")
    for i in range(len(STREAM)):
        parser.feed(STREAM[i:i + 1])
    parser.close()
    assert parser.detected_format == "toyframe" and parser.turn == explicit
    with pytest.raises(toolwire.UsageError):
        toolwire.StreamParser("openai-chat", format="toyframe")  # another dialect's framing is no format there


def test_a_cut_frame_is_a_framing_error_and_text_is_still_read_as_sse(toy):
    """A binary stream cut inside a frame raises FramingError at close, the turn records it; an input that is not
    the binary framing is decided as for every dialect."""
    parser = toolwire.StreamParser("toy", format="auto")
    parser.feed(STREAM[:-3])
    with pytest.raises(FramingError):
        parser.close()
    assert parser.turn.error.type == "framing_error" and parser.turn.runnable_calls == []
    turn = toolwire.parse("toy", b'data: {"end": "end_turn"}\n\n')
    assert turn.finished_cleanly and turn.finish_reason is FinishReason.STOP


def test_the_transport_asks_for_its_framing(toy):
    """The harness transport parses a streamed response in the dialect's framing (and asks for no SSE), a whole one
    with auto; its URL, headers and bodies come from its HTTP part."""
    from toolwire.harness.transport import HTTPTransport

    with HTTPTransport("toy", model="m1", base_url="http://127.0.0.1:9", api_key="k-123") as streamed:
        assert streamed._parser().format == "toyframe"
        assert streamed.url == "http://127.0.0.1:9/model/m1/converse-stream"
        assert "accept" not in streamed._endpoint.headers
    with HTTPTransport("toy", model="m1", base_url="http://127.0.0.1:9", api_key="k-123", stream=False) as whole:
        assert whole._parser().format == "auto"


def test_tools_and_choice_share_its_configuration_object(toy):
    """declare merges the tools and the choice into the one object the dialect keeps them in; the limit on the
    request size reads the tools there; load_tools reads a request body of the dialect."""
    tools = [toolwire.ToolSpec(name="get_weather", input_schema={"type": "object", "properties": {}})]
    fragment = declare("toy", tools, choice=ToolChoice.tool("get_weather")).fragment
    assert fragment == {"toolConfig": {
        "tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": tools[0].input_schema}}}],
        "toolChoice": {"tool": {"name": "get_weather"}}}}
    assert toy.declarations.choice_in(fragment) == {"tool": {"name": "get_weather"}}
    assert [s.name for s in load_tools({"messages": [], **fragment})] == ["get_weather"]
    many = [toolwire.ToolSpec(name=f"tool_{i}") for i in range(3)]
    report = toolwire.audit_tools(many, dialects=["toy"])
    assert [x.limit for x in report.dialects["toy"].limits] == ["request_bytes"]


def test_its_block_results_are_repaired_by_the_shared_helper(toy):
    """A history whose call blocks are nested objects: a missing result is inserted first in the next user message,
    an orphan dropped, and a second repair changes nothing."""
    history = [{"role": "user", "content": [{"text": "hi"}]},
               {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu_1", "name": "f", "input": {}}}]},
               {"role": "user", "content": [{"text": "and?"}, {"toolResult": {"toolUseId": "nope", "content": []}}]}]
    out, report = toolwire.repair_history("toy", history)
    assert [a.kind.value for a in report.actions] == ["dropped_orphan", "inserted_result"]
    assert out[2]["content"][0]["toolResult"]["toolUseId"] == "tu_1" and out[2]["content"][1] == {"text": "and?"}
    assert toolwire.repair_history("toy", out)[1].actions == []


def test_a_framing_error_carries_the_events_the_parse_ended_with(toy):
    """A binary stream cut inside a frame: the FramingError raised at close carries the events close could not
    return, ending with the failed turn's TurnFinished (as a cut SSE stream's close returns them)."""
    head = frames({"text": "Checking."})
    parser = toolwire.StreamParser("toy", format="toyframe")
    parser.feed(head + STREAM[len(head):len(head) + 5])
    with pytest.raises(FramingError) as info:
        parser.close()
    assert [type(e).__name__ for e in info.value.events][-1] == "TurnFinished"
    assert info.value.events[-1].turn == parser.turn and parser.turn.error.type == "framing_error"


def test_its_framing_is_a_format_of_the_command_line(toy, tmp_path, capsys):
    """toolwire parse takes the dialect's framing name as --format for that dialect (exit 0, its calls), and refuses
    it for a dialect whose framing it is not (exit 2)."""
    from toolwire.cli import main

    path = tmp_path / "stream.bin"
    path.write_bytes(STREAM)
    assert main(["parse", "--provider", "toy", "--format", "toyframe", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c["call_id"], c["args"]) for c in doc["calls"]] == [("tu_1", {"city": "Paris"})]
    assert main(["parse", "--provider", "openai-chat", "--format", "toyframe", str(path)]) == 2
