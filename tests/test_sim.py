"""toolwire.sim: the simulated provider over real loopback HTTP, parsed by toolwire, in all five dialects."""

from __future__ import annotations

import base64
import copy
import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

import toolwire
from toolwire import CallState, FinishReason
from toolwire.sim import SCENARIOS, Fault, RecordedRequest, SimProvider

from .dialects import SIMULATED

DIALECTS = list(SIMULATED)  # every dialect the simulator speaks
STREAMED_ARGS = ["openai-chat", "openai-responses", "anthropic", "gemini-interactions",
                 "bedrock-converse"]  # Gemini calls come whole
AUTH = {
    "openai-chat": {"Authorization": "Bearer sk-test"},
    "openai-responses": {"Authorization": "Bearer sk-test"},
    "anthropic": {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"},
    "gemini": {"x-goog-api-key": "test-key"},
    "gemini-interactions": {"x-goog-api-key": "test-key"},
    "bedrock-converse": {"Authorization": "Bearer bedrock-api-key-test"},
}
#: Bedrock refuses tool blocks in a history without a toolConfig: the conversations built here declare one tool
BEDROCK_TOOLS = {"toolConfig": {"tools": [{"toolSpec": {"name": "lookup_demo_value", "inputSchema": {
    "json": {"type": "object", "properties": {"key": {"type": "string"}}}}}}]}}
VALUES = {"height": "170 cm", "weight": "70 kg"}
HW = SCENARIOS["height_weight"].prompts["en"]
HEIGHT = SCENARIOS["height"].prompts["en"]


# ---- HTTP over loopback ----------------------------------------------------------------------------------------------


@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool
    first_byte: float

    def json(self) -> Any:
        return json.loads(self.body)


def post(base: str, path: str, body: Any, headers: dict[str, str] | None = None, *, raw: bytes | None = None) -> Resp:
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    data = raw if raw is not None else json.dumps(body).encode()
    t0 = time.monotonic()
    conn.request("POST", path, data, {"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    first = time.monotonic() - t0
    chunks, complete = [], True
    try:
        while True:
            b = r.read1(65536)
            if not b:
                break
            chunks.append(b)
    except http.client.IncompleteRead as exc:
        chunks.append(exc.partial)
        complete = False
    except (ConnectionError, http.client.HTTPException):
        complete = False
    conn.close()
    length = r.getheader("content-length")
    if length is not None and len(b"".join(chunks)) < int(length):
        complete = False
    return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, b"".join(chunks), complete, first)


def raw_writes(base: str, path: str, body: Any, headers: dict[str, str]) -> list[bytes]:
    """The HTTP chunks of a streamed response, read off the socket (one chunk per server write)."""
    u = urlsplit(base)
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Content-Type": "application/json",
                                                 "Content-Length": str(len(data)), "Connection": "close",
                                                 "Host": "localhost"}.items())
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + data)
        buf = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    rest = buf.split(b"\r\n\r\n", 1)[1]
    out = []
    while rest:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return out


# ---- conversations built by hand from parsed turns -------------------------------------------------------------------


@dataclass
class Conv:
    """One conversation in one dialect: the history in that dialect's own request shape."""

    dialect: str
    prompt: str
    stream: bool = True
    history: list[Any] = field(default_factory=list)
    prev: str | None = None  # Interactions: previous_interaction_id
    pending_input: list[Any] = field(default_factory=list)
    gemini_sse: bool = True

    def __post_init__(self) -> None:
        d, p = self.dialect, self.prompt
        if d == "gemini":
            self.history = [{"role": "user", "parts": [{"text": p}]}]
        elif d == "bedrock-converse":
            self.history = [{"role": "user", "content": [{"text": p}]}]
        elif d == "openai-responses":
            self.history = [{"role": "user", "content": p}]
        elif d != "gemini-interactions":
            self.history = [{"role": "user", "content": p}]

    def request(self) -> tuple[str, dict[str, Any]]:
        d = self.dialect
        if d == "openai-chat":
            return "/v1/chat/completions", {"model": "gpt-sim", "stream": self.stream, "messages": self.history}
        if d == "openai-responses":
            return "/v1/responses", {"model": "gpt-sim", "stream": self.stream, "input": self.history}
        if d == "anthropic":
            return "/v1/messages", {"model": "claude-sim", "max_tokens": 1024, "stream": self.stream,
                                    "messages": self.history}
        if d == "bedrock-converse":
            return (f"/model/us.amazon.nova-2-lite-v1%3A0/{'converse-stream' if self.stream else 'converse'}",
                    {"messages": self.history, "inferenceConfig": {"maxTokens": 1024}, **BEDROCK_TOOLS})
        if d == "gemini":
            method = "generateContent"
            if self.stream:
                method = "streamGenerateContent" + ("?alt=sse" if self.gemini_sse else "")
            return f"/v1beta/models/gemini-sim:{method}", {"contents": self.history}
        body: dict[str, Any] = {"model": "gemini-sim", "stream": self.stream,
                                "input": self.pending_input or self.prompt}
        if self.prev:
            body["previous_interaction_id"] = self.prev
        return "/v1beta/interactions", body

    def add_turn(self, turn: toolwire.Turn) -> None:
        d = self.dialect
        if d == "openai-responses":
            self.history.extend(copy.deepcopy(turn.assistant_message))
        elif d == "gemini-interactions":
            self.prev = turn.response_id
            self.pending_input = []
        else:
            self.history.append(copy.deepcopy(turn.assistant_message))

    def add_results(self, results: list[tuple[toolwire.ToolCall, Any, bool]]) -> None:
        d = self.dialect
        if d == "openai-chat":
            for c, v, _ in results:
                self.history.append({"role": "tool", "tool_call_id": c.call_id, "content": json.dumps(v)})
        elif d == "openai-responses":
            for c, v, _ in results:
                self.history.append({"type": "function_call_output", "call_id": c.call_id, "output": json.dumps(v)})
        elif d == "anthropic":
            self.history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.call_id, "content": json.dumps(v), "is_error": err}
                for c, v, err in results]})
        elif d == "bedrock-converse":
            self.history.append({"role": "user", "content": [
                {"toolResult": {"toolUseId": c.call_id, "content": [{"json": v} if isinstance(v, dict) else
                                                                    {"text": json.dumps(v)}],
                                "status": "error" if err else "success"}} for c, v, err in results]})
        elif d == "gemini":
            parts = []
            for c, v, err in results:
                fr: dict[str, Any] = {"name": c.name, "response": {"error": v} if err else {"output": v}}
                if c.call_id is not None:
                    fr["id"] = c.call_id
                parts.append({"functionResponse": fr})
            self.history.append({"role": "user", "parts": parts})
        else:
            self.pending_input = [{"type": "function_result", "call_id": c.call_id, "name": c.name,
                                   "result": json.dumps(v), "is_error": err} for c, v, err in results]


