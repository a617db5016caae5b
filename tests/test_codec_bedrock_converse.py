"""The Bedrock Converse dialect's own rules, through the public API: errors in the stream, the end of the turn
and what may follow it, stop reasons, the binary framing's damage, the SDK's JSON-lines form, declarations and
answers (the generic suites cover splits, prefixes, events, results and repair)."""

from __future__ import annotations

import json

import pytest

import toolwire
from toolwire import FinishReason, ProblemCode, ToolChoice
from toolwire.codecs.capabilities import is_transient_error
from toolwire.errors import FramingError

from .dialects import _bedrock_shapes as shapes
from .dialects.bedrock_converse import bedrock_events, encode_events, exception, frame

P = "bedrock-converse"
CALL = [("tooluse_1", "get_weather", {"city": "Paris"})]


def stream(*extra: bytes, stop: str = "tool_use", metadata: bool = True) -> bytes:
    return encode_events(bedrock_events(CALL, text="Checking.", stop_reason=stop, metadata=metadata)).data + \
        b"".join(extra)


@pytest.mark.parametrize("kind, transient", [("throttlingException", True), ("serviceUnavailableException", True),
                                             ("internalServerException", True),
                                             ("modelStreamErrorException", True), ("validationException", False)])
def test_an_in_stream_exception_is_a_typed_stream_error_transient_as_the_capabilities_say(kind, transient):
    """An exception message mid-stream fails the turn with its type, status and message; the open call is cut;
    whether it is worth a retry comes from the dialect's capabilities."""
    events = bedrock_events(CALL, stop_reason=None, metadata=False)[:-2]  # the call still open
    turn = toolwire.parse(P, encode_events(events).data + exception(kind, "slow down"))
    assert (turn.error.type, turn.error.message) == (kind, "slow down") and turn.error.status is not None
    assert turn.calls[0].state is toolwire.CallState.TRUNCATED and turn.runnable_calls == []
    assert is_transient_error(P, turn.error.type, turn.error.code) is transient


def test_metadata_after_message_stop_is_read_and_anything_else_after_it_is_a_protocol_error():
    """messageStop ends the turn; metadata after it gives the usage; a second metadata or a content event after
    them is a protocol error and nothing of it runs."""
    turn = toolwire.parse(P, stream())
    assert turn.finished_cleanly and turn.token_usage.input_tokens == 400
    assert [c.args for c in turn.runnable_calls] == [{"city": "Paris"}]
    late = frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "more"}})
    for tail in (late, frame("metadata", {"usage": {}, "metrics": {}})):
        bad = toolwire.parse(P, stream(tail))
        assert bad.error.type == "protocol_error" and bad.runnable_calls == []


@pytest.mark.parametrize("stop, reason, runnable", [
    ("end_turn", FinishReason.TOOL_CALLS, True), ("stop_sequence", FinishReason.TOOL_CALLS, True),
    ("tool_use", FinishReason.TOOL_CALLS, True), ("max_tokens", FinishReason.LENGTH, False),
    ("model_context_window_exceeded", FinishReason.LENGTH, False),
    ("guardrail_intervened", FinishReason.CONTENT_FILTER, False),
    ("content_filtered", FinishReason.CONTENT_FILTER, False), ("malformed_tool_use", FinishReason.ERROR, False),
    ("malformed_model_output", FinishReason.ERROR, False), ("something_new", FinishReason.OTHER, False)])
def test_every_stop_reason_of_botocore_maps_to_a_finish(stop, reason, runnable):
    """Each StopReason (and an unknown one) has its canonical finish (a clean stop with calls is tool_calls); only
    clean ones let the calls run, and a token limit cuts the call whose block had already closed."""
    turn = toolwire.parse(P, stream(stop=stop))
    assert (turn.finish_reason, turn.raw_finish_reason) == (reason, stop)
    assert bool(turn.runnable_calls) is runnable
    if reason is FinishReason.LENGTH:
        assert turn.calls[0].problem.code is ProblemCode.CUT_BY_LENGTH
    known = set(shapes.shape("StopReason").enum)
    assert stop in known or stop == "something_new"


