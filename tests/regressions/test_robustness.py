"""Robustness: caps with safe defaults and typed errors, for what handlers return and providers send."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool, UsageError

from ..bodies import body
from .test_exactly_once import MODES, dispatch

K = ResultKind


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", ["x" * 5000, {"rows": ["é" * 100] * 100}, list(range(3000))])
def test_a_result_over_max_result_bytes_is_cut_with_a_marker(mode, value):
    """A handler's value larger than max_result_bytes reaches the model cut to the limit, with a marker; never
    silently."""
    reg = Registry([Tool.from_function(lambda q: value, name="look", effect="read")])
    turn = toolwire.parse("anthropic", body("anthropic", [("t", "look", {"q": "x"})]))
    with capture_logs() as logs:
        [r] = dispatch(mode, Dispatcher(reg, max_result_bytes=1024), turn, conversation_id="c")
    assert r.kind is K.OK and isinstance(r.content, str)
    assert len(r.content.encode()) <= 1024 and r.content.endswith("the rest is not shown]")
    assert any(e["event"] == "dispatch.result_truncated" for e in logs)
    [small] = dispatch(mode, Dispatcher(reg), toolwire.parse("anthropic", body("anthropic", [("t", "look",
                                                                                              {"q": "x"})])),
                       conversation_id="c")
    assert small.content == value


def test_max_result_bytes_is_validated():
    """max_result_bytes must be an int of at least 256."""
    for bad in (0, 10, "1MB", True, 1.5):
        with pytest.raises(UsageError):
            Dispatcher(Registry([]), max_result_bytes=bad)


# ---- a provider's mistakes are recorded on the turn, never raised -----------------------------------------------

import json  # noqa: E402


def _sse(*events: dict, named: bool = False) -> bytes:
    out = b""
    for e in events:
        if named:
            out += b"event: " + e["type"].encode() + b"\n"
        out += b"data: " + json.dumps(e).encode() + b"\n\n"
    return out


_ANTHROPIC_START = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                         "content": [], "model": "x"}}
_DEEP = "[" * 1000 + "]" * 1000
UNTYPED = {
    "anthropic_text_block_starting_with_a_number": ("anthropic", _sse(
        _ANTHROPIC_START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": 5}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0}, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"}, named=True)),
    "anthropic_thinking_block_starting_with_a_number": ("anthropic", _sse(
        _ANTHROPIC_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": 5}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hi"}},
        {"type": "content_block_stop", "index": 0}, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"}, named=True)),
    "gemini_args_not_utf8": ("gemini", b'{"candidates":[{"content":{"role":"model","parts":[{"functionCall":'
                                       b'{"name":"f","args":{"a":"\xff"}}}]},"finishReason":"STOP"}]}'),
    "gemini_args_string_not_utf8": ("gemini", b'{"candidates":[{"content":{"role":"model","parts":[{"functionCall":'
                                              b'{"name":"f","args":"\xff"}}]},"finishReason":"STOP"}]}'),
    "interactions_model_output_content_5": ("gemini-interactions", json.dumps(
        {"id": "i", "status": "completed", "steps": [{"type": "model_output", "content": 5}]}).encode()),
    "responses_message_content_5": ("openai-responses", json.dumps(
        {"id": "r", "object": "response", "status": "completed",
         "output": [{"type": "message", "id": "m", "role": "assistant", "content": 5}]}).encode()),
}
DEEP = {
    "chat_arguments": ("openai-chat", json.dumps({"id": "c", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"a":' + _DEEP + "}"}}]}}]})),
    "chat_envelope": ("openai-chat", '{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":'
                                     '"stop","message":{"role":"assistant","content":"x","extra":' + _DEEP + "}}]}"),
    "gemini_args": ("gemini", '{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f",'
                              '"args":{"a":' + _DEEP + '}}}]},"finishReason":"STOP"}]}'),
    "anthropic_input": ("anthropic", '{"id":"m","type":"message","role":"assistant","content":[{"type":"tool_use",'
                                     '"id":"t","name":"f","input":{"a":' + _DEEP + '}}],"stop_reason":"tool_use"}'),
    "responses_arguments": ("openai-responses", json.dumps({"id": "r", "object": "response", "status": "completed",
                            "output": [{"type": "function_call", "id": "fc", "call_id": "c", "name": "f",
                                        "arguments": '{"a":' + _DEEP + "}", "status": "completed"}]})),
    "interactions_arguments": ("gemini-interactions", '{"id":"i","status":"requires_action","steps":[{"type":'
                                                      '"function_call","id":"c","name":"f","arguments":{"a":'
                                                      + _DEEP + "}}]}"),
}


@pytest.mark.parametrize("name", sorted(UNTYPED))
@pytest.mark.parametrize("chunked", [False, True])
def test_unexpected_value_types_are_protocol_errors_not_exceptions(name, chunked):
    """Values of unexpected types deep in a payload, or text that is not UTF-8, are a protocol error on the turn."""
    provider, data = UNTYPED[name]
    pieces = [data[i:i + 7] for i in range(0, len(data), 7)] if chunked else data
    turn = toolwire.parse(provider, pieces)
    assert turn.error is not None and turn.error.type == "protocol_error"
    assert not turn.finished_cleanly and turn.runnable_calls == []


@pytest.mark.parametrize("name", sorted(DEEP))
def test_nesting_past_max_depth_is_limit_exceeded(name):
    """JSON nested about 1,000 deep, in arguments or in the envelope, is refused with a typed limit error on the
    turn, well before Python's recursion limit; nothing in the turn runs."""
    provider, data = DEEP[name]
    turn = toolwire.parse(provider, data)
    assert turn.error is not None and turn.error.type == "limit_exceeded", turn.error
    assert turn.runnable_calls == []
    results = Dispatcher(Registry([Tool.from_schema("f", {"type": "object"}, lambda a: 1, effect="write")])).run(
        turn, conversation_id="c")
    assert all(r.kind is K.NOT_RUN for r in results)


