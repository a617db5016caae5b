"""Signals off the usual path that say a turn, a choice or a call is not what it must be: nothing runs.

Each case is a response that would otherwise run a write: a Responses ``function_call`` item whose status says it
did not complete (``failed``, ``in_progress``), a Responses top-level ``error`` beside ``status: completed``, a Chat
``refusal`` beside ``tool_calls``, an Interactions ``error`` beside ``requires_action``, a message whose role is not
the assistant's (Anthropic, Chat, Gemini), and a Gemini candidate that arrives after the prompt was blocked. Each is
checked as a whole body and, where the dialect streams that signal, as a stream (both parser modes), through the
public API: the turn says why (an error, or an unclean finish of the dispatched choice), and ``Dispatcher.run`` and
``arun`` answer every call ``not_run`` without calling the handler. Controls show the same responses without the
signal still run, so each case checks the signal, not a broken response.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire
from toolwire.registry import Dispatcher, Registry, Tool

from ..test_codec_gemini import chunk as gemini_chunk
from ..test_codec_gemini import fc, partial, pa, start
from ..test_codec_gemini import sse as gemini_sse
from ..test_codec_gemini_interactions import IID, completed, created, function_call
from ..test_codec_gemini_interactions import sse as interactions_sse
from ..test_codec_openai_responses import function_item, sse_bytes, stream
from ..wire import anthropic_events, chunk, sse, tc
from .streams import MODES

ARGS = '{"a": 1}'


class Writes:
    """A registry with one write tool ``f`` whose handler records each run."""

    def __init__(self) -> None:
        self.ran: list[Any] = []
        self.registry = Registry([Tool.from_schema("f", {"type": "object"}, self._handler, effect="write")])

    def _handler(self, args: dict) -> str:
        self.ran.append(args)
        return "written"

    def dispatch(self, turn: toolwire.Turn, choice: int = 0) -> list[str]:
        """``run`` and ``arun`` of ``turn``'s choice; the result kinds of both."""
        results = Dispatcher(self.registry).run(turn, conversation_id="c", turn_id="t", choice=choice)
        aresults = asyncio.run(Dispatcher(self.registry).arun(turn, conversation_id="c2", turn_id="t",
                                                              choice=choice))
        return [r.kind.value for r in results] + [r.kind.value for r in aresults]


def _turns(provider: str, data: bytes, fmt: str) -> list[tuple[toolwire.Turn, bool]]:
    """The turn of ``data`` parsed whole, then streamed in both parser modes; each with its ``keep_calls``."""
    turns = [(toolwire.parse(provider, data, format=fmt), True)]
    for keep_calls in MODES:
        parser = toolwire.StreamParser(provider, format=fmt, keep_calls=keep_calls)
        parser.feed(data)
        parser.close()
        turns.append((parser.turn, keep_calls))
    return turns


def _nothing_runs(provider: str, data: bytes, fmt: str, *, choice: int = 0,
                  read: bool = True) -> list[toolwire.Turn]:
    """Every parse of ``data`` reports an unclean ``choice`` (an error or an unclean finish) and dispatches
    nothing: each call of the choice is answered ``not_run`` and the handler never ran (a turn of the streaming
    mode keeps no ended call, so it may have none to answer). ``read=False``: the signal stops the reading (a
    message that is not the assistant's), so the turn has no call but those opened before it, errored."""
    turns = []
    for turn, keep_calls in _turns(provider, data, fmt):
        assert not turn.choice_finished_cleanly(choice), turn
        writes = Writes()
        kinds = writes.dispatch(turn, choice)
        assert writes.ran == [] and set(kinds) <= {"not_run"}, (kinds, turn)
        assert kinds or not keep_calls or not read, turn
        assert read or not any(c.runnable for c in turn.calls), turn
        turns.append(turn)
    return turns


def _runs(provider: str, data: bytes, fmt: str, *, choice: int = 0) -> None:
    """The control: the same response without the signal runs its call."""
    turn = toolwire.parse(provider, data, format=fmt)
    assert turn.choice_finished_cleanly(choice), turn
    writes = Writes()
    writes.dispatch(turn, choice)
    assert len(writes.ran) == 2  # run and arun


# ---- 1. OpenAI Responses: a function_call item that did not complete ------------------------------------------
def _responses_body(status: str | None, *, error: Any = None, **item: Any) -> bytes:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ARGS, **item}
    if status is not None:
        call["status"] = status
    return json.dumps({"id": "resp_1", "object": "response", "model": "gpt-test", "status": "completed",
                       "output": [call], "error": error, "incomplete_details": None}).encode()