def test_a_damaged_frame_is_a_framing_error_and_auto_recognises_the_framing():
    """A flipped byte in a frame's payload is a crc_mismatch FramingError recorded on the turn; format auto reads
    the binary framing from its first bytes, even one byte at a time."""
    data = bytearray(stream())
    data[40] ^= 0xFF
    parser = toolwire.StreamParser(P, format="auto")
    with pytest.raises(FramingError) as info:
        parser.feed(bytes(data))
    assert info.value.code == "crc_mismatch" and parser.turn.error.type == "framing_error"
    assert parser.turn.runnable_calls == [] and info.value.events[-1].turn == parser.turn
    good = stream()
    parser = toolwire.StreamParser(P, format="auto")
    for i in range(len(good)):
        parser.feed(good[i:i + 1])
    parser.close()
    assert parser.detected_format == "eventstream" and parser.turn.finished_cleanly


def test_the_sdk_event_form_as_json_lines_gives_the_same_calls():
    """boto3's events ({"contentBlockDelta": {...}} per line) parse like the binary stream."""
    lines = "".join(json.dumps({n: p}) + "\n" for n, p in bedrock_events(CALL, text="Checking."))
    turn = toolwire.parse(P, lines, format="jsonl")
    assert turn == toolwire.parse(P, stream())


def test_an_error_message_and_an_error_body_are_typed_errors():
    """An event-stream error message (:error-code, :error-message) and an HTTP error body {"message"} are stream
    errors with their text; neither raises."""
    from toolwire.codecs.eventstream import encode_message

    err = encode_message({":message-type": "error", ":error-code": "InternalFailure",
                          ":error-message": "it broke"})
    turn = toolwire.parse(P, err)
    assert (turn.error.type, turn.error.message) == ("InternalFailure", "it broke")
    body = toolwire.parse(P, b'{"message":"The security token included in the request is invalid."}')
    assert body.error.message.startswith("The security token") and body.calls == []


def test_server_tools_are_server_calls_and_never_runnable():
    """A toolUse typed server_tool_use and its toolResult block are the provider's: a server call, none runnable;
    the replay keeps both blocks."""
    events = [("messageStart", {"role": "assistant"}),
              ("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {
                  "toolUseId": "tooluse_s", "name": "nova_grounding", "type": "server_tool_use"}}}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q":"x"}'}}}),
              ("contentBlockStop", {"contentBlockIndex": 0}),
              ("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolResult": {
                  "toolUseId": "tooluse_s", "status": "success"}}}),
              ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolResult": [{"text": "found"}]}}),
              ("contentBlockStop", {"contentBlockIndex": 1}),
              ("messageStop", {"stopReason": "end_turn"})]
    turn = toolwire.parse(P, encode_events(events).data)
    assert turn.calls == [] and [(s.name, s.input) for s in turn.server_calls] == [("nova_grounding", {"q": "x"})]
    assert turn.assistant_message["content"][1] == {"toolResult": {"toolUseId": "tooluse_s", "status": "success",
                                                                   "content": [{"text": "found"}]}}


def test_streaming_mode_reports_the_same_finish_and_calls():
    """keep_calls=False ends every call with the same event and keeps no assistant message."""
    data = stream(stop="max_tokens")
    parser = toolwire.StreamParser(P, format="eventstream", keep_calls=False)
    events = parser.feed(data) + parser.close()
    ends = [type(e).__name__ for e in events if isinstance(e, (toolwire.CallCompleted, toolwire.CallTruncated))]
    assert ends == ["CallCompleted", "CallTruncated"] and parser.turn.assistant_message is None
    assert parser.turn.finish_reason is FinishReason.LENGTH


def test_choice_none_is_sent_as_auto_with_a_warning_and_the_tools_stay_declared():
    """Converse has no 'none': the tools stay in toolConfig (needed whenever the history has tool blocks), the choice
    is auto, and the warning none_as_auto says so."""
    tools = [toolwire.ToolSpec(name="get_weather", description="The weather.",
                               input_schema={"type": "object", "properties": {"city": {"type": "string"}}})]
    result = toolwire.declare(P, tools, choice=ToolChoice.none())
    assert result.fragment["toolConfig"]["toolChoice"] == {"auto": {}}
    assert [w.code for w in result.warnings] == ["none_as_auto"]
    assert result.fragment["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": tools[0].input_schema}


def test_load_tools_reads_a_converse_request_with_a_cache_point():
    """load_tools reads toolConfig.tools of a Converse request; a cachePoint entry declares no tool."""
    body = {"modelId": "m", "toolConfig": {"tools": [
        {"toolSpec": {"name": "f", "description": "F.", "inputSchema": {"json": {"type": "object"}}}},
        {"cachePoint": {"type": "default"}}]}}
    from toolwire.codecs.declare import load_tools

    assert [(s.name, s.description) for s in load_tools(body)] == [("f", "F.")]