def send(base: str, conv: Conv) -> tuple[Resp, toolwire.Turn]:
    path, body = conv.request()
    resp = post(base, path, body, AUTH[conv.dialect])
    assert resp.status == 200, resp.body[:500]
    return resp, toolwire.parse(conv.dialect, resp.body, format="auto" if conv.stream else "json")


def lookup(call: toolwire.ToolCall) -> tuple[toolwire.ToolCall, Any, bool]:
    return call, {"found": True, "key": call.args["key"], "value": VALUES[call.args["key"]]}, False


def error_message(dialect: str, status: int, body: Any) -> str:
    """Check the provider's error body shape and return its message."""
    if dialect in ("openai-chat", "openai-responses"):
        assert set(body["error"]) == {"message", "type", "param", "code"}
        return body["error"]["message"]
    if dialect == "anthropic":
        assert body["type"] == "error" and body["request_id"].startswith("req_") and body["error"]["type"]
        return body["error"]["message"]
    if dialect == "bedrock-converse":
        assert set(body) == {"message"}
        return body["message"]
    if dialect == "gemini":
        if isinstance(body, list):
            [body] = body
        assert body["error"]["code"] == status and body["error"]["status"].isupper()
        return body["error"]["message"]
    assert isinstance(body["error"]["code"], str)
    return body["error"]["message"]


# ---- fixtures --------------------------------------------------------------------------------------------------------


@dataclass
class Served:
    sim: SimProvider
    url: str


@pytest.fixture(scope="module")
def _server():
    sim = SimProvider(seed=7)
    with sim.serve() as url:
        yield Served(sim, url)


@pytest.fixture
def sv(_server: Served) -> Served:
    _server.sim.reset()
    return _server


def first_turn(sv: Served, dialect: str, prompt: str = HW, **kw: Any) -> tuple[Conv, toolwire.Turn]:
    conv = Conv(dialect, prompt, **kw)
    _, turn = send(sv.url, conv)
    conv.add_turn(turn)
    return conv, turn


# ---- the first response ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_parallel_calls_stream_with_the_dialects_ids(sv: Served, dialect: str) -> None:
    """The parallel-call scenario streams two complete lookup calls under the dialect's own ids."""
    _, turn = first_turn(sv, dialect)
    assert turn.finished_cleanly and turn.finish_reason is FinishReason.TOOL_CALLS
    assert [(c.name, c.args) for c in turn.calls] == [("lookup_demo_value", {"key": "height"}),
                                                      ("lookup_demo_value", {"key": "weight"})]
    assert all(c.state is CallState.COMPLETE for c in turn.calls)
    ids = [c.call_id for c in turn.calls]
    assert len(set(ids)) == 2
    prefix = {"openai-chat": "call_", "openai-responses": "call_", "anthropic": "toolu_",
              "bedrock-converse": "tooluse_"}.get(dialect, "")
    assert all(i and i.startswith(prefix) for i in ids)
    if dialect == "openai-responses":
        assert [it["type"] for it in turn.assistant_message] == ["reasoning", "function_call", "function_call"]
        assert turn.assistant_message[0]["encrypted_content"]
        assert all(it["id"].startswith("fc_") for it in turn.assistant_message[1:])
    if dialect == "anthropic":
        first = turn.assistant_message["content"][0]
        assert first["type"] == "thinking" and first["signature"]
    if dialect == "gemini":
        parts = turn.assistant_message["parts"]
        assert "thoughtSignature" in parts[0] and "thoughtSignature" not in parts[1]
    rec = sv.sim.requests[-1]
    assert isinstance(rec, RecordedRequest) and (rec.dialect, rec.status, rec.fault) == (dialect, 200, None)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_results_in_reverse_order_are_matched_by_id(sv: Served, dialect: str) -> None:
    """A follow-up answering both calls in reverse order gets both values right: results pair by id."""
    conv, turn = first_turn(sv, dialect)
    conv.add_results([lookup(c) for c in reversed(turn.calls)])
    _, answer = send(sv.url, conv)
    assert answer.calls == [] and answer.finish_reason is FinishReason.STOP
    assert answer.text == "You are 170 cm tall and weigh 70 kg."


@pytest.mark.parametrize("dialect", DIALECTS)
def test_swapped_results_show_the_model_reads_ids(sv: Served, dialect: str) -> None:
    """Each call's value comes from the result under its id: answering height's id with weight swaps them."""
    conv, turn = first_turn(sv, dialect)
    h, w = turn.calls
    conv.add_results([(h, {"found": True, "value": "70 kg"}, False), (w, {"found": True, "value": "170 cm"}, False)])
    _, answer = send(sv.url, conv)
    assert answer.text == "You are 70 kg tall and weigh 170 cm."


@pytest.mark.parametrize("dialect", DIALECTS)
def test_non_streaming_requests_get_whole_bodies(sv: Served, dialect: str) -> None:
    """Without streaming each dialect answers with one JSON body that toolwire parses into the same calls."""
    conv = Conv(dialect, HW, stream=False)
    resp, turn = send(sv.url, conv)
    assert resp.headers["content-type"].startswith("application/json")
    assert turn.finished_cleanly and [c.args["key"] for c in turn.calls] == ["height", "weight"]
    conv.add_turn(turn)
    conv.add_results([lookup(c) for c in turn.calls])
    _, answer = send(sv.url, conv)
    assert answer.text == "You are 170 cm tall and weigh 70 kg."


def test_gemini_sse_uses_crlf_separators(sv: Served) -> None:
    """Gemini ``alt=sse`` frames every chunk as ``data: …`` ended by ``\\r\\n\\r\\n``, without a sentinel."""
    conv = Conv("gemini", HW)
    resp, _ = send(sv.url, conv)
    frames = resp.body.split(b"\r\n\r\n")
    assert frames[-1] == b"" and all(f.startswith(b"data: {") for f in frames[:-1]) and b"[DONE]" not in resp.body


