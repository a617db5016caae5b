"""The simulated Amazon Bedrock Converse provider (``toolwire/codecs/_sim/bedrock_converse.py``) over real loopback
HTTP: its streams and bodies read by botocore's own event-stream parser and walked against the ``bedrock-runtime``
model, its request checks next to botocore's ParamValidator, and its Bearer and SigV4 authentication (signed by
botocore, verified by the simulator)."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

botocore = pytest.importorskip("botocore")

import botocore.session  # noqa: E402
from botocore.auth import SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402
from botocore.eventstream import EventStreamBuffer  # noqa: E402
from botocore.parsers import EventStreamJSONParser  # noqa: E402
from botocore.validate import ParamValidator  # noqa: E402

from toolwire.codecs._sim.bedrock_converse import KNOWN_CREDENTIALS, BedrockConverse  # noqa: E402
from toolwire.sim import SCENARIOS, Fault, SimProvider  # noqa: E402
from toolwire.sim import _server  # noqa: E402

from .regressions.test_rich_results_hostile import GIF, WEBP  # noqa: E402
from .rich import JPEG, PDF, PNG  # noqa: E402

MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
MODEL_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
HW = SCENARIOS["height_weight"].prompts["en"]
BEARER = {"authorization": "Bearer bedrock-api-key-sim"}
TOOLS = {"toolConfig": {"tools": [{"toolSpec": {"name": "lookup_demo_value", "description": "Look up a value.",
                                                "inputSchema": {"json": {"type": "object", "properties": {
                                                    "key": {"type": "string"}}, "required": ["key"]}}}}]}}
KEY_ID = next(iter(KNOWN_CREDENTIALS))


@pytest.fixture(scope="module")
def served():
    """A simulator that speaks Bedrock Converse (its part added to the parts the simulator loaded when it has no
    record naming it yet)."""
    mp = pytest.MonkeyPatch()
    if not any(d.name == "bedrock-converse" for d in _server.DIALECTS):
        mp.setattr(_server, "DIALECTS", (*_server.DIALECTS, BedrockConverse()))
    sim = SimProvider(seed=11)
    with sim.serve() as url:
        yield sim, url
    mp.undo()


@pytest.fixture
def sv(served):
    served[0].reset()
    return served


def path(stream: bool, model: str = MODEL_ID) -> str:
    return f"/model/{quote(model, safe='-._~')}/{'converse-stream' if stream else 'converse'}"


def post(url: str, where: str, body: Any, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    data = raw if raw is not None else json.dumps(body).encode()
    conn.request("POST", where, data, {"content-type": "application/json", **(headers or {})})
    r = conn.getresponse()
    out = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, out


def events(data: bytes) -> list[dict[str, Any]]:
    """The stream read by botocore: its event-stream buffer, its parser, the ConverseStream output shape."""
    shape = MODEL.operation_model("ConverseStream").output_shape.members["stream"]
    buf = EventStreamBuffer()
    buf.add_data(data)
    return [EventStreamJSONParser().parse(m.to_response_dict(), shape) for m in buf]


def walk(value: Any, shape: Any, at: str = "$") -> None:
    """Every member of ``value`` is one the shape declares, of the shape's type (what botocore's parser would drop
    silently)."""
    kind = shape.type_name
    if shape.metadata.get("document"):
        return  # any JSON value (a tool's input, a json result)
    if kind == "structure":
        assert isinstance(value, dict), at
        for key, member in value.items():
            if key == "p" and at.count(".") == 0:
                continue
            assert key in shape.members, f"{at}.{key} is not in {shape.name}"
            walk(member, shape.members[key], f"{at}.{key}")
        for key in shape.required_members:
            assert key in value, f"{at}.{key} is required by {shape.name}"
    elif kind == "list":
        assert isinstance(value, list), at
        for i, item in enumerate(value):
            walk(item, shape.member, f"{at}[{i}]")
    elif kind == "map":
        assert isinstance(value, dict), at
    elif kind == "string":
        assert isinstance(value, str), at
        if shape.enum:
            assert value in shape.enum, f"{at}: {value!r} not in {shape.enum}"
    elif kind in ("integer", "long"):
        assert isinstance(value, int), at
    elif kind in ("float", "double"):
        assert isinstance(value, (int, float)), at


def request(prompt: str = HW, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"text": prompt}]}], "inferenceConfig": {"maxTokens": 512},
            **TOOLS, **extra}


def valid_for_botocore(body: dict[str, Any]) -> bool:
    report = ParamValidator().validate({**body, "modelId": MODEL_ID}, MODEL.operation_model("Converse").input_shape)
    return not report.has_errors()


def frames_of(data: bytes) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    buf = EventStreamBuffer()
    buf.add_data(data)
    return [(dict(m.headers), json.loads(m.payload)) for m in buf]


def stream_turn(sv, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[dict, dict]]]:
    status, headers, data = post(sv[1], path(True), body, BEARER)
    assert status == 200, data[:300]
    assert headers["content-type"] == "application/vnd.amazon.eventstream" and headers["x-amzn-requestid"]
    return events(data), frames_of(data)


# ---- responses ------------------------------------------------------------------------------------------------------
def test_a_streamed_tool_turn_is_what_botocore_reads(sv):
    """A ConverseStream reply: every frame an event with the three string headers, every payload padded and of its
    event's shape; messageStart, a toolUse block started and its input in fragments (an empty one first), stops,
    messageStop tool_use, metadata last."""
    body = request()
    assert valid_for_botocore(body)
    parsed, frames = stream_turn(sv, body)
    shape = MODEL.operation_model("ConverseStream").output_shape.members["stream"]
    names = []
    for (headers, payload), event in zip(frames, parsed):
        assert set(headers) == {":event-type", ":content-type", ":message-type"}
        assert headers[":message-type"] == "event" and headers[":content-type"] == "application/json"
        assert payload["p"] and "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".startswith(payload["p"])
        name = headers[":event-type"]
        names.append(name)
        walk(payload, shape.members[name])
        assert set(event) == {name}
    assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"]
    starts = [e["contentBlockStart"]["start"]["toolUse"] for e in parsed if "contentBlockStart" in e]
    assert [s["name"] for s in starts] == ["lookup_demo_value", "lookup_demo_value"]
    inputs = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in parsed
              if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})]
    assert inputs[0] == "" and parsed[-2]["messageStop"]["stopReason"] == "tool_use"


def test_a_whole_converse_body_has_the_response_shape(sv):
    """A Converse reply is one JSON body of ConverseResponse's shape, with the toolUse inputs as objects."""
    status, headers, data = post(sv[1], path(False), request(), BEARER)
    assert status == 200 and headers["x-amzn-requestid"]
    doc = json.loads(data)
    walk(doc, MODEL.operation_model("Converse").output_shape)
    uses = [b["toolUse"] for b in doc["output"]["message"]["content"] if "toolUse" in b]
    assert doc["stopReason"] == "tool_use" and all(isinstance(u["input"], dict) for u in uses) and len(uses) == 2


