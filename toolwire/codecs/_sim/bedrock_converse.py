"""Amazon Bedrock Converse for the simulated provider: ``POST /model/{modelId}/converse-stream`` (an AWS event
stream) and ``POST /model/{modelId}/converse`` (one JSON body); the model id is the percent-decoded path segment.

Authentication, as Bedrock checks it: a Bedrock API key (``Authorization: Bearer …``, any non-empty token), or an
AWS Signature Version 4 (``Authorization: AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/bedrock/aws4_request,
SignedHeaders=…, Signature=…`` with ``x-amz-date``). A signature is checked for its structure (the parameters, a
date within 15 minutes that matches the credential scope, the service ``bedrock``, ``host`` and ``x-amz-date``
signed), then for its value when it was made with credentials the simulator knows (``KNOWN_CREDENTIALS``: AWS's
documented example key pair), by computing it again over the request's exact bytes. Each failure is a 403 with the
type AWS answers (``MissingAuthenticationTokenException``, ``IncompleteSignatureException``,
``InvalidSignatureException``, ``UnrecognizedClientException`` for a key it does not know).

Request checks (a 400 ``ValidationException``, ``{"message": …}`` with the type in ``x-amzn-ErrorType``): the
conversation starts with a user message and the roles alternate; no message is empty; every content block is one
member; toolUse blocks only in assistant messages, their ``input`` an object; the user message after an assistant
message with toolUse blocks answers each of them with exactly one toolResult (and a toolResult answers a toolUse of
the previous assistant message), a toolResult's ``json`` an object and its content not empty when its status is
``error``; images and documents (in a user message or a toolResult; never in an assistant message) as Converse
takes them: an image's ``format`` one of png/jpeg/gif/webp, a document's one of pdf/csv/doc/docx/xls/xlsx/html/
txt/md with a ``name`` of 1 to 200 letters, digits, single spaces, hyphens, parentheses and brackets, their
``source.bytes`` base64 that decodes (the JSON wire form of a blob), an image of at most 3.75 MB and 8000 px a
side whose bytes are of the type its ``format`` names, a document of at most 4.5 MB (a ``pdf`` one a PDF), at
most 20 images and 5 documents in a message, a top-level document with a text block beside it (the limits of
the API reference's ``Message``); a mismatch the model reads is answered as Bedrock relays a model's error ("The
model returned the following errors: …"); ``toolConfig`` present when the history holds tool blocks, its tools at least one, each name valid and
declared once, ``toolChoice`` one of ``auto``/``any``/``tool`` naming a declared tool; ``inferenceConfig``
``maxTokens`` at least 1, ``temperature`` and ``topP`` from 0 to 1; ``system`` a list of blocks. With extended
thinking asked for (``additionalModelRequestFields.thinking``), a call turn starts with a ``reasoningContent``
block whose ``signature`` the simulator signed over its text, and a replayed one must keep both.

Responses: event-stream frames (``:event-type``, ``:content-type: application/json``, ``:message-type: event``)
whose payloads carry a random ``p`` padding, as the real service's do: ``messageStart``, per block
``contentBlockStart`` (tool blocks) / ``contentBlockDelta`` / ``contentBlockStop``, ``messageStop``, ``metadata``;
in-stream errors as ``:message-type: exception`` frames; a whole ``Converse`` body otherwise. Every response has an
``x-amzn-RequestId``.
"""

from __future__ import annotations

import binascii
import datetime
import hashlib
import hmac
import json
import re
import string
from typing import Any, Callable
from urllib.parse import quote, unquote

from ...sim._base import Dialect, Ev, Request, base64_ok, bearer, partial_text
from ...sim._core import ApiError, Call, Conversation, Fault, Reply, Result, dumps, fragments, text_fragments
from ...sim._model import parse_content
from ..eventstream import encode_message

__all__ = ["BedrockConverse", "KNOWN_CREDENTIALS", "STATUS"]