def test_gemini_without_alt_sse_streams_a_json_array(sv: Served) -> None:
    """Without ``alt=sse`` the body is one JSON array of indented chunks, sent progressively."""
    conv = Conv("gemini", HW, gemini_sse=False)
    path, body = conv.request()
    writes = raw_writes(sv.url, path, body, AUTH["gemini"])
    data = b"".join(writes)
    assert data.startswith(b"[{") and data.endswith(b"\n]") and b"\n,{" in data and len(writes) >= 2
    assert [c["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]["key"]
            for c in json.loads(data)] == ["height", "weight"]
    turn = toolwire.parse("gemini", data)
    assert turn.finished_cleanly and len(turn.calls) == 2


def test_gemini_calls_without_ids_pair_by_order() -> None:
    """``gemini_ids=False`` sends calls without ids; results without ids are matched by name and order."""
    sim = SimProvider(gemini_ids=False, seed=1)
    with sim.serve() as url:
        conv = Conv("gemini", HW)
        _, turn = send(url, conv)
        assert [c.call_id for c in turn.calls] == [None, None]
        assert all("id" not in p["functionCall"] for p in turn.assistant_message["parts"])
        conv.add_turn(turn)
        conv.add_results([lookup(c) for c in turn.calls])
        _, answer = send(url, conv)
    assert answer.text == "You are 170 cm tall and weigh 70 kg."


def _unsigned_follow_up(sv: Served) -> tuple[str, dict[str, Any]]:
    """A Gemini follow-up (both calls answered) whose model content lost its thoughtSignature, as an application
    that stores only the canonical calls replays it."""
    conv, turn = first_turn(sv, "gemini")
    conv.add_results([lookup(c) for c in turn.calls])
    path, body = conv.request()
    for part in body["contents"][1]["parts"]:
        part.pop("thoughtSignature", None)
    return path, body


@pytest.mark.parametrize("model", ["gemini-3-flash-preview", "gemini-3.1-pro-preview", "gemini-sim"])
def test_gemini_3_refuses_a_call_turn_without_its_thought_signature(sv: Served, model: str) -> None:
    """Gemini 3 (and the simulator's own model) answers 400 to a current-turn call without a thought signature."""
    path, body = _unsigned_follow_up(sv)
    resp = post(sv.url, path.replace("gemini-sim", model), body, AUTH["gemini"])
    assert resp.status == 400
    assert "Function call is missing a thought_signature" in error_message("gemini", 400, resp.json())


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.0-flash", "gemini-3-pro-image-preview"])
def test_older_and_image_gemini_models_accept_a_call_turn_without_signature(sv: Served, model: str) -> None:
    """Gemini 2.x and the image models do not enforce thought signatures, as the real API does not."""
    path, body = _unsigned_follow_up(sv)
    resp = post(sv.url, path.replace("gemini-sim", model), body, AUTH["gemini"])
    assert resp.status == 200, resp.body[:300]


@pytest.mark.parametrize("encoding", ["text", "base64"])
def test_gemini_3_accepts_the_documented_skip_signature(sv: Served, encoding: str) -> None:
    """The ``skip_thought_signature_validator`` sentinel (as JSON text, or base64 of its bytes as the python SDK
    sends it) passes the check in place of the lost signature."""
    path, body = _unsigned_follow_up(sv)
    sentinel = "skip_thought_signature_validator"
    if encoding == "base64":
        sentinel = base64.b64encode(sentinel.encode()).decode()
    body["contents"][1]["parts"][0]["thoughtSignature"] = sentinel
    resp = post(sv.url, path.replace("gemini-sim", "gemini-3-flash-preview"), body, AUTH["gemini"])
    assert resp.status == 200, resp.body[:300]
    assert toolwire.parse("gemini", resp.body).text == "You are 170 cm tall and weigh 70 kg."


def test_repaired_unsigned_history_is_accepted_by_gemini_3(sv: Served) -> None:
    """repair_history puts the sentinel where the signature was lost, and Gemini 3 accepts the history."""
    path, body = _unsigned_follow_up(sv)
    body["contents"], report = toolwire.repair_history("gemini", body["contents"])
    assert [a.kind.value for a in report.actions] == ["inserted_thought_signature"]
    resp = post(sv.url, path.replace("gemini-sim", "gemini-3-flash-preview"), body, AUTH["gemini"])
    assert resp.status == 200, resp.body[:300]


def test_argument_fragments_cut_json_tokens(sv: Served) -> None:
    """Argument fragments end inside string literals and numbers, as models stream them."""
    path, body = Conv("openai-chat", SCENARIOS["save_with_faults"].prompts["en"]).request()
    resp = post(sv.url, path, body, AUTH["openai-chat"])
    frags = []
    for line in resp.body.split(b"\n"):
        if line.startswith(b"data: {"):
            for tc in json.loads(line[6:])["choices"][0]["delta"].get("tool_calls", []):
                frags.append(tc["function"].get("arguments", ""))
    text = "".join(frags)
    assert json.loads(text) == {"kind": "weight", "value": 70, "unit": "kg"}
    ends, pos = set(), 0
    for f in frags:
        pos += len(f)
        ends.add(pos)
    inside_string = any(text[:e].count('"') % 2 == 1 for e in ends if 0 < e < len(text))
    inside_number = text.index("70") + 1 in ends
    assert inside_string and inside_number


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic", "gemini"])
def test_socket_writes_group_and_split_events(sv: Served, dialect: str) -> None:
    """Some writes carry several events and some events span several writes (flushed separately)."""
    path, body = Conv(dialect, HW).request()
    writes = raw_writes(sv.url, path, body, AUTH[dialect])
    sep = b"\r\n\r\n" if dialect == "gemini" else b"\n\n"
    assert any(w.count(sep) >= 2 for w in writes), "no write with several events"
    assert any(not w.endswith(sep) for w in writes), "no event split across writes"
    assert toolwire.parse(dialect, b"".join(writes)).finished_cleanly


# ---- request checks: malformed follow-ups ----------------------------------------------------------------------------


def _drop_last_result(d: str, body: dict[str, Any]) -> None:
    if d == "openai-chat":
        body["messages"].pop()
    elif d == "openai-responses":
        body["input"].pop()
    elif d in ("anthropic", "bedrock-converse"):
        body["messages"][-1]["content"].pop()
    elif d == "gemini":
        body["contents"][-1]["parts"].pop()
    else:
        body["input"].pop()


def _model_msg(d: str, body: dict[str, Any]) -> dict[str, Any]:
    return body["messages"][1] if d != "gemini" else body["contents"][1]


MALFORMED = [
    # (dialect, case, mutate(body), status, message fragment)
    ("openai-chat", "unanswered call", _drop_last_result, 400,
     "The following tool_call_ids did not have response messages: call_"),
    ("openai-chat", "unknown tool_call_id", lambda d, b: b["messages"][-1].update(tool_call_id="call_bogus"), 400,
     "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"),
    ("openai-chat", "duplicate tool_call_id", lambda d, b: b["messages"].__setitem__(-1, dict(b["messages"][-2])),
     400, "duplicate tool message for tool_call_id"),
    ("openai-chat", "arguments as an object",
     lambda d, b: b["messages"][1]["tool_calls"][0]["function"].update(arguments={"key": "height"}), 400,
     "expected a string, but got an object instead"),
    ("openai-responses", "unanswered call", _drop_last_result, 400, "No tool output found for function call call_"),
    ("openai-responses", "unknown call_id", lambda d, b: b["input"][-1].update(call_id="call_bogus"), 400,
     "No tool call found for function call output with call_id call_bogus."),
    ("openai-responses", "dropped reasoning item", lambda d, b: b["input"].pop(1), 400,
     "of type 'function_call' was provided without its required 'reasoning' item: 'rs_"),
    ("openai-responses", "edited encrypted_content",
     lambda d, b: b["input"][1].update(encrypted_content=b["input"][1]["encrypted_content"][:-8] + "AAAAAAAA"), 400,
     "could not be verified"),
    ("anthropic", "missing tool_result id", _drop_last_result, 400,
     "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_"),
    ("anthropic", "text before tool_result",
     lambda d, b: b["messages"][-1]["content"].insert(0, {"type": "text", "text": "Here you go."}), 400,
     "`tool_use` ids were found without `tool_result` blocks immediately after"),
    ("anthropic", "unknown tool_use_id",
     lambda d, b: b["messages"][-1]["content"].append({"type": "tool_result", "tool_use_id": "toolu_x", "content": ""}),
     400, "unexpected `tool_use_id` found in `tool_result` blocks: toolu_x"),
    ("anthropic", "dropped thinking block", lambda d, b: b["messages"][1]["content"].pop(0), 400,
     "Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
    ("anthropic", "edited signature",
     lambda d, b: b["messages"][1]["content"][0].update(signature="EqQB" + "A" * 60), 400,
     "messages.1.content.0: Invalid `signature` in `thinking` block"),
    ("anthropic", "edited thinking text",
     lambda d, b: b["messages"][1]["content"][0].update(thinking="I changed my mind."), 400,
     "Invalid `signature` in `thinking` block"),
    ("anthropic", "tool_use input as a string",
     lambda d, b: b["messages"][1]["content"][1].update(input='{"key": "height"}'), 400,
     "tool_use.input: Input should be a valid dictionary"),
    ("gemini", "dropped thoughtSignature", lambda d, b: b["contents"][1]["parts"][0].pop("thoughtSignature"), 400,
     "Function call is missing a thought_signature in functionCall parts"),
    ("gemini", "thoughtSignature on the wrong part",
     lambda d, b: b["contents"][1]["parts"][1].update(thoughtSignature=b["contents"][1]["parts"][0]
                                                      .pop("thoughtSignature")), 400,
     "Function call is missing a thought_signature in functionCall parts"),
    ("gemini", "functionResponse id mismatch",
     lambda d, b: b["contents"][-1]["parts"][0]["functionResponse"].update(id="zzzzzzzz"), 400,
     "functionResponse.id does not match functionCall.id"),
    ("gemini", "response not an object",
     lambda d, b: b["contents"][-1]["parts"][0]["functionResponse"].update(response="170 cm"), 400,
     "(type.googleapis.com/google.protobuf.Struct)"),
    ("gemini", "role tool", lambda d, b: b["contents"][-1].update(role="tool"), 400,
     "Please use a valid role: user, model."),
    ("gemini", "one response for two calls", _drop_last_result, 400,
     "the number of function response parts is equal to the number of function call parts"),
    ("bedrock-converse", "unanswered call", _drop_last_result, 400,
     "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_"),
    ("bedrock-converse", "unknown toolUseId",
     lambda d, b: b["messages"][-1]["content"][0]["toolResult"].update(toolUseId="tooluse_bogus"), 400,
     "exceeds the number of toolUse blocks of previous turn"),
    ("bedrock-converse", "a result twice",
     lambda d, b: b["messages"][-1]["content"].append(b["messages"][-1]["content"][0]), 400,
     "exceeds the number of toolUse blocks of previous turn"),
    ("bedrock-converse", "toolUse input as a string",
     lambda d, b: b["messages"][1]["content"][0]["toolUse"].update(input='{"key": "height"}'), 400,
     "toolUse.input is invalid. Provide a json object"),
    ("bedrock-converse", "no toolConfig", lambda d, b: b.pop("toolConfig"), 400,
     "The toolConfig field must be defined when using toolUse and toolResult content blocks."),
    ("bedrock-converse", "two assistant messages",
     lambda d, b: b["messages"].insert(2, {"role": "assistant", "content": [{"text": "Let me see."}]}), 400,
     "A conversation must alternate between user and assistant roles."),
    ("gemini-interactions", "unknown call_id", lambda d, b: b["input"][0].update(call_id="nope"), 400,
     "function_result call_id 'nope' does not match any pending function_call"),
    ("gemini-interactions", "unanswered call", _drop_last_result, 400, "No function_result was provided"),
    ("gemini-interactions", "unknown previous interaction",
     lambda d, b: b.update(previous_interaction_id="v1_missing"), 404, "Interaction v1_missing not found."),
]


@pytest.mark.parametrize("dialect,case,mutate,status,fragment", MALFORMED, ids=[f"{m[0]}:{m[1]}" for m in MALFORMED])
def test_malformed_follow_up_is_refused(sv: Served, dialect: str, case: str, mutate: Any, status: int,
                                        fragment: str) -> None:
    """A follow-up the real provider refuses gets its status and error body, with the documented message."""
    conv, turn = first_turn(sv, dialect)
    conv.add_results([lookup(c) for c in turn.calls])
    path, body = conv.request()
    mutate(dialect, body)
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.status == status, resp.body
    assert fragment in error_message(dialect, status, resp.json())
    assert sv.sim.requests[-1].status == status and fragment in sv.sim.requests[-1].error


@pytest.mark.parametrize("dialect", DIALECTS)
def test_missing_key_is_refused_with_the_providers_body(sv: Served, dialect: str) -> None:
    """A request without an API key gets 401 (OpenAI, Anthropic) or 403 (Google, Bedrock) with the provider's
    body."""
    path, body = Conv(dialect, HEIGHT).request()
    headers = {"anthropic-version": "2023-06-01"} if dialect == "anthropic" else {}
    resp = post(sv.url, path, body, headers)
    status = 403 if dialect.startswith("gemini") or dialect == "bedrock-converse" else 401
    assert resp.status == status
    assert error_message(dialect, status, resp.json())


def test_key_in_query_string_is_accepted_by_gemini(sv: Served) -> None:
    """Gemini also takes the key as ``?key=``."""
    path, body = Conv("gemini", HEIGHT).request()
    assert post(sv.url, path + "&key=abc", body).status == 200


def test_anthropic_requires_the_version_header(sv: Served) -> None:
    """Anthropic refuses a request without ``anthropic-version``."""
    path, body = Conv("anthropic", HEIGHT).request()
    resp = post(sv.url, path, body, {"x-api-key": "k"})
    assert resp.status == 400
    assert error_message("anthropic", 400, resp.json()) == "anthropic-version: header is required"


def test_invalid_json_body_is_refused(sv: Served) -> None:
    """A body that is not JSON gets the dialect's 400."""
    resp = post(sv.url, "/v1/chat/completions", None, AUTH["openai-chat"], raw=b"{not json")
    assert resp.status == 400 and "could not parse the JSON body" in error_message("openai-chat", 400, resp.json())


def test_unknown_path_is_404(sv: Served) -> None:
    """A path no dialect serves answers 404 and is logged without a dialect."""
    assert post(sv.url, "/v2/whatever", {}).status == 404
    assert sv.sim.requests[-1].dialect is None


# ---- state across requests -------------------------------------------------------------------------------------------


def test_responses_previous_response_id_continues_the_stored_response(sv: Served) -> None:
    """With ``previous_response_id`` only the outputs are sent; unknown ids and missing outputs are refused."""
    conv, turn = first_turn(sv, "openai-responses", HEIGHT)
    [call] = turn.calls
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"value": "170 cm"})}
    body = {"model": "gpt-sim", "previous_response_id": turn.response_id, "input": [output]}
    resp = post(sv.url, "/v1/responses", body, AUTH["openai-responses"])
    assert toolwire.parse("openai-responses", resp.body).text == "You are 170 cm tall."
    missing = post(sv.url, "/v1/responses", {**body, "input": []}, AUTH["openai-responses"])
    assert missing.status == 400 and "No tool output found" in missing.json()["error"]["message"]
    unknown = post(sv.url, "/v1/responses", {**body, "previous_response_id": "resp_x"}, AUTH["openai-responses"])
    assert unknown.json()["error"]["code"] == "previous_response_not_found"


