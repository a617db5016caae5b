"""Peers: the official SDKs' own stream handling, over the same chunks, in the same process.

Each peer does what the SDK's ``Stream`` does with a live response (its SSE decoder over the raw chunks, JSON,
model construction), then what its stream helper does with every event, and returns the calls' arguments as
objects so the answer can be checked against the floor:

* openai-chat: ``openai._streaming.SSEDecoder`` → ``sse.json()`` → ``_models.construct_type(ChatCompletionChunk)``
  → ``ChatCompletionStreamState.handle_chunk``; ``get_final_completion()``; ``json.loads`` of each call's
  arguments (the SDK leaves them as text).
* openai-responses: same decoding, ``construct_type(ResponseStreamEvent)`` →
  ``ResponseStreamState.handle_event``; the completed response's function_call items, ``json.loads``.
* anthropic: ``anthropic._streaming.SSEDecoder`` → ``construct_type(RawMessageStreamEvent)`` →
  ``lib.streaming._messages.accumulate_event``; the snapshot's ``tool_use`` inputs (parsed by the SDK).
* gemini: ``google.genai._api_client.HttpResponse.segments()`` over an ``httpx.Response`` streaming the chunks
  (httpx2 or httpx; the SDK's SSE line reader and ``json.loads``), the ``json.dumps`` / ``json.loads`` round trip of
  ``request_streamed``, ``_GenerateContentResponse_from_mldev`` (``_from_vertex`` for the Vertex streamed form)
  and ``types.GenerateContentResponse._from_response`` for each chunk. The SDK does not assemble calls, so the
  peer adds the least user code: whole ``args`` as they are, ``partial_args`` string values joined per path.
* gemini-interactions: no peer.
* bedrock-converse: ``botocore.eventstream.EventStream`` (what ``boto3``'s ``converse_stream`` returns) over the
  chunks, with the ``bedrock-runtime`` service model's event-stream parser: binary frames with their CRCs checked,
  each event parsed into the model's shape; the peer adds the least user code, joining each content block's
  ``toolUse.input`` fragments and ``json.loads`` of the result (botocore does not assemble calls).

A peer whose SDK is not installed is left out ("-" in the table).
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["available_peers"]


def _openai_chat() -> Callable[[list[bytes]], list[Any]]:
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai._utils import is_mapping
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    def run(chunks: list[bytes]) -> list[Any]:
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        for sse in SSEDecoder().iter_bytes(iter(chunks)):
            if sse.data.startswith("[DONE]"):
                break
            data = sse.json()
            if is_mapping(data) and data.get("error"):
                raise RuntimeError(f"stream error: {data['error']}")
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=data))
        final = state.get_final_completion()
        return [json.loads(tc.function.arguments) for tc in final.choices[0].message.tool_calls or ()]

    return run


def _openai_responses() -> Callable[[list[bytes]], list[Any]]:
    from openai import omit
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai._utils import is_mapping
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    def run(chunks: list[bytes]) -> list[Any]:
        state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
        for sse in SSEDecoder().iter_bytes(iter(chunks)):
            if sse.data.startswith("[DONE]"):
                break
            data = sse.json()
            if is_mapping(data) and data.get("error"):
                raise RuntimeError(f"stream error: {data['error']}")
            state.handle_event(construct_type(type_=ResponseStreamEvent, value=data))
        final = state._completed_response
        assert final is not None, "no response.completed"
        return [json.loads(item.arguments) for item in final.output if item.type == "function_call"]

    return run


def _anthropic() -> Callable[[list[bytes]], list[Any]]:
    from anthropic._models import construct_type
    from anthropic._streaming import SSEDecoder
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    def run(chunks: list[bytes]) -> list[Any]:
        snapshot: Any = None
        json_bufs: dict[int, bytes] = {}
        for sse in SSEDecoder().iter_bytes(iter(chunks)):
            if sse.event == "ping" or sse.event is None:
                continue
            if sse.event == "error":
                raise RuntimeError(f"stream error: {sse.data}")
            if not sse.data:
                continue
            event = construct_type(type_=RawMessageStreamEvent, value=sse.json())
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
        return [block.input for block in snapshot.content if block.type == "tool_use"]

    return run


def _gemini(vertex: bool = False) -> Callable[[list[bytes]], list[Any]]:
    try:
        import httpx2 as httpx  # what google-genai uses when installed (a fork of httpx)
    except ImportError:
        import httpx
    from google.genai import _api_client, types
    from google.genai.models import _GenerateContentResponse_from_mldev, _GenerateContentResponse_from_vertex

    def run(chunks: list[bytes]) -> list[Any]:
        session = _api_client.HttpResponse(headers={}, response_stream=httpx.Response(200, content=iter(chunks)))
        calls: list[Any] = []
        for chunk in session.segments():
            # what request_streamed and Models._generate_content_stream do with each segment
            chunk_dump = json.dumps(chunk)
            if chunk_dump.startswith('{"error":'):
                raise RuntimeError(f"stream error: {chunk_dump[:200]}")
            response = types.HttpResponse(headers=session.headers, body=chunk_dump)
            response_dict = json.loads(response.body) if response.body else {}
            if vertex:
                response_dict = _GenerateContentResponse_from_vertex(response_dict, None, None)
            else:
                response_dict = _GenerateContentResponse_from_mldev(response_dict, None, None)
            value = types.GenerateContentResponse._from_response(response=response_dict, kwargs={})
            value.sdk_http_response = types.HttpResponse(headers=response.headers)
            # the least user code that assembles calls from the parsed chunks
            for cand in value.candidates or ():
                if cand.content is None:
                    continue
                for part in cand.content.parts or ():
                    fc = part.function_call
                    if fc is None:
                        continue
                    if fc.name is not None:
                        calls.append(fc.args if fc.args is not None else {})
                    for pa in fc.partial_args or ():
                        if pa.string_value is not None:
                            calls[-1].setdefault(pa.json_path, []).append(pa.string_value)
        out = []
        for c in calls:
            if c and all(isinstance(v, list) for v in c.values()) and all(k.startswith("$.") for k in c):
                out.append({k[2:]: "".join(v) for k, v in c.items()})
            else:
                out.append(c)
        return out

    return run


def _bedrock() -> Callable[[list[bytes]], list[Any]]:
    import botocore.session
    from botocore.eventstream import EventStream
    from botocore.parsers import EventStreamJSONParser

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    shape = model.operation_model("ConverseStream").output_shape.members["stream"]
    parser = EventStreamJSONParser()

    class _Raw:
        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        def stream(self) -> Any:
            return iter(self._chunks)

    def run(chunks: list[bytes]) -> list[Any]:
        frags: dict[int, list[str]] = {}
        for event in EventStream(_Raw(chunks), shape, parser, "ConverseStream"):
            delta = event.get("contentBlockDelta")
            if delta is not None and "toolUse" in delta["delta"]:
                frags.setdefault(delta["contentBlockIndex"], []).append(delta["delta"]["toolUse"]["input"])
        return [json.loads("".join(frags[i])) for i in sorted(frags)]

    return run


_FACTORIES: dict[str, list[tuple[str, Callable[..., Callable[[list[bytes]], list[Any]]]]]] = {
    "openai-chat": [("openai ChatCompletionStreamState", _openai_chat)],
    "openai-responses": [("openai ResponseStreamState", _openai_responses)],
    "anthropic": [("anthropic accumulate_event", _anthropic)],
    "gemini": [("google-genai GenerateContentResponse", _gemini)],
    "gemini-interactions": [],
    "bedrock-converse": [("botocore EventStream", _bedrock)],
}


def available_peers(dialect: str, *, vertex: bool = False
                    ) -> tuple[dict[str, Callable[[list[bytes]], list[Any]]], list[str]]:
    """The peers for ``dialect`` whose SDK imports, and notes about those that do not. ``vertex``: the stream
    is Gemini's Vertex streamed-arguments form (its SDK converter is ``_from_vertex``)."""
    peers = {}
    notes = []
    for name, factory in _FACTORIES.get(dialect, []):
        try:
            peers[name] = factory(vertex) if dialect == "gemini" else factory()
        except ImportError as exc:
            notes.append(f"{name}: not installed ({exc.name or exc})")
    return peers, notes