def test_max_depth_is_configurable():
    """Nesting within max_depth parses; a lower max_depth refuses it."""
    nested = {"a": [[[[{"b": 1}]]]]}
    data = body("anthropic", [("t", "f", nested)])
    assert toolwire.parse("anthropic", data).calls[0].args == nested
    assert toolwire.parse("anthropic", data, max_depth=3).error.type == "limit_exceeded"


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "openai-responses", "gemini-interactions"])
def test_arguments_over_max_argument_chars_are_limit_exceeded(provider):
    """A call's arguments longer than max_argument_chars end the turn with a limit error; nothing runs."""
    data = body(provider, [("c", "f", {"text": "x" * 5000})])
    assert toolwire.parse(provider, data).finished_cleanly
    turn = toolwire.parse(provider, data, max_argument_chars=1000)
    assert turn.error.type == "limit_exceeded" and turn.runnable_calls == []


def test_streamed_arguments_over_max_argument_chars_are_cut_off_as_they_arrive():
    """Streamed fragments past max_argument_chars end the turn while it streams (memory stays bounded)."""
    from ..streamgen import chat_stream

    stream = chat_stream([("call_1", "f", {"text": "y" * 20000})])
    parser = toolwire.StreamParser("openai-chat", max_argument_chars=2000)
    for i in range(0, len(stream), 512):
        parser.feed(stream[i:i + 512])
        if parser.turn.error is not None:
            break
    assert parser.turn.error.type == "limit_exceeded"
    parser.close()
    assert parser.turn.runnable_calls == []


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "gemini", "openai-responses",
                                      "gemini-interactions"])
def test_calls_over_max_calls_are_limit_exceeded(provider):
    """More calls in one response than max_calls: a limit error on the turn; nothing runs."""
    data = body(provider, [(f"c{i}", "f", {"i": i}) for i in range(12)])
    assert len(toolwire.parse(provider, data).runnable_calls) == 12
    turn = toolwire.parse(provider, data, max_calls=10)
    assert turn.error.type == "limit_exceeded" and turn.runnable_calls == []