def test_interactions_stateless_replay_of_steps(sv: Served) -> None:
    """Interactions also accepts a stateless input that replays the function_call steps before the results."""
    _, turn = first_turn(sv, "gemini-interactions", HEIGHT)
    [call] = turn.calls
    steps = [{"type": "user_input", "content": [{"type": "text", "text": HEIGHT}]},
             *turn.assistant_message["steps"],
             {"type": "function_result", "call_id": call.call_id, "name": call.name, "result": {"value": "170 cm"}}]
    resp = post(sv.url, "/v1beta/interactions", {"model": "gemini-sim", "input": steps}, AUTH["gemini-interactions"])
    assert toolwire.parse("gemini-interactions", resp.body, format="json").text == "You are 170 cm tall."


def test_reset_forgets_plan_log_and_stored_interactions(sv: Served) -> None:
    """``reset()`` clears the plan, the request log and the interaction store."""
    conv, turn = first_turn(sv, "gemini-interactions", HEIGHT)
    sv.sim.plan([Fault.status(500)])
    sv.sim.reset()
    assert sv.sim.requests == [] and sv.sim.pending_faults == 0
    conv.add_results([lookup(c) for c in turn.calls])
    path, body = conv.request()
    assert post(sv.url, path, body, AUTH["gemini-interactions"]).status == 404


