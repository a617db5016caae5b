"""toolwire's structlog events: what is emitted, with which keys, and that nothing is emitted by default."""

from __future__ import annotations

import logging

import pytest
import structlog
from structlog.testing import capture_logs

import toolwire
from toolwire.statemachine.call import CallRecord
from toolwire.types import CallState, ProblemCode

ANTHROPIC_SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,'
    b'"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Paris\\"}"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},'
    b'"usage":{"output_tokens":5}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)

# the same turn with a second tool call (index 1) that is cut by the end of the stream
ANTHROPIC_SSE_TWO_CALLS_CUT = (
    ANTHROPIC_SSE.split(b"event: message_delta")[0]
    + b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":'
    b'{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":'
    b'{"type":"input_json_delta","partial_json":"{\\"tz\\": "}}\n\n'
)

TRANSITION_KEYS = {"provider", "call_id", "name", "src", "dst", "trigger"}


def new_record() -> CallRecord:
    return CallRecord(provider="test", local_id="x", call_id="c1", name="t")


def _logging_state(logs) -> str:
    """What decides whether an event reaches ``capture_logs``: shown when a test finds events missing."""
    import threading

    from toolwire import _log

    logger = logging.getLogger("toolwire")
    return (f"captured={[e.get('event') for e in logs][:20]} same_logger={_log.stdlib_logger is logger} "
            f"disabled={logger.disabled} level={logger.level} debug_enabled={logger.isEnabledFor(logging.DEBUG)} "
            f"manager.disable={logger.manager.disable} structlog_configured={structlog.is_configured()} "
            f"processors={structlog.get_config()['processors']} "
            f"threads={[t.name for t in threading.enumerate()]}")


def events_named(logs, name):
    return [entry for entry in logs if entry["event"] == name]


def test_sse_fixture_parses_to_one_complete_call():
    """The Anthropic SSE used here parses to one complete get_weather call (sanity check of the fixture)."""
    turn = toolwire.parse("anthropic", ANTHROPIC_SSE)
    assert [(c.call_id, c.name, c.state, c.args) for c in turn.calls] == [
        ("toolu_1", "get_weather", CallState.COMPLETE, {"city": "Paris"})
    ]


def test_every_transition_emits_call_transition(toolwire_debug):
    """Each recorded transition emits one debug call.transition with provider, call_id, name, src, dst, trigger."""
    with capture_logs() as logs:
        rec = new_record()
        rec.append("{")
        rec.append("}")  # hot path: accepted by a state check, not a transition (no history, no event)
        rec.receive()  # the internal transition fired explicitly is recorded and logged
        rec.finish()
        rec.dispatch()
        rec.answer()
    # only this record's events: a handler thread left by an earlier test may still log its own transitions
    transitions = [e for e in events_named(logs, "call.transition")
                   if e.get("provider") == "test" and e.get("call_id") == "c1"]
    assert len(transitions) == len(rec.history) == 5, _logging_state(logs)
    for entry, step in zip(transitions, rec.history):
        assert TRANSITION_KEYS <= entry.keys()
        assert entry["log_level"] == "debug"
        assert entry["provider"] == "test"
        assert entry["call_id"] == "c1"
        assert entry["name"] == "t"
        assert (entry["trigger"], entry["src"], entry["dst"]) == (step.trigger, step.src.value, step.dst.value)


def test_truncate_and_fail_emit_call_transition(toolwire_debug):
    """truncate and fail transitions are logged like the others."""
    with capture_logs() as logs:
        a = new_record()
        a.truncate(ProblemCode.STREAM_CUT, "cut")
        b = new_record()
        b.finish()
        b.fail(ProblemCode.FINAL_MISMATCH, "differs")
    got = [(e["trigger"], e["src"], e["dst"]) for e in events_named(logs, "call.transition")]
    assert got == [
        ("truncate", "announced", "truncated"),
        ("finish", "announced", "complete"),
        ("fail", "complete", "errored"),
    ]


def test_parsing_emits_call_transition_per_step(toolwire_debug):
    """Parsing the stream logs the call's receive and finish transitions with the call's ids."""
    with capture_logs() as logs:
        toolwire.parse("anthropic", ANTHROPIC_SSE)
    transitions = events_named(logs, "call.transition")
    assert [(e["trigger"], e["src"], e["dst"]) for e in transitions] == [
        ("receive", "announced", "accumulating"),
        ("finish", "accumulating", "complete"),
    ]
    for entry in transitions:
        assert TRANSITION_KEYS <= entry.keys()
        assert (entry["provider"], entry["call_id"], entry["name"]) == ("anthropic", "toolu_1", "get_weather")


def test_invalid_transition_emits_warning(toolwire_debug):
    """A refused trigger emits a warning call.invalid_transition with call_id, state and trigger."""
    rec = new_record()
    with capture_logs() as logs:
        with pytest.raises(toolwire.InvalidTransition):
            rec.answer()
    invalid = events_named(logs, "call.invalid_transition")
    assert len(invalid) == 1
    entry = invalid[0]
    assert entry["log_level"] == "warning"
    assert (entry["call_id"], entry["state"], entry["trigger"]) == ("c1", "announced", "answer")
    assert events_named(logs, "call.transition") == []


def test_invalid_append_emits_warning():
    """A fragment after the terminator logs call.invalid_transition (trigger receive) even at the default level."""
    rec = new_record()
    rec.finish()
    with capture_logs() as logs:
        with pytest.raises(toolwire.InvalidTransition):
            rec.append("{}")
    invalid = events_named(logs, "call.invalid_transition")
    assert [(e["call_id"], e["state"], e["trigger"], e["log_level"]) for e in invalid] == [
        ("c1", "complete", "receive", "warning")
    ]