def _responses_stream(status: str, *, error: Any = None) -> bytes:
    evs = stream(function_item(0, "fc_1", "call_1", "f", ARGS, status=status))
    if error is not None:
        evs[-1] = {**evs[-1], "response": {**evs[-1]["response"], "error": error}}
    return sse_bytes(evs)


@pytest.mark.parametrize("status", ["failed", "in_progress"])
def test_a_responses_call_whose_item_did_not_complete_never_runs_in_a_body(status):
    for turn in _nothing_runs("openai-responses", _responses_body(status), "json"):
        assert turn.error is not None and turn.error.type == "protocol_error"
        assert status in turn.error.message


@pytest.mark.parametrize("status", ["failed", "in_progress"])
def test_a_responses_call_whose_item_did_not_complete_never_runs_in_a_stream(status):
    for turn in _nothing_runs("openai-responses", _responses_stream(status), "sse"):
        assert turn.error is not None and turn.error.type == "protocol_error"
        assert status in turn.error.message


def test_a_responses_call_whose_item_completed_runs():
    _runs("openai-responses", _responses_body("completed"), "json")
    _runs("openai-responses", _responses_body(None), "json")
    _runs("openai-responses", _responses_stream("completed"), "sse")


def test_a_responses_call_a_program_waits_for_runs_while_in_progress():
    """Programmatic tool calling: the item of a call a hosted program made stays ``in_progress`` until its result
    is sent (as recorded from the API), so that status alone does not stop it."""
    caller = {"type": "program", "caller_id": "call_p"}
    _runs("openai-responses", _responses_body("in_progress", caller=caller), "json")
    for turn in _nothing_runs("openai-responses", _responses_body("failed", caller=caller), "json"):
        assert turn.error is not None


# ---- 2. OpenAI Responses: a top-level error beside status completed --------------------------------------------
ERROR = {"code": "server_error", "message": "The model failed."}


def test_a_responses_error_beside_completed_never_runs_in_a_body():
    for turn in _nothing_runs("openai-responses", _responses_body("completed", error=ERROR), "json"):
        assert turn.error is not None and turn.error.code == "server_error"
        assert turn.error.message == "The model failed."


def test_a_responses_error_beside_completed_never_runs_in_a_stream():
    for turn in _nothing_runs("openai-responses", _responses_stream("completed", error=ERROR), "sse"):
        assert turn.error is not None and turn.error.code == "server_error"


# ---- 3. OpenAI Chat: a refusal beside tool calls ---------------------------------------------------------------
def _chat_body(*, refusal: str | None = None, role: str | None = "assistant") -> bytes:
    message: dict[str, Any] = {"content": None, "refusal": refusal, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": ARGS}}]}
    if role is not None:
        message["role"] = role
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()


def _chat_stream(refusal: str | None = None, *, role: str = "assistant", refusal_last: bool = False) -> bytes:
    first = chunk()
    first["choices"][0]["delta"] = {"role": role, "content": None}
    said = chunk()
    said["choices"][0]["delta"] = {"refusal": refusal}
    payloads = [first, *([said] if refusal is not None and not refusal_last else []),
                chunk(tc(0, "call_1", "f", "")), chunk(tc(0, args='{"a": ')), chunk(tc(0, args="1}")),
                *([said] if refusal is not None and refusal_last else []), chunk(finish="tool_calls"), "[DONE]"]
    return sse(*payloads)


def test_a_chat_refusal_beside_tool_calls_never_runs_in_a_body():
    for turn in _nothing_runs("openai-chat", _chat_body(refusal="I can't help with that."), "json"):
        assert turn.finish_reason is toolwire.FinishReason.CONTENT_FILTER
        assert turn.raw_finish_reason == "refusal"


@pytest.mark.parametrize("refusal_last", [False, True])
def test_a_chat_refusal_beside_tool_calls_never_runs_in_a_stream(refusal_last):
    for turn in _nothing_runs("openai-chat", _chat_stream("I can't", refusal_last=refusal_last), "sse"):
        assert turn.finish_reason is toolwire.FinishReason.CONTENT_FILTER
        assert turn.raw_finish_reason == "refusal"


def test_a_chat_response_without_a_refusal_runs():
    _runs("openai-chat", _chat_body(), "json")
    _runs("openai-chat", _chat_body(refusal=""), "json")
    _runs("openai-chat", _chat_stream(), "sse")
    _runs("openai-chat", _chat_stream(""), "sse")


# ---- 4. Gemini Interactions: an error beside requires_action --------------------------------------------------
def _interactions_body(error: Any) -> bytes:
    return json.dumps({"id": IID, "object": "interaction", "status": "requires_action", "error": error,
                       "steps": [{"type": "function_call", "id": "fc_1", "name": "f",
                                  "arguments": {"a": 1}}]}).encode()


def _interactions_stream(error: Any) -> bytes:
    extra = {} if error is None else {"error": error}
    return interactions_sse(created(), *function_call(0, "fc_1", "f", [ARGS]), completed("requires_action", **extra))


INTERACTION_ERROR = {"code": "INTERNAL", "message": "Something went wrong."}


def test_an_interactions_error_beside_requires_action_never_runs_in_a_body():
    for turn in _nothing_runs("gemini-interactions", _interactions_body(INTERACTION_ERROR), "json"):
        assert turn.error is not None and turn.error.code == "INTERNAL"


def test_an_interactions_error_beside_requires_action_never_runs_in_a_stream():
    for turn in _nothing_runs("gemini-interactions", _interactions_stream(INTERACTION_ERROR), "sse"):
        assert turn.error is not None and turn.error.code == "INTERNAL"


def test_an_interaction_without_an_error_runs():
    _runs("gemini-interactions", _interactions_body(None), "json")
    _runs("gemini-interactions", _interactions_stream(None), "sse")


# ---- 5. a message whose role is not the assistant's ------------------------------------------------------------
def _anthropic_body(role: str | None) -> bytes:
    msg: dict[str, Any] = {"id": "msg_1", "type": "message", "model": "claude-x", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}], "stop_reason": "tool_use",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    if role is not None:
        msg["role"] = role
    return json.dumps(msg).encode()