# ---- faults ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_status_fault_sends_the_dialects_error_and_retry_headers(sv: Served, dialect: str) -> None:
    """``Fault.status`` answers with the code, the dialect's error body and the retry headers asked for."""
    sv.sim.plan([Fault.status(429, retry_after=0.05, retry_after_ms=50, retry_delay=1.5)])
    path, body = Conv(dialect, HEIGHT).request()
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.status == 429 and resp.headers["retry-after"] == "0.05" and resp.headers["retry-after-ms"] == "50"
    parsed = resp.json()
    assert error_message(dialect, 429, parsed)
    if dialect == "anthropic":
        assert parsed["error"]["type"] == "rate_limit_error"
    if dialect == "gemini":
        assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"} in parsed["error"]["details"]
    rec = sv.sim.requests[-1]
    assert rec.status == 429 and rec.fault.kind == "status"
    assert post(sv.url, path, body, AUTH[dialect]).status == 200  # the plan is consumed one fault per request


def test_status_fault_with_a_custom_body_and_529(sv: Served) -> None:
    """A planned body is sent verbatim; Anthropic's 529 default body is ``overloaded_error``."""
    sv.sim.plan([Fault.status(503, body={"custom": True}), Fault.status(529)])
    path, body = Conv("anthropic", HEIGHT).request()
    assert post(sv.url, path, body, AUTH["anthropic"]).json() == {"custom": True}
    resp = post(sv.url, path, body, AUTH["anthropic"])
    assert resp.status == 529 and resp.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_plan_then_applies_to_every_later_request(sv: Served) -> None:
    """``plan(..., then=fault)`` keeps failing every request once the queue is empty (provider down)."""
    sv.sim.plan([Fault.status(500)], then=Fault.status(503))
    path, body = Conv("openai-chat", SCENARIOS["provider_down"].prompts["en"]).request()
    assert [post(sv.url, path, body, AUTH["openai-chat"]).status for _ in range(3)] == [500, 503, 503]
    assert [r.fault.code for r in sv.sim.requests] == [500, 503, 503]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cut_closes_the_connection_mid_call(sv: Served, dialect: str) -> None:
    """``Fault.cut`` drops the connection inside the call: toolwire sees a truncated, non-runnable call."""
    sv.sim.plan([Fault.cut(at=0.5)])
    path, body = Conv(dialect, HEIGHT).request()
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.status == 200 and not resp.complete
    parser = toolwire.StreamParser(dialect, format="auto")
    try:
        parser.feed(resp.body)
        parser.close()
    except toolwire.FramingError:  # a binary framing cut inside a message (AWS event stream)
        assert parser.turn.error.type == "framing_error"
    turn = parser.turn
    assert not turn.finished_cleanly and turn.runnable_calls == []
    if dialect in STREAMED_ARGS:
        assert [c.state for c in turn.calls] == [CallState.TRUNCATED]
    assert sv.sim.requests[-1].fault == Fault.cut(at=0.5)