#: access key id → secret access key of the credentials whose signatures the simulator verifies (AWS's documented
#: example pair, "IAM user guide: access keys"); a signature by any other key is answered UnrecognizedClientException
KNOWN_CREDENTIALS = {"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}

_ROUTE = re.compile(r"^/model/([^/]+)/(converse|converse-stream)$")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PAD = string.ascii_lowercase + string.ascii_uppercase + string.digits
_BEDROCK_NS = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_SERVICE_NS = "http://internal.amazon.com/coral/com.amazon.coral.service/"
_SIG_PREFIX = b"\x12\x9c\x01"  # the first bytes of a Claude signature ("Epw…")
_SKEW = datetime.timedelta(minutes=15)
_BLOCKS = ("text", "image", "document", "video", "audio", "toolUse", "toolResult", "guardContent", "cachePoint",
           "reasoningContent", "citationsContent", "searchResult")
_RESULT_BLOCKS = ("text", "json", "image", "document", "video", "searchResult")
_IMAGE_FORMATS = ("png", "jpeg", "gif", "webp")
_DOCUMENT_FORMATS = ("pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md")
_IMAGE_MAX = 3_932_160  # 3.75 MB
_IMAGE_SIDE_MAX = 8000
_DOCUMENT_MAX = 4_718_592  # 4.5 MB
_IMAGES_PER_MESSAGE, _DOCUMENTS_PER_MESSAGE = 20, 5
_DOCUMENT_NAME = re.compile(r"^(?:[A-Za-z0-9()\[\]-]|\s(?!\s))+$")

#: HTTP status → (error type, message) of the errors a planned status answers with
STATUS = {
    400: ("ValidationException", "Malformed input request, please reformat your input and try again."),
    403: ("AccessDeniedException", "You don't have access to the model with the specified model ID."),
    404: ("ResourceNotFoundException", "The provided model identifier is invalid."),
    408: ("ModelTimeoutException", "Model has timed out in processing the request. Try your request again."),
    424: ("ModelErrorException", "The model encountered an error while processing the request."),
    429: ("ThrottlingException", "Too many requests, please wait before trying again."),
    500: ("InternalServerException", "The system encountered an unexpected error during processing. Try your "
                                     "request again."),
    503: ("ServiceUnavailableException", "Bedrock is unable to process your request."),
}
_STREAM_ERRORS = {"overloaded": ("serviceUnavailableException", STATUS[503][1]),
                  "rate_limit": ("throttlingException", STATUS[429][1]),
                  "server": ("internalServerException", STATUS[500][1])}
_INCOMPLETE = "IncompleteSignatureException"
_INVALID = "InvalidSignatureException"
_MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS Secret "
             "Access Key and signing method. Consult the service documentation for details.")


def _invalid(message: str) -> ApiError:
    return ApiError(400, message, kind="ValidationException")


def _constraint(value: Any, where: str, rule: str) -> ApiError:
    return _invalid(f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy constraint: "
                    f"Member must {rule}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---- SigV4 ----------------------------------------------------------------------------------------------------------
def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def sigv4_signature(secret: str, *, method: str, path: str, query: dict[str, list[str]], headers: Any,
                    signed: list[str], body: bytes, stamp: str, scope: str) -> str:
    """The SigV4 signature of a request as received (``path`` percent-encoded as sent): the canonical request
    (its path URI-encoded once more, as for every service but S3), the string to sign, the derived key."""
    canonical_query = "&".join(sorted(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                                      for k, values in query.items() for v in values))
    lines = []
    for name in signed:
        values = headers.get_all(name) or []
        lines.append(f"{name}:{','.join(' '.join(str(v).split()) for v in values)}")
    payload = (headers.get("x-amz-content-sha256") or "").strip() or hashlib.sha256(body).hexdigest()
    canonical = "\n".join([method.upper(), quote(path, safe="/~"), canonical_query, "\n".join(lines) + "\n",
                           ";".join(signed), payload])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    date, region, service, terminal = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), date), region), service), terminal)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _sigv4_problem(req: Request) -> tuple[str, str] | None:
    """What is wrong with a request's SigV4 authorization (error type, message), or None when it holds."""
    auth = req.header("authorization")
    params: dict[str, str] = {}
    for part in auth[len("AWS4-HMAC-SHA256"):].split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            params[name.strip()] = value.strip()
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not params.get(name):
            return _INCOMPLETE, f"Authorization header requires '{name}' parameter. Authorization={auth[:120]}"
    stamp = req.header("x-amz-date")
    if not stamp:
        return _INCOMPLETE, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
    try:
        when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return _INCOMPLETE, f"Date must be in ISO-8601 'basic format'. Got '{stamp}'."
    scope = params["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return _INCOMPLETE, (f"Credential should be scoped to a valid region, not '{'/'.join(scope[2:3])}'. "
                             if len(scope) == 5 else "Authorization header requires a Credential of five parts. ") \
            + f"Credential={params['Credential']}"
    access, date, region, service, _ = scope
    if date != stamp[:8]:
        return _INVALID, (f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
                          f"'{date}' != '{stamp[:8]}', from '{stamp}'.")
    if service != "bedrock":
        return _INVALID, "Credential should be scoped to correct service: 'bedrock'. "
    if not re.fullmatch(r"[a-z0-9-]{2,32}", region):
        return _INVALID, f"Credential should be scoped to a valid region, not '{region}'. "
    signed = params["SignedHeaders"].split(";")
    if "host" not in signed:
        return _INVALID, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
    if "x-amz-date" not in signed:
        return _INVALID, "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization."
    now = datetime.datetime.now(datetime.timezone.utc)
    if abs(now - when) > _SKEW:
        earlier = (now - _SKEW).strftime("%Y%m%dT%H%M%SZ")
        return _INVALID, (f"Signature expired: {stamp} is now earlier than {earlier} "
                          f"({now.strftime('%Y%m%dT%H%M%SZ')} - 15 min.)")
    secret = KNOWN_CREDENTIALS.get(access)
    if secret is None:
        return "UnrecognizedClientException", "The security token included in the request is invalid."
    expected = sigv4_signature(secret, method=req.method, path=req.path, query=req.query, headers=req.headers,
                               signed=signed, body=req.raw, stamp=stamp, scope="/".join(scope[1:]))
    if not hmac.compare_digest(expected, params["Signature"]):
        return _INVALID, _MISMATCH
    return None