def _anthropic_stream(role: str) -> bytes:
    evs = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": [ARGS]}])
    evs[0]["message"]["role"] = role
    return sse(*evs, events=True)


def _gemini_body(role: str | None, *, array: bool = False) -> bytes:
    content: dict[str, Any] = {"parts": [fc("f", {"a": 1}, id="g1")]}
    if role is not None:
        content["role"] = role
    resp = {"candidates": [{"index": 0, "content": content, "finishReason": "STOP"}], "responseId": "r1"}
    return json.dumps([resp] if array else resp).encode()


def _gemini_stream(role: str, *, at: int) -> bytes:
    """A Vertex streamed call in four chunks; the one at ``at`` states ``role`` (the others none, as Vertex
    omits it in later chunks)."""
    chunks = [gemini_chunk(start("f", id="g1")), gemini_chunk(partial(pa("$.a", "x"))),
              gemini_chunk(partial(pa("$.a", "y"))), gemini_chunk(fc(), finish="STOP")]
    for c in chunks:
        del c["candidates"][0]["content"]["role"]
    chunks[at]["candidates"][0]["content"]["role"] = role
    return gemini_sse(*chunks)


@pytest.mark.parametrize("role", ["user", "system"])
def test_an_anthropic_message_with_another_role_never_runs(role):
    for data, fmt in ((_anthropic_body(role), "json"), (_anthropic_stream(role), "sse")):
        for turn in _nothing_runs("anthropic", data, fmt, read=False):
            assert turn.error is not None and turn.error.type == "protocol_error" and role in turn.error.message


def test_an_anthropic_message_with_the_assistant_role_or_none_runs():
    _runs("anthropic", _anthropic_body("assistant"), "json")
    _runs("anthropic", _anthropic_body(None), "json")
    _runs("anthropic", _anthropic_stream("assistant"), "sse")


@pytest.mark.parametrize("role", ["user", "tool"])
def test_a_chat_message_with_another_role_never_runs(role):
    for data, fmt in ((_chat_body(role=role), "json"), (_chat_stream(role=role), "sse")):
        for turn in _nothing_runs("openai-chat", data, fmt, read=False):
            assert turn.error is not None and turn.error.type == "protocol_error" and role in turn.error.message


def test_a_chat_message_with_the_assistant_role_or_none_runs():
    _runs("openai-chat", _chat_body(role=None), "json")
    _runs("openai-chat", _chat_stream(role="assistant"), "sse")


@pytest.mark.parametrize("role", ["user", "function"])
def test_a_gemini_candidate_with_another_role_never_runs(role):
    cases = [(_gemini_body(role), "json"), (_gemini_body(role, array=True), "json")]
    cases += [(_gemini_stream(role, at=at), "sse") for at in range(4)]  # the later ones take the hot path
    for data, fmt in cases:
        for turn in _nothing_runs("gemini", data, fmt, read=False):
            assert turn.error is not None and turn.error.type == "protocol_error" and role in turn.error.message