@pytest.mark.parametrize("bad", [0, -1, True, "10", 1.5])
def test_parser_limits_are_validated(bad):
    """A limit that is not a positive int is a UsageError."""
    for name in ("max_depth", "max_argument_chars", "max_calls", "max_message_bytes"):
        with pytest.raises(UsageError):
            toolwire.StreamParser("anthropic", **{name: bad})


def test_vertex_integer_enums_are_read():
    """A Vertex body requested with `$alt=json;enum-encoding=int` (finishReason 1, integer modality and traffic
    type) keeps its two calls; an unknown number is an unknown reason, never fatal."""
    data = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "f", "args": {}}}, {"functionCall": {"name": "g", "args": {"x": 1}}}]},
        "finishReason": 1}], "usageMetadata": {"trafficType": 1, "promptTokensDetails": [
            {"modality": 1, "tokenCount": 3}]}, "modelVersion": "gemini-2.5-flash"}
    turn = toolwire.parse("gemini", json.dumps(data))
    assert turn.finished_cleanly and turn.raw_finish_reason == "STOP"
    assert [c.name for c in turn.runnable_calls] == ["f", "g"]
    for number, raw, clean in ((2, "MAX_TOKENS", False), (3, "SAFETY", False), (9, "MALFORMED_FUNCTION_CALL", False),
                               (99, "99", False)):
        data["candidates"][0]["finishReason"] = number
        turn = toolwire.parse("gemini", json.dumps(data))
        assert turn.raw_finish_reason == raw and turn.finished_cleanly is clean
    blocked = {"promptFeedback": {"blockReason": 1}}
    turn = toolwire.parse("gemini", json.dumps(blocked))
    assert turn.raw_finish_reason == "SAFETY" and turn.finish_reason is toolwire.FinishReason.CONTENT_FILTER


# ---- framing: white space is bounded and never re-scanned -----------------------------------------------------


def test_jsonl_white_space_inside_a_line_counts_toward_max_message_bytes():
    """`{` and then megabytes of spaces is a line over the cap: FramingError, not an unbounded buffer."""
    from toolwire import FramingError

    parser = toolwire.StreamParser("openai-chat", format="jsonl", max_message_bytes=4096)
    parser.feed(b"{")
    with pytest.raises(FramingError):
        for _ in range(10):
            parser.feed(b" " * 1024)


def test_jsonl_blank_and_indented_lines_are_still_read():
    """Blank lines and white space before a line are skipped, however long, and never held."""
    body_line = b'{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop",' \
                b'"message":{"role":"assistant","content":"hi"}}]}'
    parser = toolwire.StreamParser("openai-chat", format="jsonl", max_message_bytes=4096)
    for piece in (b" " * 3000, b"\n" * 5000, b"   \t", b" " * 3000, body_line, b"\n"):
        parser.feed(piece)
    parser.close()
    assert parser.turn.text == "hi" and parser.turn.error is None


@pytest.mark.parametrize("piece", [1, 7, 64])
def test_auto_format_after_a_long_white_space_prefix_in_small_pieces(piece):
    """`format="auto"` with a long white-space prefix fed in small pieces detects the format and parses the rest
    exactly as without the prefix; white space past max_message_bytes is a FramingError."""
    from toolwire import FramingError

    data = body("anthropic", [("t", "f", {"a": 1})])
    padded = b"\r\n \t" * 3000 + data
    parser = toolwire.StreamParser("anthropic", format="auto")
    for i in range(0, len(padded), piece):
        parser.feed(padded[i:i + piece])
    parser.close()
    assert parser.turn.runnable_calls[0].args == {"a": 1}
    only_space = toolwire.StreamParser("anthropic", format="auto", max_message_bytes=1000)
    with pytest.raises(FramingError):
        for _ in range(2000):
            only_space.feed(b"\n" * piece)


# ---- adversarial inputs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "gemini", "openai-responses",
                                      "gemini-interactions"])