def test_cut_of_a_whole_body(sv: Served) -> None:
    """A cut non-streaming response stops short of its Content-Length."""
    sv.sim.plan([Fault.cut(at=0.3)])
    path, body = Conv("openai-chat", HEIGHT, stream=False).request()
    resp = post(sv.url, path, body, AUTH["openai-chat"])
    assert not resp.complete and 0 < len(resp.body) < int(resp.headers["content-length"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_in_stream_error_after_part_of_the_call(sv: Served, dialect: str) -> None:
    """``Fault.in_stream_error`` sends the dialect's error event mid-call: the turn records the error."""
    sv.sim.plan([Fault.in_stream_error("overloaded")])
    path, body = Conv(dialect, HEIGHT).request()
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.status == 200 and resp.complete
    turn = toolwire.parse(dialect, resp.body)
    assert turn.error is not None and turn.runnable_calls == []
    if dialect == "anthropic":
        assert turn.error.type == "overloaded_error"
    if dialect in STREAMED_ARGS:
        assert turn.calls and turn.calls[0].state is not CallState.COMPLETE


def test_in_stream_error_on_a_non_streaming_request_is_an_http_error(sv: Served) -> None:
    """Without a stream the same fault is the matching HTTP error (Anthropic: 529 overloaded_error)."""
    sv.sim.plan([Fault.in_stream_error("overloaded")])
    path, body = Conv("anthropic", HEIGHT, stream=False).request()
    resp = post(sv.url, path, body, AUTH["anthropic"])
    assert resp.status == 529 and resp.json()["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_max_tokens_ends_inside_the_arguments(sv: Served, dialect: str) -> None:
    """``Fault.max_tokens`` ends the stream with the length finish reason inside the call's arguments."""
    sv.sim.plan([Fault.max_tokens()])
    path, body = Conv(dialect, HEIGHT).request()
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.complete
    turn = toolwire.parse(dialect, resp.body)
    assert turn.finish_reason is FinishReason.LENGTH and turn.runnable_calls == []
    if dialect in STREAMED_ARGS:
        [call] = turn.calls
        assert call.state is CallState.TRUNCATED and call.args is None


def test_slow_first_byte_delays_the_status_line(sv: Served) -> None:
    """``Fault.slow_first_byte`` waits before answering, then answers normally."""
    sv.sim.plan([Fault.slow_first_byte(0.3)])
    path, body = Conv("gemini", HEIGHT).request()
    resp = post(sv.url, path, body, AUTH["gemini"])
    assert resp.first_byte >= 0.3 and toolwire.parse("gemini", resp.body).finished_cleanly


UNCLEAN_ENDINGS = {
    "openai-chat": ("content_filter", "content_filter", FinishReason.CONTENT_FILTER),
    "openai-responses": ("content_filter", "incomplete", FinishReason.CONTENT_FILTER),
    "anthropic": ("refusal", "refusal", FinishReason.CONTENT_FILTER),
    "gemini": ("SAFETY", "SAFETY", FinishReason.CONTENT_FILTER),
    "gemini-interactions": ("cancelled", "cancelled", FinishReason.ERROR),
    "bedrock-converse": ("guardrail_intervened", "guardrail_intervened", FinishReason.CONTENT_FILTER),
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_finish_fault_ends_the_turn_with_the_dialects_unclean_reason(sv: Served, dialect: str, stream: bool) -> None:
    """``Fault.finish`` drops the calls and ends with the raw reason where the dialect puts it; ``partial``
    sends the first half of the text before it."""
    reason, raw, canonical = UNCLEAN_ENDINGS[dialect]
    sv.sim.plan([Fault.finish(reason), Fault.finish(reason, partial=True)])
    path, body = Conv(dialect, HEIGHT, stream=stream).request()
    resp = post(sv.url, path, body, AUTH[dialect])
    assert resp.status == 200 and resp.complete
    turn = toolwire.parse(dialect, resp.body)
    assert turn.calls == [] and turn.text == "" and not turn.finished_cleanly
    assert turn.raw_finish_reason == raw and turn.finish_reason is canonical
    path, body = Conv(dialect, SCENARIOS["provider_down"].prompts["en"], stream=stream).request()
    turn = toolwire.parse(dialect, post(sv.url, path, body, AUTH[dialect]).body)
    assert turn.text == "I can't check the weather:" and not turn.finished_cleanly
    assert [r.fault.kind for r in sv.sim.requests] == ["finish", "finish"]


@pytest.mark.parametrize("reason,canonical", [("MALFORMED_FUNCTION_CALL", FinishReason.ERROR),
                                              ("RECITATION", FinishReason.CONTENT_FILTER),
                                              ("OTHER", FinishReason.OTHER)])
def test_finish_fault_carries_geminis_finish_details(sv: Served, reason: str, canonical: FinishReason) -> None:
    """A Gemini ending has no content; a malformed call says so in ``finishMessage``, a filter rates safety."""
    sv.sim.plan([Fault.finish(reason)])
    path, body = Conv("gemini", HEIGHT, stream=False).request()
    doc = post(sv.url, path, body, AUTH["gemini"]).json()
    [cand] = doc["candidates"]
    assert cand["finishReason"] == reason and "content" not in cand
    assert ("finishMessage" in cand) == (reason == "MALFORMED_FUNCTION_CALL")
    assert ("safetyRatings" in cand) == (canonical is FinishReason.CONTENT_FILTER)
    assert toolwire.parse("gemini", json.dumps(doc)).finish_reason is canonical


def test_raw_fault_sends_exactly_the_planned_bytes(sv: Served) -> None:
    """``Fault.raw`` answers with the body, status, content type and headers planned, whatever they are."""
    garbage = b"\xff\xfe<html>not json</html>"
    sv.sim.plan([Fault.raw(garbage, content_type="text/html", headers={"x-extra": "1"}),
                 Fault.raw("", status=200), Fault.raw({"a": 1}, status=502)])
    path, body = Conv("anthropic", HEIGHT).request()
    first = post(sv.url, path, body, AUTH["anthropic"])
    assert (first.status, first.body, first.headers["content-type"], first.headers["x-extra"]) == \
        (200, garbage, "text/html", "1")
    assert post(sv.url, path, body, AUTH["anthropic"]).body == b""
    third = post(sv.url, path, body, AUTH["anthropic"])
    assert third.status == 502 and third.json() == {"a": 1}
    assert [r.status for r in sv.sim.requests] == [200, 200, 502]


def test_status_fault_sends_headers_verbatim(sv: Served) -> None:
    """``Fault.status(headers=...)`` sends header values no client could read, as they are."""
    sv.sim.plan([Fault.status(429, headers={"retry-after": "soon", "retry-after-ms": "NaN"})])
    path, body = Conv("openai-chat", HEIGHT).request()
    resp = post(sv.url, path, body, AUTH["openai-chat"])
    assert resp.status == 429 and resp.headers["retry-after"] == "soon" and resp.headers["retry-after-ms"] == "NaN"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_reset_fault_resets_the_connection_mid_body(sv: Served, stream: bool) -> None:
    """``Fault.reset`` sends part of the response, then a TCP RST: the client's read fails with a reset."""
    import httpx

    sv.sim.plan([Fault.reset(at=0.5)])
    path, body = Conv("openai-chat", HEIGHT, stream=stream).request()
    received = b""
    with pytest.raises(httpx.ReadError, match="reset"):
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", sv.url + path, json=body, headers=AUTH["openai-chat"]) as resp:
                assert resp.status_code == 200
                for chunk in resp.iter_bytes():
                    received += chunk
    assert sv.sim.requests[-1].fault == Fault.reset(at=0.5)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_arguments_fault_puts_any_value_in_the_calls(sv: Served, dialect: str, stream: bool) -> None:
    """``Fault.arguments`` replaces the scripted arguments, streamed and whole, as deep as the parser's limit."""
    value: Any = {"key": "height"}
    for _ in range(45):
        value = {"key": [value]}
    sv.sim.plan([Fault.arguments(value)])
    path, body = Conv(dialect, HEIGHT, stream=stream).request()
    turn = toolwire.parse(dialect, post(sv.url, path, body, AUTH[dialect]).body)
    assert turn.finished_cleanly and [c.args for c in turn.calls] == [value]


def test_wire_fault_writes_bytes_that_are_no_http_response(sv: Served) -> None:
    """``Fault.wire`` puts its bytes on the socket as they are, then closes the connection."""
    sv.sim.plan([Fault.wire(b"SPEAK FRIEND AND ENTER\r\n\r\n")])
    path, body = Conv("anthropic", HEIGHT).request()
    with pytest.raises(http.client.HTTPException):
        post(sv.url, path, body, AUTH["anthropic"])
    assert sv.sim.requests[-1].status == 0 and sv.sim.requests[-1].fault.kind == "wire"


def test_fault_arguments_are_checked() -> None:
    """Faults refuse meaningless parameters."""
    with pytest.raises(ValueError):
        Fault.cut(at=1.5)
    with pytest.raises(ValueError):
        Fault.reset(at=-0.1)
    with pytest.raises(ValueError):
        Fault.in_stream_error("nope")
    with pytest.raises(ValueError):
        Fault.finish("")
    with pytest.raises(TypeError):
        Fault.raw(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Fault.wire("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SimProvider().plan(["status"])  # type: ignore[list-item]


# ---- the scripted model ----------------------------------------------------------------------------------------------


def tools(call: toolwire.ToolCall, *, catalogue_up: bool = True) -> tuple[toolwire.ToolCall, Any, bool]:
    """The demo tools, simplified: an unknown name or a missing argument is an error result."""
    if call.name == "lookup_demo_value":
        return lookup(call)
    if call.name == "search_foods":
        if not catalogue_up:
            return call, {"error": "food catalogue unavailable"}, True
        carbs = {"arroz": 28, "feijão": 14}.get(call.args["query"])
        return call, [{"name": call.args["query"], "carbohydrate_g_per_100g": carbs}] if carbs else [], False
    if call.name == "save_measurement":
        if "value" not in call.args:
            return call, {"error": "invalid arguments: 'value' is a required property"}, True
        return call, {"entry_id": 1, "saved": dict(call.args)}, False
    return call, {"error": f"unknown tool {call.name!r}"}, True


def converse(url: str, dialect: str, prompt: str, **kw: Any) -> tuple[str, list[list[str]]]:
    """Run the loop until the model answers with text; return the text and the tool names of each round."""
    conv = Conv(dialect, prompt)
    rounds: list[list[str]] = []
    for _ in range(8):
        _, turn = send(url, conv)
        conv.add_turn(turn)
        if not turn.calls:
            return turn.text, rounds
        rounds.append([c.name for c in turn.calls])
        conv.add_results([tools(c, **kw) for c in turn.calls])
    raise AssertionError("the model never answered")


SCRIPTS = [
    ("height", "en", {}, "You are 170 cm tall.", [["lookup_demo_value"]]),
    ("height", "pt-BR", {}, "Você tem 170 cm de altura.", [["lookup_demo_value"]]),
    ("rice", "es", {}, "El arroz tiene 28 g de carbohidratos por 100 g.", [["search_foods"]]),
    ("misspelled_tool", "en", {}, "Rice has 28 g of carbohydrates per 100 g.", [["search_foodz"], ["search_foods"]]),
    ("missing_argument", "en", {}, "What is your weight in kg?", [["save_measurement"]]),
    ("catalogue_down", "en", {"catalogue_up": False},
     "I couldn't reach the food catalogue, so I can't tell you that right now. Please try again later.",
     [["search_foods"]]),
    ("catalogue_down", "pt-BR", {}, "O feijão tem 14 g de carboidratos por 100 g.", [["search_foods"]]),
    ("save_with_faults", "en", {}, "Saved: 70 kg", [["save_measurement"]]),
    ("provider_down", "en", {}, "I can't check the weather: I have no weather tool.", []),
]


@pytest.mark.parametrize("dialect", ["anthropic", "gemini", "openai-responses"])
@pytest.mark.parametrize("scenario,lang,kw,answer,rounds", SCRIPTS, ids=[f"{s[0]}-{s[1]}" for s in SCRIPTS])
def test_scenarios_play_out(sv: Served, dialect: str, scenario: str, lang: str, kw: dict[str, Any], answer: str,
                            rounds: list[list[str]]) -> None:
    """Each scenario's script reacts to the results it receives and ends with its localized answer."""
    text, seen = converse(sv.url, dialect, SCENARIOS[scenario].prompts[lang], **kw)
    assert (text, seen) == (answer, rounds)


def test_two_errors_in_a_row_end_with_text(sv: Served) -> None:
    """A model whose last two results were errors explains instead of calling again."""
    text, seen = converse(sv.url, "openai-chat", SCENARIOS["misspelled_tool"].prompts["en"], catalogue_up=False)
    assert seen == [["search_foodz"], ["search_foods"]]
    assert "food catalogue" in text


def test_calls_that_never_ran_are_asked_again_once(sv: Served) -> None:
    """Results saying a call never ran (its turn was cut) make the model call again; a second time it gives up."""
    conv, turn = first_turn(sv, "openai-chat", HEIGHT)
    not_run = {"kind": "not_run", "error": "the call was not run: the response was truncated"}
    conv.add_results([(turn.calls[0], not_run, True)])
    _, again = send(sv.url, conv)
    assert [(c.name, c.args) for c in again.calls] == [("lookup_demo_value", {"key": "height"})]
    conv.add_turn(again)
    conv.add_results([(again.calls[0], not_run, True)])
    _, last = send(sv.url, conv)
    assert last.calls == [] and last.text.startswith("Sorry, the tool I need kept failing")


def test_clarifying_question_then_the_users_value_is_saved(sv: Served) -> None:
    """After asking for the weight, the model saves the number the user gives in the next message."""
    conv, turn = first_turn(sv, "anthropic", SCENARIOS["missing_argument"].prompts["es"])
    assert turn.calls[0].args == {"kind": "weight", "unit": "kg"}
    conv.add_results([tools(c) for c in turn.calls])
    _, question = send(sv.url, conv)
    assert question.text == "¿Cuál es tu peso en kg?"
    conv.add_turn(question)
    conv.history.append({"role": "user", "content": "72,5"})
    _, save = send(sv.url, conv)
    assert save.calls[0].args == {"kind": "weight", "value": 72.5, "unit": "kg"}
    conv.add_turn(save)
    conv.add_results([tools(c) for c in save.calls])
    assert send(sv.url, conv)[1].text == "Guardado: 72.5 kg"


def test_plain_text_error_results_are_understood(sv: Served) -> None:
    """Error results sent as plain text (no error flag in Chat) still steer the script."""
    conv, turn = first_turn(sv, "openai-chat", SCENARIOS["misspelled_tool"].prompts["en"])
    conv.add_results([(turn.calls[0], "Unknown tool 'search_foodz'. Available: search_foods", True)])
    _, fixed = send(sv.url, conv)
    assert [(c.name, c.args) for c in fixed.calls] == [("search_foods", {"query": "arroz"})]
    conv.add_turn(fixed)
    conv.add_results([(fixed.calls[0], "The food catalogue is unavailable.", True)])
    assert "food catalogue" in send(sv.url, conv)[1].text


def test_responses_store_false_needs_the_encrypted_content(sv: Served) -> None:
    """With ``store: false`` a replayed reasoning item without ``encrypted_content`` is not found (404)."""
    path, body = Conv("openai-responses", HEIGHT).request()
    resp = post(sv.url, path, {**body, "store": False}, AUTH["openai-responses"])
    turn = toolwire.parse("openai-responses", resp.body)
    items = copy.deepcopy(turn.assistant_message)
    del items[0]["encrypted_content"]
    output = {"type": "function_call_output", "call_id": turn.calls[0].call_id, "output": "{}"}
    body = {"model": "gpt-sim", "store": False, "input": [{"role": "user", "content": HEIGHT}, *items, output]}
    resp = post(sv.url, "/v1/responses", body, AUTH["openai-responses"])
    assert resp.status == 404 and "Items are not persisted when `store` is set to false" in resp.json()["error"][
        "message"]


def test_unknown_prompt_gets_plain_text(sv: Served) -> None:
    """A prompt that matches no scenario is answered with text and no calls."""
    _, turn = first_turn(sv, "openai-chat", "Tell me a joke.")
    assert turn.calls == [] and turn.finish_reason is FinishReason.STOP and turn.text


def test_parallel_tool_calls_false_makes_calls_one_at_a_time(sv: Served) -> None:
    """With ``parallel_tool_calls: false`` the parallel scenario asks for one value per turn."""
    from toolwire.harness.demo_tools import DemoWorld

    # the API takes parallel_tool_calls only with tools
    declared = toolwire.declare("openai-chat", DemoWorld().tools(), choice=toolwire.ToolChoice.auto(parallel=False))
    conv = Conv("openai-chat", HW)
    names = []
    for _ in range(3):
        path, body = conv.request()
        resp = post(sv.url, path, {**body, **declared.fragment}, AUTH["openai-chat"])
        turn = toolwire.parse("openai-chat", resp.body)
        conv.add_turn(turn)
        if not turn.calls:
            break
        names.append([c.args["key"] for c in turn.calls])
        conv.add_results([lookup(c) for c in turn.calls])
    assert names == [["height"], ["weight"]] and turn.text == "You are 170 cm tall and weigh 70 kg."


# ---- the official SDKs as oracles ------------------------------------------------------------------------------------


def test_official_sdks_accept_the_wire(sv: Served) -> None:
    """openai, anthropic and google-genai parse the simulator's streams and their follow-ups are accepted."""
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    oc = openai.OpenAI(base_url=sv.url + "/v1", api_key="k", max_retries=0)
    with oc.chat.completions.stream(model="gpt-sim", messages=[{"role": "user", "content": HW}]) as st:
        msg = st.get_final_completion().choices[0].message
    assert [json.loads(t.function.arguments)["key"] for t in msg.tool_calls] == ["height", "weight"]
    with oc.responses.stream(model="gpt-sim", input=HEIGHT) as st:
        resp = st.get_final_response()
    assert [o.type for o in resp.output] == ["reasoning", "function_call"]
    ac = anthropic.Anthropic(base_url=sv.url, api_key="k", max_retries=0)
    with ac.messages.stream(model="claude-sim", max_tokens=100, messages=[{"role": "user", "content": HEIGHT}]) as st:
        m = st.get_final_message()
    assert [b.type for b in m.content] == ["thinking", "tool_use"] and m.stop_reason == "tool_use"
    tu = m.content[1]
    r = ac.messages.create(model="claude-sim", max_tokens=100, messages=[
        {"role": "user", "content": HEIGHT}, {"role": "assistant", "content": [b.model_dump() for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": '{"value": "170 cm"}'}]}])
    assert r.content[0].text == "You are 170 cm tall."
    genai = pytest.importorskip("google.genai")
    gc = genai.Client(api_key="k", http_options=genai.types.HttpOptions(base_url=sv.url, api_version="v1beta"))
    chunks = list(gc.models.generate_content_stream(model="gemini-sim", contents=HW))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert [p.function_call.args["key"] for p in parts] == ["height", "weight"] and parts[0].thought_signature


def test_the_simulated_model_does_not_ask_again_for_a_write_whose_outcome_is_unknown():
    """``outcome_unknown`` says the write was "not run again" but may have taken effect: unlike a call that never
    ran (``not_run``), the simulated model does not simply repeat it."""
    from toolwire.sim._core import Result
    from toolwire.sim._model import not_run

    unknown = ("save_measurement was started earlier but its completion was never recorded: it may or may not have "
               "taken effect. It was not run again; check before retrying.")
    assert not not_run(Result(call_id="c", name="save_measurement", value=unknown, is_error=True))
    assert not not_run(Result(call_id="c", name="save_measurement", value=unknown, is_error=None))
    never = "Not run: save_measurement changes state and its idempotency ledger is unavailable, so it was not started."
    assert not_run(Result(call_id="c", name="save_measurement", value=never, is_error=True))


@pytest.mark.parametrize("provider", DIALECTS)
def test_a_plan_for_one_scenario_applies_only_to_that_conversation(provider):
    """plan(..., scenario=, dialect=): conversations side by side each take faults from their own plan only."""
    from toolwire.harness import RetryPolicy, ToolLoop
    from toolwire.harness.demo_tools import DemoWorld
    sim = SimProvider(seed=3)
    sim.plan([], then=Fault.status(503), scenario="provider_down", dialect=provider)
    sim.plan([Fault.status(500)], scenario="height")
    retry = RetryPolicy(attempts=2, deadline=10.0, initial=0.01, max_backoff=0.02)
    with sim.serve() as url:
        def run(scenario: str):
            registry = DemoWorld().registry()
            with ToolLoop(provider, model="m", registry=registry, base_url=url, api_key="k", retry=retry,
                          timeout=5.0) as loop:
                return loop.run(SCENARIOS[scenario].prompts["en"])

        down = run("provider_down")
        height = run("height")
        weight = run("height_weight")
    assert down.fallback
    assert not height.fallback and height.steps[0].attempts == 2  # its one 500, then ok
    assert not weight.fallback and all(s.attempts == 1 for s in weight.steps)  # no plan of its own
    assert sim.pending_faults == 0