# ---- the dialect ----------------------------------------------------------------------------------------------------
class BedrockConverse(Dialect):
    name = "bedrock-converse"
    demo_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    overloaded_status = 503

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        m = _ROUTE.match(path)
        if method != "POST" or m is None:
            return None
        return {"model": unquote(m.group(1)), "stream": m.group(2) == "converse-stream"}

    # ---- auth and errors --------------------------------------------------------------------------------------
    def authorized(self, req: Request) -> bool:
        auth = req.header("authorization")
        if bearer(req):
            return True
        if auth.startswith("AWS4-HMAC-SHA256"):
            problem = _sigv4_problem(req)
        else:
            problem = ("MissingAuthenticationTokenException", "Missing Authentication Token")
        req.state["auth_problem"] = problem
        return problem is None

    def auth_error(self, req: Request) -> tuple[int, Any]:
        etype, message = req.state.get("auth_problem") or ("MissingAuthenticationTokenException",
                                                           "Missing Authentication Token")
        self._error_type(req, etype, _SERVICE_NS)
        return 403, {"message": message}

    def _error_type(self, req: Request, etype: str, namespace: str = _BEDROCK_NS) -> None:
        """The error's type goes in ``x-amzn-ErrorType``: set on the headers dict this part gave the server for the
        response (``response_headers``), which it sends with the error body."""
        req.state.setdefault("headers", {})["x-amzn-ErrorType"] = f"{etype}:{namespace}"

    def error_body(self, err: ApiError, req: Request) -> Any:
        etype = err.kind or STATUS.get(err.status, ("ValidationException",))[0]
        self._error_type(req, etype)
        return {"message": err.message}

    def status_body(self, fault: Fault, req: Request) -> Any:
        code = fault.code or 500
        etype, message = STATUS.get(code, ("InternalServerException" if code >= 500 else "ValidationException",
                                           f"The service returned status {code}."))
        self._error_type(req, etype)
        return {"message": message}

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        return ApiError(400, f"Unexpected character in the request body: {exc}", kind="SerializationException")

    def response_headers(self, req: Request) -> dict[str, str]:
        headers = req.state.setdefault("headers", {})
        r = req.rand
        headers["x-amzn-RequestId"] = f"{r.hex(8)}-{r.hex(4)}-{r.hex(4)}-{r.hex(4)}-{r.hex(12)}"
        return headers

    def content_type(self, req: Request) -> str:
        return "application/vnd.amazon.eventstream"

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        req.model = str(req.route.get("model", ""))
        req.stream = bool(req.route.get("stream"))
        if not isinstance(body, dict):
            raise ApiError(400, "Start of structure or map found where not expected.", kind="SerializationException")
        _check_inference(body.get("inferenceConfig"))
        _check_system(body.get("system"))
        thinking = _thinking(body)
        req.state["thinking"] = thinking
        names = _check_tools(body.get("toolConfig"))
        messages = body.get("messages")
        if messages is None:
            raise _constraint("null", "messages", "not be null")
        if not isinstance(messages, list):
            raise ApiError(400, "Unexpected list element termination", kind="SerializationException")
        if not messages:
            raise _invalid("A conversation must start with a user message. Try again with a conversation that starts "
                           "with a user message.")
        conv = Conversation()
        prev_ids: list[str] = []
        names_by_id: dict[str, str] = {}
        has_tool_blocks = False
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise _constraint(m.get("role") if isinstance(m, dict) else m, f"messages.{i}.member.role",
                                  "satisfy enum value set: [user, assistant]")
            role = m["role"]
            if i == 0 and role != "user":
                raise _invalid("A conversation must start with a user message. Try again with a conversation that "
                               "starts with a user message.")
            if i > 0 and role == messages[i - 1].get("role"):
                raise _invalid("A conversation must alternate between user and assistant roles. Make sure the "
                               "conversation alternates between user and assistant roles and try again.")
            content = m.get("content")
            if not isinstance(content, list) or not content:
                raise _invalid(f"The content field in the Message object at messages.{i} is empty. Add a ContentBlock "
                               "object to the content field and try again.")
            for k, block in enumerate(content):
                if not isinstance(block, dict) or len(block) != 1 or next(iter(block)) not in _BLOCKS:
                    raise _invalid(f"The content block at messages.{i}.content.{k} must set exactly one of: "
                                   f"{', '.join(_BLOCKS)}.")
            if role == "user":
                results = self._user(req, i, content, prev_ids, names_by_id, conv)
                has_tool_blocks = has_tool_blocks or bool(results)
                prev_ids = []
            else:
                prev_ids = self._assistant(req, i, content, names_by_id, conv, thinking,
                                           answered=i + 1 < len(messages), last_call_turn=i == len(messages) - 2)
                has_tool_blocks = has_tool_blocks or bool(prev_ids)
        if prev_ids:
            raise _invalid(f"Expected toolResult blocks at messages.{len(messages)}.content for the following Ids: "
                           f"{', '.join(prev_ids)}")
        if has_tool_blocks and names is None:
            raise _invalid("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
        return conv

    def _user(self, req: Request, i: int, content: list[Any], prev_ids: list[str], names_by_id: dict[str, str],
              conv: Conversation) -> list[Result]:
        results: list[Result] = []
        seen: set[str] = set()
        texts: list[str] = []
        media = _MediaCount(i)
        for k, block in enumerate(content):
            kind, value = next(iter(block.items()))
            at = f"messages.{i}.content.{k}"
            if kind in ("image", "document"):
                _check_media(kind, value, at, f"messages.{i}.member.content.{k}.member", media)
            if kind == "toolUse":
                raise _invalid(f"{at}: toolUse blocks are only allowed in assistant messages.")
            if kind == "reasoningContent":
                raise _invalid(f"{at}: reasoningContent blocks are only allowed in assistant messages.")
            if kind == "text":
                if not isinstance(value, str):
                    raise _invalid(f"The format of the value at {at}.text is invalid. Provide a string and try again.")
                texts.append(value)
            elif kind == "toolResult":
                if not isinstance(value, dict) or not isinstance(value.get("toolUseId"), str):
                    raise _constraint("null", f"{at}.member.toolResult.toolUseId", "not be null")
                tid = value["toolUseId"]
                if tid not in prev_ids or tid in seen:
                    raise _invalid(f"The number of toolResult blocks at messages.{i}.content exceeds the number of "
                                   "toolUse blocks of previous turn.")
                seen.add(tid)
                results.append(_result(value, at, names_by_id.get(tid),
                                       f"messages.{i}.member.content.{k}.member.toolResult", media))
        if any("document" in b for b in content) and not any("text" in b for b in content):
            raise _invalid(f"The content field in the Message object at messages.{i} has a document block but no "
                           "text block. Add a text block describing the document and try again.")
        missing = [t for t in prev_ids if t not in seen]
        if missing:
            raise _invalid(f"Expected toolResult blocks at messages.{i}.content for the following Ids: "
                           f"{', '.join(missing)}")
        if results:
            conv.add("results", results)
        if texts and "".join(texts).strip():
            conv.add("user", "".join(texts))
        return results

    def _assistant(self, req: Request, i: int, content: list[Any], names_by_id: dict[str, str],
                   conv: Conversation, thinking: bool, *, answered: bool, last_call_turn: bool) -> list[str]:
        ids: list[str] = []
        calls: list[Call] = []
        for k, block in enumerate(content):
            kind, value = next(iter(block.items()))
            at = f"messages.{i}.content.{k}"
            if kind == "toolResult":
                raise _invalid(f"{at}: toolResult blocks are only allowed in user messages.")
            if kind in ("image", "document"):
                raise _invalid(f"{at}: {kind} blocks are only allowed in user messages.")
            if kind == "toolUse":
                if not isinstance(value, dict):
                    raise _constraint(value, f"{at}.member.toolUse", "not be null")
                for field in ("toolUseId", "name", "input"):
                    if field not in value:
                        raise _constraint("null", f"{at}.member.toolUse.{field}", "not be null")
                if not isinstance(value["input"], dict):
                    raise _invalid(f"The format of the value at {at}.toolUse.input is invalid. Provide a json object "
                                   "for the field and try again.")
                ids.append(value["toolUseId"])
                names_by_id[value["toolUseId"]] = value["name"]
                calls.append(Call(value["toolUseId"], value["name"], value["input"]))
            elif kind == "reasoningContent":
                text = (value.get("reasoningText") or {}) if isinstance(value, dict) else {}
                if "redactedContent" in (value or {}):
                    if not base64_ok(value["redactedContent"]):
                        raise _invalid(f"The format of the value at {at}.reasoningContent.redactedContent is invalid.")
                    continue
                if req.sim.signer.verify(text.get("signature"), str(text.get("text", "")),
                                         prefix=_SIG_PREFIX) is not True:
                    raise _invalid(f"The model returned the following errors: messages.{i}.content.{k}: Invalid "
                                   "`signature` in `thinking` block")
            elif kind == "text" and isinstance(value, str) and value:
                conv.add("text", value)
        if ids:
            first = next(iter(content[0])) if content else None
            if (thinking and last_call_turn and answered and first != "reasoningContent"
                    and any(req.sim._registry_get("bedrock_reasoning_for", t) for t in ids)):
                raise _invalid(f"The model returned the following errors: messages.{i}.content.0.type: Expected "
                               f"`thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, "
                               "a final `assistant` message must start with a thinking block.")
            conv.add("calls", calls)
        return ids

    # ---- the response -----------------------------------------------------------------------------------------
    def _content(self, reply: Reply, req: Request) -> list[dict[str, Any]]:
        if "content" in req.state:
            return req.state["content"]
        rand = req.rand
        content: list[dict[str, Any]] = []
        if reply.calls:
            if req.state.get("thinking"):
                names = ", ".join(name for name, _ in reply.calls)
                text = f"The user's question needs data from my tools, so I will call {names} before answering."
                content.append({"reasoningContent": {"reasoningText": {
                    "text": text, "signature": req.sim.signer.sign(text, rand.nonce(), prefix=_SIG_PREFIX)}}})
            for name, args in reply.calls:
                tid = "tooluse_" + rand.token(22)
                if req.state.get("thinking"):
                    req.sim._registry_put("bedrock_reasoning_for", tid, True)
                content.append({"toolUse": {"toolUseId": tid, "name": name, "input": args}})
        else:
            content.append({"text": reply.text or ""})
        req.state["content"] = content
        return content

    def _usage(self, req: Request, reply: Reply) -> dict[str, Any]:
        prompt = max(1, len(req.raw) // 4)
        completion = max(1, len(dumps([reply.text, reply.calls])) // 4)
        return {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}

    def _writer(self, req: Request, evs: list[Ev]) -> Callable[..., None]:
        """The event writer appending to ``evs`` (each payload padded, its members in the order AWS sends them)."""
        rng = req.rand.rng

        def ev(type_: str, content_: bool = False, **fields: Any) -> None:
            payload = dict(sorted({**fields, "p": _PAD[:rng.randint(1, len(_PAD))]}.items()))
            evs.append(Ev(encode_message({":event-type": type_, ":content-type": "application/json",
                                          ":message-type": "event"}, dumps(payload)), content_))

        ev("messageStart", role="assistant")
        return ev

    def _end(self, ev: Callable[..., None], req: Request, reply: Reply, stop: str) -> None:
        ev("messageStop", stopReason=stop)
        ev("metadata", usage=self._usage(req, reply), metrics={"latencyMs": req.rand.rng.randint(300, 2400)})

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        rand = req.rand
        content = self._content(reply, req)
        evs: list[Ev] = []
        ev = self._writer(req, evs)
        stop = "tool_use" if reply.calls else "end_turn"
        tools = [b for b in content if "toolUse" in b]
        for idx, block in enumerate(content):
            if "reasoningContent" in block:
                text = block["reasoningContent"]["reasoningText"]
                for frag in text_fragments(text["text"], rand):
                    ev("contentBlockDelta", contentBlockIndex=idx, delta={"reasoningContent": {"text": frag}})
                ev("contentBlockDelta", contentBlockIndex=idx,
                   delta={"reasoningContent": {"signature": text["signature"]}})
            elif "toolUse" in block:
                use = block["toolUse"]
                ev("contentBlockStart", True, contentBlockIndex=idx,
                   start={"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}})
                frags = fragments(json.dumps(use["input"], ensure_ascii=False), rand)
                if max_tokens and block is tools[-1]:
                    frags, stop = frags[:max(1, len(frags) // 2)], "max_tokens"
                for frag in ["", *frags]:
                    ev("contentBlockDelta", True, contentBlockIndex=idx, delta={"toolUse": {"input": frag}})
            else:
                frags = text_fragments(block["text"], rand)
                if max_tokens:
                    frags, stop = frags[:max(1, len(frags) // 2)], "max_tokens"
                for frag in frags:
                    ev("contentBlockDelta", True, contentBlockIndex=idx, delta={"text": frag})
            ev("contentBlockStop", contentBlockIndex=idx)
            if stop == "max_tokens":
                break
        self._end(ev, req, reply, stop)
        return evs

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        content = [json.loads(json.dumps(b)) for b in self._content(reply, req)]
        stop = "tool_use" if reply.calls else "end_turn"
        if max_tokens:
            stop = "max_tokens"
            last = content[-1]
            if "toolUse" in last:
                last["toolUse"]["input"] = {}
            else:
                last["text"] = last["text"][:max(1, len(last["text"]) // 2)]
        return self._body(req, reply, content, stop)

    def _body(self, req: Request, reply: Reply, content: list[Any], stop: str) -> dict[str, Any]:
        return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                "usage": self._usage(req, reply), "metrics": {"latencyMs": req.rand.rng.randint(300, 2400)}}

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        evs: list[Ev] = []
        ev = self._writer(req, evs)
        text = partial_text(reply) if partial else ""
        if text:
            for frag in text_fragments(text, req.rand):
                ev("contentBlockDelta", True, contentBlockIndex=0, delta={"text": frag})
            ev("contentBlockStop", contentBlockIndex=0)
        self._end(ev, req, reply, reason)
        return evs

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        text = partial_text(reply) if partial else ""
        return self._body(req, reply, [{"text": text}] if text else [], reason)

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        etype, message = _STREAM_ERRORS[kind]
        return [encode_message({":exception-type": etype, ":content-type": "application/json",
                                ":message-type": "exception"}, dumps({"message": message}))]


# ---- request checks ---------------------------------------------------------------------------------------------
def _thinking(body: dict[str, Any]) -> bool:
    extra = body.get("additionalModelRequestFields")
    thinking = extra.get("thinking") if isinstance(extra, dict) else None
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _check_inference(config: Any) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise ApiError(400, "Start of list found where not expected", kind="SerializationException")
    max_tokens = config.get("maxTokens")
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise ApiError(400, "NUMBER_VALUE can not be converted to an Integer", kind="SerializationException")
        if max_tokens < 1:
            raise _constraint(max_tokens, "inferenceConfig.maxTokens", "have value greater than or equal to 1")
    for field in ("temperature", "topP"):
        value = config.get(field)
        if value is None:
            continue
        if not _number(value):
            raise ApiError(400, "STRING_VALUE can not be converted to a Float", kind="SerializationException")
        if value > 1:
            raise _constraint(value, f"inferenceConfig.{field}", "have value less than or equal to 1")
        if value < 0:
            raise _constraint(value, f"inferenceConfig.{field}", "have value greater than or equal to 0")
    stops = config.get("stopSequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops)):
        raise _invalid("The stopSequences field must be a list of non-empty strings.")


def _check_system(system: Any) -> None:
    if system is None:
        return
    if not isinstance(system, list):
        raise ApiError(400, "Start of structure or map found where not expected.", kind="SerializationException")
    for k, block in enumerate(system):
        if not (isinstance(block, dict) and len(block) == 1
                and next(iter(block)) in ("text", "guardContent", "cachePoint")):
            raise _invalid(f"The system block at system.{k} must set exactly one of: text, guardContent, cachePoint.")
        if "text" in block and not (isinstance(block["text"], str) and block["text"]):
            raise _constraint("", f"system.{k}.member.text", "have length greater than or equal to 1")


def _check_tools(config: Any) -> set[str] | None:
    """The names ``toolConfig`` declares (None without one)."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ApiError(400, "Start of list found where not expected", kind="SerializationException")
    tools = config.get("tools")
    if not isinstance(tools, list) or not tools:
        raise _constraint("[]" if tools == [] else "null", "toolConfig.tools",
                          "have length greater than or equal to 1" if tools == [] else "not be null")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict) or len(tool) != 1:
            raise _invalid(f"The tool at toolConfig.tools.{k} must set exactly one of: toolSpec, systemTool, "
                           "cachePoint.")
        spec = tool.get("toolSpec")
        if spec is None:
            continue  # a cache point, a system tool
        name = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(name, str) or not _NAME.match(name):
            raise _constraint(name, f"toolConfig.tools.{k}.member.toolSpec.name",
                              "satisfy regular expression pattern: [a-zA-Z0-9_-]+")
        schema = (spec.get("inputSchema") or {}).get("json") if isinstance(spec.get("inputSchema"), dict) else None
        if not isinstance(schema, dict):
            raise _invalid(f"The value at toolConfig.tools.{k}.toolSpec.inputSchema.json is invalid. Provide a json "
                           "object for the field and try again.")
        if name in names:
            raise _invalid(f"The toolConfig.tools field has two tools named {name}. Tool names must be unique.")
        names.add(name)
    choice = config.get("toolChoice")
    if choice is not None:
        if not isinstance(choice, dict) or len(choice) != 1 or next(iter(choice)) not in ("auto", "any", "tool"):
            raise _invalid("The toolChoice field must set exactly one of: auto, any, tool.")
        if "tool" in choice:
            name = (choice["tool"] or {}).get("name") if isinstance(choice["tool"], dict) else None
            if name not in names:
                raise _invalid(f"The tool {name} named in toolConfig.toolChoice is not one of the tools in "
                               "toolConfig.tools.")
    return names


def _result(value: dict[str, Any], at: str, name: str | None, member_at: str, media: "_MediaCount") -> Result:
    status = value.get("status")
    if status is not None and status not in ("success", "error"):
        raise _constraint(status, f"{at}.member.toolResult.status", "satisfy enum value set: [success, error]")
    content = value.get("content")
    if not isinstance(content, list):
        raise _constraint("null", f"{at}.member.toolResult.content", "not be null")
    if status == "error" and not content:
        raise _invalid(f"The content field at {at}.toolResult cannot be empty when status value is error.")
    texts: list[str] = []
    found: Any = None
    for j, piece in enumerate(content):
        where = f"{at}.toolResult.content.{j}"
        if not isinstance(piece, dict) or len(piece) != 1 or next(iter(piece)) not in _RESULT_BLOCKS:
            raise _invalid(f"The block at {where} must set exactly one of: {', '.join(_RESULT_BLOCKS)}.")
        if "json" in piece:
            if not isinstance(piece["json"], dict):
                raise _invalid(f"The format of the value at {where}.json is invalid. Provide a json object for the "
                               "field and try again.")
            found = piece["json"] if found is None else found
        elif "image" in piece or "document" in piece:
            kind = next(iter(piece))
            _check_media(kind, piece[kind], where, f"{member_at}.content.{j}.member", media)
        elif "text" in piece:
            if not isinstance(piece["text"], str):
                raise _invalid(f"The format of the value at {where}.text is invalid. Provide a string and try again.")
            texts.append(piece["text"])
    parsed = found if found is not None else parse_content("".join(texts))
    return Result(value["toolUseId"], name, parsed, None if status is None else status == "error")


# ---- images and documents -------------------------------------------------------------------------------------
class _MediaCount:
    """The images and documents of one message, against the limits of ``Message.content``."""

    def __init__(self, i: int) -> None:
        self.i, self.images, self.documents = i, 0, 0

    def add(self, kind: str) -> None:
        if kind == "image":
            self.images += 1
            if self.images > _IMAGES_PER_MESSAGE:
                raise _invalid(f"Too many images in messages.{self.i}: a message can include up to "
                               f"{_IMAGES_PER_MESSAGE} images.")
        else:
            self.documents += 1
            if self.documents > _DOCUMENTS_PER_MESSAGE:
                raise _invalid(f"Too many documents in messages.{self.i}: a message can include up to "
                               f"{_DOCUMENTS_PER_MESSAGE} documents.")


def _image_type(data: bytes) -> str | None:
    """The image format the bytes are (their first bytes), of those an ImageBlock takes."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def _image_size(kind: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF or JPEG when its header says them (None otherwise)."""
    if kind == "png" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if kind == "gif" and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if kind == "jpeg":
        at = 2
        while at + 9 <= len(data) and data[at] == 0xFF:
            marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(data[at + 7:at + 9], "big"), int.from_bytes(data[at + 5:at + 7], "big")
            at += 2 + length
    return None


def _bytes_of(source: Any, at: str, member_at: str) -> bytes | None:
    """The decoded ``source.bytes`` (None for an S3 location); refuses a source that is not exactly one of them
    and data that is not base64."""
    if not isinstance(source, dict) or len(source) != 1 or next(iter(source)) not in ("bytes", "s3Location"):
        raise _invalid(f"The source at {at}.source must set exactly one of: bytes, s3Location.")
    if "s3Location" in source:
        return None
    data = source["bytes"]
    if not isinstance(data, str) or not base64_ok(data):
        raise ApiError(400, f"Invalid base64 data at {at}.source.bytes: a blob is sent as standard, padded base64.",
                       kind="SerializationException")
    raw = binascii.a2b_base64(data)
    if not raw:
        raise _constraint("", f"{member_at}.source.bytes", "have length greater than or equal to 1")
    return raw


def _check_media(kind: str, block: Any, at: str, member_at: str, media: _MediaCount) -> None:
    """An image or document block (``at``: its path; ``member_at``: the path of the member holding it, as AWS's
    constraint messages write it), as Converse and the model behind it check it."""
    media.add(kind)
    where = f"{member_at}.{kind}"
    if not isinstance(block, dict):
        raise _constraint("null", where, "not be null")
    formats = _IMAGE_FORMATS if kind == "image" else _DOCUMENT_FORMATS
    fmt = block.get("format")
    if kind == "image" and fmt is None:
        raise _constraint("null", f"{where}.format", "not be null")
    if fmt is not None and fmt not in formats:
        raise _constraint(fmt, f"{where}.format", f"satisfy enum value set: [{', '.join(formats)}]")
    if kind == "document":
        name = block.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise _constraint(name, f"{where}.name", "have length between 1 and 200")
        if not _DOCUMENT_NAME.match(name):
            raise _invalid(f"The document name at {at}.document.name can only contain alphanumeric characters, "
                           "whitespace characters (no more than one in a row), hyphens, parentheses and square "
                           "brackets.")
    raw = _bytes_of(block.get("source"), f"{at}.{kind}", where)
    if raw is None:
        return
    if kind == "document":
        if len(raw) > _DOCUMENT_MAX:
            raise _invalid(f"The document at {at}.document is {len(raw)} bytes: a document can be at most 4.5 MB.")
        if fmt in (None, "pdf") and not raw.startswith(b"%PDF-"):
            raise _invalid(f"The model returned the following errors: {at}.document.source.base64.data: The PDF "
                           "specified was not valid.")
        return
    if len(raw) > _IMAGE_MAX:
        raise _invalid(f"The image at {at}.image is {len(raw)} bytes: an image can be at most 3.75 MB.")
    actual = _image_type(raw)
    if actual is None:
        raise _invalid(f"The model returned the following errors: {at}.image.source.base64.data: Could not process "
                       "image")
    if actual != fmt:
        raise _invalid(f"The model returned the following errors: {at}.image.source.base64: The image was specified "
                       f"using the image/{fmt} media type, but the image appears to be a image/{actual} image")
    size = _image_size(actual, raw)
    if size is not None and max(size) > _IMAGE_SIDE_MAX:
        raise _invalid(f"The model returned the following errors: {at}.image.source.base64.data: At least one of "
                       f"the image dimensions exceed max allowed size: {_IMAGE_SIDE_MAX} pixels")