@pytest.mark.parametrize("history", [None, 5, True, 1.5])
def test_repair_history_of_something_that_is_not_a_list_is_a_usage_error(provider, history):
    """`repair_history` of null, a number or a bool (json.loads of a bad file) is a UsageError, not a TypeError."""
    with pytest.raises(UsageError):
        toolwire.repair_history(provider, history)


@pytest.mark.parametrize("name", [None, float("nan"), 5])
@pytest.mark.parametrize("echo_ids", [True, False])
def test_gemini_repair_settles_for_calls_with_odd_names(name, echo_ids):
    """A Gemini call whose name is null, NaN or a number: one repair, and a second pass changes nothing."""
    history = [{"role": "user", "parts": [{"text": "hi"}]},
               {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": name, "args": {"a": 1}}}]},
               {"role": "user", "parts": [{"functionResponse": {"id": "g1", "name": "f", "response": {"o": 1}}}]}]
    once, _ = toolwire.repair_history("gemini", history, echo_ids=echo_ids)
    twice, report = toolwire.repair_history("gemini", once, echo_ids=echo_ids)
    assert report.actions == []
    assert json.dumps(twice, default=str) == json.dumps(once, default=str)
    assert "no result was recorded" not in json.dumps(once, default=str)


def test_integer_unspecified_finish_reason_reads_like_its_name():
    """Gemini `finishReason: 0` reads like "FINISH_REASON_UNSPECIFIED" (an unknown reason), not as absent."""
    base = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}]}
    by_name = json.loads(json.dumps(base))
    by_name["candidates"][0]["finishReason"] = "FINISH_REASON_UNSPECIFIED"
    by_number = json.loads(json.dumps(base))
    by_number["candidates"][0]["finishReason"] = 0
    a, b = toolwire.parse("gemini", json.dumps(by_name)), toolwire.parse("gemini", json.dumps(by_number))
    assert (a.finish_reason, a.raw_finish_reason, a.error) == (b.finish_reason, b.raw_finish_reason, b.error)


@pytest.mark.parametrize("form", ["json_unicode_escape", "json_slash_escape", "url_encoded", "url_plus_encoded"])
def test_a_registered_key_is_scrubbed_in_escaped_forms(form, toolwire_debug):
    """A key echoed with JSON `\\uXXXX` / `\\/` escapes or URL-encoded is still scrubbed from every log field."""
    from urllib.parse import quote, quote_plus

    from toolwire import _log

    key = "PLANTED/proxy+token=Zq81-xY72-vv55-sk"
    _log.add_secret(key)
    text = {"json_unicode_escape": "".join(f"\\u{ord(c):04x}" for c in key),
            "json_slash_escape": key.replace("/", "\\/"),
            "url_encoded": quote(key, safe=""), "url_plus_encoded": quote_plus(key)}[form]
    with capture_logs() as logs:
        _log.emit(_log.WARNING, "stream.error", provider="openai-chat", type="x",
                  message='{"error":{"message":"bad key ' + text + '"}}', position=1)
    assert "Zq81-xY72-vv55" not in repr(logs) and "[redacted]" in repr(logs)