def test_a_gemini_candidate_with_the_model_role_or_none_runs():
    _runs("gemini", _gemini_body("model"), "json")
    _runs("gemini", _gemini_body(None), "json")
    for at in range(4):
        _runs("gemini", _gemini_stream("model", at=at), "sse")


# ---- 6. Gemini: a candidate after the prompt's block reason ----------------------------------------------------
BLOCK = {"blockReason": "SAFETY"}


def _candidate(index: int) -> dict:
    return {"index": index, "content": {"role": "model", "parts": [fc("f", {"a": 1}, id=f"g{index}")]},
            "finishReason": "STOP"}


def _text_candidate(index: int) -> dict:
    return {"index": index, "content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}


LATE_CANDIDATES = {
    # the block alone, then candidate 1
    "block_then_candidate": [{"promptFeedback": BLOCK}, {"candidates": [_candidate(1)]}],
    # candidate 0 beside the block, then candidate 1
    "block_beside_candidate_then_candidate": [{"candidates": [_text_candidate(0)], "promptFeedback": BLOCK},
                                              {"candidates": [_candidate(1)]}],
}


@pytest.mark.parametrize("name", LATE_CANDIDATES)
def test_a_gemini_candidate_after_the_prompt_block_never_runs(name):
    payloads = LATE_CANDIDATES[name]
    for data, fmt in ((gemini_sse(*payloads), "sse"), (json.dumps(payloads).encode(), "json")):
        for turn in _nothing_runs("gemini", data, fmt, choice=1):
            [late] = [c for c in turn.choices if c.index == 1]
            assert late.finish_reason is toolwire.FinishReason.CONTENT_FILTER and late.raw_finish_reason == "SAFETY"


def test_gemini_candidates_without_a_block_run():
    payloads = [{"candidates": [_text_candidate(0)]}, {"candidates": [_candidate(1)]}]
    _runs("gemini", gemini_sse(*payloads), "sse", choice=1)
    _runs("gemini", json.dumps(payloads).encode(), "json", choice=1)


# ---- every stream above, fed in any pieces ---------------------------------------------------------------------
#: name -> (provider, stream bytes, the choice the signal concerns)
STREAMS: dict[str, tuple[str, bytes, int]] = {
    "responses_item_failed": ("openai-responses", _responses_stream("failed"), 0),
    "responses_item_in_progress": ("openai-responses", _responses_stream("in_progress"), 0),
    "responses_error_beside_completed": ("openai-responses", _responses_stream("completed", error=ERROR), 0),
    "chat_refusal_first": ("openai-chat", _chat_stream("I can't"), 0),
    "chat_refusal_last": ("openai-chat", _chat_stream("I can't", refusal_last=True), 0),
    "chat_user_role": ("openai-chat", _chat_stream(role="user"), 0),
    "interactions_error": ("gemini-interactions", _interactions_stream(INTERACTION_ERROR), 0),
    "anthropic_user_role": ("anthropic", _anthropic_stream("user"), 0),
    **{f"gemini_user_role_at_{at}": ("gemini", _gemini_stream("user", at=at), 0) for at in range(4)},
    **{f"gemini_{name}": ("gemini", gemini_sse(*payloads), 1) for name, payloads in LATE_CANDIDATES.items()},
}


@given(st.sampled_from(sorted(STREAMS)), st.lists(st.integers(0, 10**6), max_size=12), st.booleans())
def test_any_split_of_a_stream_with_a_signal_runs_nothing(name, cuts, keep_calls):
    """Cut anywhere, in either parser mode: the choice is unclean and the dispatcher runs nothing of it; the
    default mode gives the turn of the whole stream."""
    provider, data, choice = STREAMS[name]
    at = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *at], [*at, len(data)])]
    parser = toolwire.StreamParser(provider, keep_calls=keep_calls)
    for piece in pieces:
        parser.feed(piece)
    parser.close()
    turn = parser.turn
    assert not turn.choice_finished_cleanly(choice)
    writes = Writes()
    results = Dispatcher(writes.registry).run(turn, conversation_id="c", turn_id="t", choice=choice)
    assert writes.ran == [] and {r.kind.value for r in results} <= {"not_run"}
    if keep_calls:
        assert turn == toolwire.parse(provider, data, format="sse")