def test_parse_emits_call_parsed_once_per_call(toolwire_debug):
    """parse() emits one info call.parsed for the call, carrying its final state."""
    with capture_logs() as logs:
        toolwire.parse("anthropic", ANTHROPIC_SSE)
    parsed = events_named(logs, "call.parsed")
    assert len(parsed) == 1
    entry = parsed[0]
    assert entry["log_level"] == "info"
    assert (entry["call_id"], entry["name"], entry["state"]) == ("toolu_1", "get_weather", "complete")


def test_parse_emits_call_parsed_for_each_of_two_calls(toolwire_debug):
    """With two calls (the second cut by the stream's end), call.parsed comes once per call with each final state."""
    with capture_logs() as logs:
        turn = toolwire.parse("anthropic", ANTHROPIC_SSE_TWO_CALLS_CUT)
    assert [c.state for c in turn.calls] == [CallState.COMPLETE, CallState.TRUNCATED]
    parsed = events_named(logs, "call.parsed")
    assert sorted((e["call_id"], e["state"]) for e in parsed) == [
        ("toolu_1", "complete"),
        ("toolu_2", "truncated"),
    ]


def test_stream_parser_close_emits_call_parsed_once(toolwire_debug):
    """StreamParser: call.parsed is emitted at close(), and a second close() does not repeat it."""
    parser = toolwire.StreamParser("anthropic")
    with capture_logs() as logs:
        parser.feed(ANTHROPIC_SSE)
        assert events_named(logs, "call.parsed") == []
        parser.close()
        parser.close()
    assert [(e["call_id"], e["state"]) for e in events_named(logs, "call.parsed")] == [("toolu_1", "complete")]


def test_default_level_emits_no_debug_or_info():
    """At the toolwire logger's default level (WARNING) no debug or info event is emitted."""
    assert logging.getLogger("toolwire").getEffectiveLevel() == logging.WARNING
    with capture_logs() as logs:
        toolwire.parse("anthropic", ANTHROPIC_SSE)
        rec = new_record()
        rec.append("{}")
        rec.finish()
        rec.dispatch()
        rec.answer()
    assert [e for e in logs if e["log_level"] in ("debug", "info")] == []
    assert events_named(logs, "call.transition") == []
    assert events_named(logs, "call.parsed") == []


def test_unconfigured_structlog_prints_nothing(capsys):
    """With structlog unconfigured and default logging, parsing and an invalid transition print nothing."""
    assert not structlog.is_configured()
    turn = toolwire.parse("anthropic", ANTHROPIC_SSE)
    assert turn.calls[0].state is CallState.COMPLETE
    toolwire.parse("anthropic", ANTHROPIC_SSE_TWO_CALLS_CUT)  # a stream_cut warning too
    rec = new_record()
    with pytest.raises(toolwire.InvalidTransition):
        rec.answer()
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ""


def test_unconfigured_structlog_prints_nothing_even_at_debug(capsys, toolwire_debug):
    """With the toolwire logger at DEBUG but no handlers configured, toolwire still prints nothing itself."""
    assert not structlog.is_configured()
    toolwire.parse("anthropic", ANTHROPIC_SSE)
    rec = new_record()
    with pytest.raises(toolwire.InvalidTransition):
        rec.answer()
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ""


PLANTED = "sk-planted-SECRET-0123456789abcdef"


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_a_registered_secret_is_redacted_from_every_event_field(level, toolwire_debug):
    """An API key registered by a transport never appears in any field of any event, at any level, nested or not,
    nor as a prefix left at the end of a cut excerpt."""
    from toolwire import _log

    _log.add_secret(PLANTED)
    lvl = {"debug": _log.DEBUG, "info": _log.INFO, "warning": _log.WARNING, "error": _log.ERROR}[level]
    with capture_logs() as logs:
        _log.emit(lvl, "stream.error", provider="openai-chat", type=f"invalid_key {PLANTED}",
                  message={"error": {"message": f"Incorrect API key provided: {PLANTED}", "list": [PLANTED]}},
                  position=f"...body cut here {PLANTED[:20]}")
    text = repr(logs)
    assert PLANTED not in text and PLANTED[:12] not in text
    assert "[redacted]" in text


def test_key_shaped_text_is_redacted_even_when_not_registered(toolwire_debug):
    """Text shaped like a provider key or a bearer token is redacted from log fields."""
    from toolwire import _log

    with capture_logs() as logs:
        _log.emit(_log.WARNING, "stream.error", provider="gemini", type="x",
                  message="key=AIzaSyD-abcdefghijklmnopqrstuv1234 auth: Bearer abc.def.ghi123456 sk-ant-api03-zzzzzzzzzz",
                  position=1)
    text = repr(logs)
    for secret in ("AIzaSyD-abcdefghijklmnopqrstuv1234", "abc.def.ghi123456", "sk-ant-api03-zzzzzzzzzz"):
        assert secret not in text


def test_a_short_value_that_begins_a_secret_is_not_redacted(toolwire_debug):
    """A secret's prefix is redacted at the end of a longer text (a cut excerpt), but a whole short value that
    merely equals the first characters of a registered secret (a provider named ``test`` once a key
    ``test-…`` is registered) is logged as it is: redacting it hid values from the logs and made this module's
    transition test depend on which keys earlier tests had registered."""
    from toolwire import _log

    _log.add_secret("test-secret-0123456789")
    with capture_logs() as logs:
        _log.emit(_log.INFO, "dispatch.result", provider="test", call_id="c1", excerpt="... key test-secr")
    [entry] = logs
    assert entry["provider"] == "test" and entry["call_id"] == "c1"
    assert entry["excerpt"] == "... key " + _log.REDACTED