def test_a_usage_error_of_the_cli_is_one_line():
    """An unknown option or provider is one line on stderr with exit 2."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "toolwire.cli", "parse", "--provider", "nope", "x"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown provider" in proc.stderr


@pytest.mark.parametrize("provider", sorted(toolwire.PROVIDERS))
@pytest.mark.parametrize("tail", ["", "]" * 3, '"x'])
def test_a_short_payload_of_only_opening_brackets_is_limit_exceeded(provider, tail):
    """A payload too short to be deep JSON that does not decode, but opens more levels than allowed, is refused
    as too deep, not as a payload that does not decode."""
    from toolwire.codecs.eventstream import encode_message

    payload = ("[" * 130 + tail).encode()  # under twice the 116-level payload limit
    if provider == "bedrock-converse":
        data = encode_message({":event-type": "contentBlockDelta", ":content-type": "application/json",
                               ":message-type": "event"}, payload)
    else:
        data = b"data: " + payload + b"\n\n"
    turn = toolwire.parse(provider, data)
    assert turn.error is not None and turn.error.type == "limit_exceeded", turn.error
    assert turn.runnable_calls == []


def test_a_bedrock_stream_read_as_sse_says_which_format_to_pass():
    """StreamParser's default format is SSE: a Bedrock event stream read that way is a no_payload error that
    names the bytes it looked at and the format to pass, never "it is empty"; with that format it parses."""
    from ..dialects import adapter

    case = adapter("bedrock-converse").small_case()
    data = case.data
    parser = toolwire.StreamParser("bedrock-converse")
    parser.feed(data)
    parser.close()
    error = parser.turn.error
    assert error.type == "no_payload" and "empty" not in error.message
    assert f"in its {len(data)} bytes" in error.message and "format='eventstream'" in error.message
    for fmt in ("eventstream", "auto"):
        parser = toolwire.StreamParser("bedrock-converse", format=fmt)
        parser.feed(data)
        parser.close()
        assert parser.turn.finished_cleanly
        assert [c.args for c in parser.turn.runnable_calls] == [args for _, _, args in case.calls]


@pytest.mark.parametrize("data, says", [(b"", "(it is empty)"), (b" \n\r\n ", "(only white space in its 5 bytes)"),
                                        (b": keep-alive\n\n", "(no sse message in its 14 bytes)")])
def test_no_payload_says_what_the_input_held(data, says):
    """The no_payload error tells an empty input from white space and from bytes with no message in them."""
    turn = toolwire.parse("anthropic", data)
    assert turn.error.type == "no_payload" and turn.error.message.endswith(says), turn.error.message


def _deep_tail(provider: str, payload: bytes) -> bytes:
    from toolwire.codecs.eventstream import encode_message

    if provider == "bedrock-converse":
        return encode_message({":exception-type": "modelStreamErrorException", ":content-type": "application/json",
                               ":message-type": "exception"}, payload)
    return b"data: " + payload + b"\n\n"


@pytest.mark.parametrize("provider", sorted(toolwire.PROVIDERS))
@pytest.mark.parametrize("payload", [b"[" * 117, b"[DONE]" + b"[" * 117, b'{"message":' + b"[" * 117 + b"}"])
def test_a_short_deep_payload_that_is_never_decoded_is_limit_exceeded(provider, payload):
    """A payload too short to be deep JSON but opening more levels than allowed is refused as too deep even where
    nothing decodes it (after the terminator, read as a repeated [DONE], an exception frame's message): the turn
    whose calls had all ended is not runnable."""
    from ..dialects import adapter

    case = adapter(provider).small_case()
    turn = toolwire.parse(provider, case.data + _deep_tail(provider, payload), format=adapter(provider).stream_format)
    assert turn.error is not None and turn.error.type == "limit_exceeded", turn.error
    assert turn.runnable_calls == []


def test_a_deep_done_sentinel_in_the_middle_of_a_responses_stream_stops_it():
    """Responses: a short `[DONE]` followed by deep brackets mid-stream is a limit error; the call after it never
    becomes runnable."""
    def ev(d):
        return b"data: " + json.dumps(d).encode() + b"\n\n"

    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "",
            "status": "in_progress"}
    done = dict(item, arguments="{}", status="completed")
    data = (ev({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []},
                "sequence_number": 0})
            + ev({"type": "response.output_item.added", "output_index": 0, "item": item, "sequence_number": 1})
            + b"data: [DONE]" + b"[" * 117 + b"\n\n"
            + ev({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0,
                  "arguments": "{}", "sequence_number": 2})
            + ev({"type": "response.output_item.done", "output_index": 0, "item": done, "sequence_number": 3})
            + ev({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [done]},
                  "sequence_number": 4}))
    turn = toolwire.parse("openai-responses", data, format="sse")
    assert turn.error.type == "limit_exceeded" and turn.runnable_calls == [] and not turn.finished_cleanly