def test_results_under_their_ids_get_the_answer(sv):
    """The assistant message replayed and a user message of toolResults (json) get the scripted answer as text."""
    doc = json.loads(post(sv[1], path(False), request(), BEARER)[2])
    message = doc["output"]["message"]
    values = {"height": "170 cm", "weight": "70 kg"}
    results = [{"toolResult": {"toolUseId": b["toolUse"]["toolUseId"], "status": "success", "content": [
        {"json": {"found": True, "key": b["toolUse"]["input"]["key"], "value": values[b["toolUse"]["input"]["key"]]}}]}}
        for b in message["content"]]
    body = request()
    body["messages"] += [message, {"role": "user", "content": results[::-1]}]
    assert valid_for_botocore(body)
    parsed, _ = stream_turn(sv, body)
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in parsed if "contentBlockDelta" in e)
    assert "170 cm" in text and "70 kg" in text and parsed[-2]["messageStop"]["stopReason"] == "end_turn"


def test_with_thinking_a_call_turn_starts_with_signed_reasoning_that_must_be_replayed(sv):
    """Extended thinking asked for: the call turn's first block is reasoningContent with a signature; replaying it
    changed is refused, dropping it from the turn the results answer is refused."""
    body = request(additionalModelRequestFields={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    doc = json.loads(post(sv[1], path(False), body, BEARER)[2])
    message = doc["output"]["message"]
    assert "reasoningContent" in message["content"][0]
    results = [{"toolResult": {"toolUseId": b["toolUse"]["toolUseId"], "content": [{"text": "170 cm"}]}}
               for b in message["content"] if "toolUse" in b]
    ok = {**body, "messages": body["messages"] + [message, {"role": "user", "content": results}]}
    assert post(sv[1], path(False), ok, BEARER)[0] == 200
    forged = json.loads(json.dumps(ok))
    forged["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["text"] += " (edited)"
    status, headers, data = post(sv[1], path(False), forged, BEARER)
    assert status == 400 and "Invalid `signature`" in json.loads(data)["message"]
    dropped = json.loads(json.dumps(ok))
    del dropped["messages"][1]["content"][0]
    status, _, data = post(sv[1], path(False), dropped, BEARER)
    assert status == 400 and "must start with a thinking block" in json.loads(data)["message"]


# ---- request checks -------------------------------------------------------------------------------------------------
def _turn(sv) -> dict[str, Any]:
    return json.loads(post(sv[1], path(False), request(), BEARER)[2])["output"]["message"]


def _answered(message: dict[str, Any], n: int | None = None, ids: list[str] | None = None) -> dict[str, Any]:
    uses = [b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b]
    ids = ids if ids is not None else uses[:n]
    return {"role": "user", "content": [{"toolResult": {"toolUseId": i, "content": [{"text": "ok"}]}} for i in ids]}


BAD = {
    "starts with the assistant": (lambda m: {"messages": [{"role": "assistant", "content": [{"text": "hi"}]}]},
                                  "must start with a user message"),
    "two user messages": (lambda m: {"messages": [{"role": "user", "content": [{"text": HW}]},
                                                  {"role": "user", "content": [{"text": "again"}]}]},
                          "must alternate between user and assistant"),
    "an empty content": (lambda m: {"messages": [{"role": "user", "content": []}]}, "is empty"),
    "no messages": (lambda m: {"inferenceConfig": {"maxTokens": 10}}, "Member must not be null"),
    "a missing result": (lambda m: {**TOOLS, "messages": [request()["messages"][0], m, _answered(m, 1)]},
                         "Expected toolResult blocks at messages.2.content"),
    "a result twice": (lambda m: {**TOOLS, "messages": [
        request()["messages"][0], m, {"role": "user", "content": _answered(m)["content"] * 2}]},
        "exceeds the number of toolUse blocks"),
    "a result for no call": (lambda m: {**TOOLS, "messages": [request()["messages"][0], m, _answered(m, ids=[
        b["toolUse"]["toolUseId"] for b in m["content"]] + ["tooluse_nope"])]}, "exceeds the number of toolUse"),
    "calls left unanswered": (lambda m: {**TOOLS, "messages": [request()["messages"][0], m]},
                              "Expected toolResult blocks at messages.2.content"),
    "no toolConfig with tool blocks": (lambda m: {"messages": [request()["messages"][0], m, _answered(m)]},
                                       "The toolConfig field must be defined"),
    "a toolChoice naming no declared tool": (lambda m: request(toolConfig={**TOOLS["toolConfig"], "toolChoice": {
        "tool": {"name": "other"}}}), "toolChoice"),
    "an empty tool list": (lambda m: request(toolConfig={"tools": []}), "length greater than or equal to 1"),
    "a temperature over 1": (lambda m: request(inferenceConfig={"maxTokens": 10, "temperature": 1.5}),
                             "less than or equal to 1"),
    "a topP under 0": (lambda m: request(inferenceConfig={"maxTokens": 10, "topP": -0.1}),
                       "greater than or equal to 0"),
    "maxTokens 0": (lambda m: request(inferenceConfig={"maxTokens": 0}), "greater than or equal to 1"),
    "a json result that is no object": (lambda m: {**TOOLS, "messages": [request()["messages"][0], m, {
        "role": "user", "content": [{"toolResult": {"toolUseId": b["toolUse"]["toolUseId"], "content": [{"json": [1]}]}}
                                    for b in m["content"]]}]}, "Provide a json object"),
    "an empty error result": (lambda m: {**TOOLS, "messages": [request()["messages"][0], m, {
        "role": "user", "content": [{"toolResult": {"toolUseId": b["toolUse"]["toolUseId"], "content": [],
                                                    "status": "error"}} for b in m["content"]]}]},
        "cannot be empty when status value is error"),
    "a block with two members": (lambda m: {"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]},
                                 "exactly one of"),
    "a system prompt that is no list": (lambda m: request(system="Be brief."), "not expected"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_requests_are_refused_as_bedrock_refuses_them(sv, case):
    """Each malformed request is a 400 with Bedrock's body ({"message"}) and its type in x-amzn-ErrorType; where
    botocore's ParamValidator can judge the request it finds it invalid too."""
    build, words = BAD[case]
    body = build(_turn(sv))
    status, headers, data = post(sv[1], path(False), body, BEARER)
    assert status == 400, data
    assert set(json.loads(data)) == {"message"} and words in json.loads(data)["message"]
    assert headers["x-amzn-errortype"].split(":", 1)[0] in ("ValidationException", "SerializationException")
    # the checks botocore makes on the client (lengths, minimums, one member of a union, types); the rest only the
    # service makes (botocore validates no maximum of a float, nor the conversation's rules)
    assert valid_for_botocore(body) is (case not in ("a topP under 0", "maxTokens 0", "an empty tool list",
                                                     "a system prompt that is no list", "a block with two members"))


# ---- images and documents ------------------------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


PNG_BYTES = base64.b64decode(PNG)
#: a PNG header saying 8001 × 1 pixels
WIDE_PNG = PNG_BYTES[:16] + (8001).to_bytes(4, "big") + PNG_BYTES[20:]


def image(data: str, fmt: str = "png") -> dict[str, Any]:
    return {"image": {"format": fmt, "source": {"bytes": data}}}


def document(data: str = PDF, fmt: str = "pdf", name: str = "report") -> dict[str, Any]:
    return {"document": {"format": fmt, "name": name, "source": {"bytes": data}}}


def with_media(m: dict[str, Any], blocks: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """A request whose blocks are in the first toolResult's content (``result``) or beside the text of the first
    user message (``user``)."""
    if where == "user":
        return {**TOOLS, "messages": [{"role": "user", "content": [{"text": HW}, *blocks]}]}
    answer = _answered(m)
    answer["content"][0]["toolResult"]["content"] = [{"text": "the value"}, *blocks]
    return {**TOOLS, "messages": [request()["messages"][0], m, answer]}


MEDIA = {
    "an image format Converse has no name for": ([image(PNG, "jpg")], "satisfy enum value set: [png, jpeg, gif, webp]"),
    "JPEG bytes labelled png": ([image(JPEG)], "but the image appears to be a image/jpeg image"),
    "bytes of no image type": ([image(_b64(b"this is a text file, not a picture"))], "Could not process image"),
    "base64 that does not decode": ([image("not*base64")], "base64"),
    "an image over 3.75 MB": ([image(_b64(PNG_BYTES + bytes(3_932_160)))], "at most 3.75 MB"),
    "an image wider than 8000 px": ([image(_b64(WIDE_PNG))], "exceed max allowed size: 8000 pixels"),
    "21 images": ([image(PNG)] * 21, "up to 20 images"),
    "a document format Converse has no name for": ([document(fmt="rtf")], "satisfy enum value set: [pdf, csv"),
    "a pdf document that is no PDF": ([document(_b64(b"plain text"))], "The PDF specified was not valid"),
    "a document name with a dot": ([document(name="report.pdf")], "document name"),
    "a document over 4.5 MB": ([document(_b64(b"%PDF-1.4\n" + bytes(4_718_592)))], "at most 4.5 MB"),
    "6 documents": ([document(name=f"report {k}") for k in range(6)], "up to 5 documents"),
}


@pytest.mark.parametrize("where", ["user", "result"])
@pytest.mark.parametrize("case", list(MEDIA))
def test_media_bedrock_refuses_are_refused(sv, case, where):
    """An image or a document Converse (or the model behind it) refuses, in a user message or a toolResult: a 400
    ValidationException (a SerializationException for base64 that does not decode) saying what is wrong."""
    blocks, words = MEDIA[case]
    status, headers, data = post(sv[1], path(False), with_media(_turn(sv), blocks, where), BEARER)
    assert status == 400, data[:300]
    assert words in json.loads(data)["message"]
    assert headers["x-amzn-errortype"].split(":", 1)[0] in ("ValidationException", "SerializationException")


@pytest.mark.parametrize("where", ["user", "result"])
def test_media_bedrock_takes_are_taken(sv, where):
    """A PNG, a JPEG, a GIF and a WebP each labelled with its own format, a PDF, a Markdown document: accepted."""
    blocks = [image(PNG), image(JPEG, "jpeg"), image(GIF, "gif"), image(WEBP, "webp"), document(),
              document(_b64(b"# Notes"), "md", "notes (draft) [2]")]
    status, _, data = post(sv[1], path(False), with_media(_turn(sv), blocks, where), BEARER)
    assert status == 200, data[:300]


def test_media_only_in_user_messages_and_a_document_beside_text(sv):
    """An image in an assistant message is refused; so is a user message whose document has no text block."""
    m = _turn(sv)
    body = {**TOOLS, "messages": [request()["messages"][0], {**m, "content": [*m["content"], image(PNG)]},
                                  _answered(m)]}
    status, _, data = post(sv[1], path(False), body, BEARER)
    assert status == 400 and "only allowed in user messages" in json.loads(data)["message"]
    body = {"messages": [{"role": "user", "content": [document()]}]}
    status, _, data = post(sv[1], path(False), body, BEARER)
    assert status == 400 and "no text block" in json.loads(data)["message"]


def test_the_model_id_is_read_from_the_encoded_path(sv):
    """An ARN with / and : in it, percent-encoded as one segment, is the model the request names."""
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5"
    assert post(sv[1], path(False, arn), request(), BEARER)[0] == 200
    assert sv[0].requests[-1].path == path(False, arn)


# ---- authentication -----------------------------------------------------------------------------------------------
def signed(url: str, where: str, body: bytes, *, key: str = KEY_ID, secret: str | None = None, service: str = "bedrock",
           token: str | None = None, when: datetime.datetime | None = None) -> dict[str, str]:
    """Headers for a request signed by botocore's SigV4Auth (at ``when``, if given)."""
    creds = Credentials(key, secret if secret is not None else KNOWN_CREDENTIALS.get(key, "x" * 40), token)
    req = AWSRequest(method="POST", url=url + where, data=body, headers={"content-type": "application/json"})
    auth = SigV4Auth(creds, service, "us-east-1")
    if when is None:
        auth.add_auth(req)
    else:
        req.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
        auth._modify_request_before_signing(req)
        req.headers["X-Amz-Date"] = req.context["timestamp"]
        auth._inject_signature_to_request(req, auth.signature(auth.string_to_sign(req, auth.canonical_request(req)),
                                                              req))
    return dict(req.headers.items())


def test_a_sigv4_request_signed_with_known_credentials_is_verified(sv):
    """botocore's SigV4 over the exact bytes, with AWS's documented example key (and a session token): accepted."""
    data = json.dumps(request()).encode()
    for stream in (True, False):
        headers = signed(sv[1], path(stream), data, token="session-token-xyz")
        status, _, body = post(sv[1], path(stream), None, headers, raw=data)
        assert status == 200, body


@pytest.mark.parametrize("case,etype,words", [
    ("no authorization", "MissingAuthenticationTokenException", "Missing Authentication Token"),
    ("an unknown key", "UnrecognizedClientException", "security token included in the request is invalid"),
    ("a wrong secret", "InvalidSignatureException", "signature we calculated does not match"),
    ("a changed body", "InvalidSignatureException", "signature we calculated does not match"),
    ("another service", "InvalidSignatureException", "scoped to correct service"),
    ("an old signature", "InvalidSignatureException", "Signature expired"),
    ("no signature", "IncompleteSignatureException", "requires 'Signature'"),
])
def test_sigv4_failures_are_answered_as_aws_answers_them(sv, case, etype, words):
    """Each authentication failure is a 403 {"message"} with AWS's type in x-amzn-ErrorType."""
    data = json.dumps(request()).encode()
    where = path(False)
    headers: dict[str, str] = {}
    if case == "an unknown key":
        headers = signed(sv[1], where, data, key="AKIAUNKNOWNKEY000000", secret="s" * 40)
    elif case == "a wrong secret":
        headers = signed(sv[1], where, data, secret="not-the-secret" * 3)
    elif case == "a changed body":
        headers = signed(sv[1], where, data)
        data = data.replace(b"512", b"513")
    elif case == "another service":
        headers = signed(sv[1], where, data, service="bedrock-runtime")
    elif case == "an old signature":
        headers = signed(sv[1], where, data, when=datetime.datetime.now(datetime.timezone.utc)
                         - datetime.timedelta(minutes=20))
    elif case == "no signature":
        headers = signed(sv[1], where, data)
        headers["Authorization"] = headers["Authorization"].rsplit(", Signature=", 1)[0]
    status, got, body = post(sv[1], where, None, headers, raw=data)
    assert status == 403 and got["x-amzn-errortype"].split(":", 1)[0] == etype
    assert words in json.loads(body)["message"]


# ---- faults ---------------------------------------------------------------------------------------------------------
def test_an_in_stream_error_is_an_exception_frame_botocore_reads(sv):
    """Fault.in_stream_error: after part of the reply, one `:message-type exception` frame botocore parses as the
    modelled exception."""
    for kind, etype in (("overloaded", "serviceUnavailableException"), ("rate_limit", "throttlingException"),
                        ("server", "internalServerException")):
        sv[0].plan([Fault.in_stream_error(kind)])
        status, _, data = post(sv[1], path(True), request(), BEARER)
        assert status == 200
        last_headers, payload = frames_of(data)[-1]
        assert last_headers[":message-type"] == "exception" and last_headers[":exception-type"] == etype
        assert set(payload) == {"message"}
        assert events(data)[-1] == {"Error": {"Code": etype, "Message": payload["message"]}}


@pytest.mark.parametrize("code,etype", [(429, "ThrottlingException"), (503, "ServiceUnavailableException"),
                                        (500, "InternalServerException"), (424, "ModelErrorException"),
                                        (408, "ModelTimeoutException"), (400, "ValidationException")])
def test_a_status_fault_answers_with_bedrocks_error(sv, code, etype):
    """Fault.status: the status, Bedrock's {"message"} body and the type in x-amzn-ErrorType (the type botocore's
    model gives that status)."""
    sv[0].plan([Fault.status(code)])
    status, headers, body = post(sv[1], path(True), request(), BEARER)
    assert status == code and headers["x-amzn-errortype"].startswith(etype + ":")
    assert set(json.loads(body)) == {"message"} and headers["x-amzn-requestid"]
    shape = MODEL.shape_for(etype)
    assert shape.metadata["error"]["httpStatusCode"] == code


def test_max_tokens_and_unclean_endings(sv):
    """Fault.max_tokens cuts the last call's input and ends with max_tokens; Fault.finish ends with the given
    stopReason (one of the model's enum), streamed and whole."""
    sv[0].plan([Fault.max_tokens()])
    parsed, _ = stream_turn(sv, request())
    assert parsed[-2]["messageStop"]["stopReason"] == "max_tokens"
    enum = MODEL.shape_for("StopReason").enum
    for reason in ("guardrail_intervened", "content_filtered", "malformed_tool_use"):
        assert reason in enum
        sv[0].plan([Fault.finish(reason, partial=True)])
        parsed, _ = stream_turn(sv, request())
        assert parsed[-2]["messageStop"]["stopReason"] == reason
        sv[0].plan([Fault.finish(reason)])
        doc = json.loads(post(sv[1], path(False), request(), BEARER)[2])
        walk(doc, MODEL.operation_model("Converse").output_shape)
        assert doc["stopReason"] == reason
