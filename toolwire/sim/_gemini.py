"""Gemini ``generateContent`` / ``streamGenerateContent`` (``/v1beta/models/{model}:…``).

``?alt=sse`` streams ``data:`` lines separated by ``\\r\\n\\r\\n``; without it the body is one JSON array whose
(indented) elements arrive progressively. Calls arrive whole, one per chunk; the first functionCall part of a
response carries a ``thoughtSignature`` (signed over the function name). Replay rules checked (D3, D6): in the
current turn (after the latest user text) every signature must be one this server issued, on its exact part, or
the documented ``skip_thought_signature_validator``, and on Gemini 3 and later model names (and the simulator's
own, such as ``gemini-sim``) the first functionCall part of every model content must carry one, as the real API
requires; a Gemini 1.x or 2.x name, or an image model, accepts a call without one. Each function call turn is
followed by one functionResponse per call, ``id`` matching when the calls had ids, ``response`` an object; roles
are ``user`` / ``model`` only."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ._base import STATUS_TEXT, Dialect, Ev, Request, base64_ok, partial_text
from ._core import ApiError, Call, Conversation, Fault, Reply, Result, dumps, text_fragments
from ._options import check_gemini

__all__ = ["Gemini", "google_error", "google_status_body", "google_authorized", "GOOGLE_NO_KEY", "SIG_PREFIX",
           "SKIP_SIGNATURES", "requires_signatures"]

SIG_PREFIX = b"\x0a\xa6\x01"  # real signatures start "CqYB…"
#: The documented value that skips the signature check, as sent by a client that writes JSON (the string
#: itself) and by one that sends it as bytes (the python SDK base64-encodes them).
SKIP_SIGNATURES = frozenset({"skip_thought_signature_validator",
                             base64.b64encode(b"skip_thought_signature_validator").decode()})
_VERSION = re.compile(r"gemini-(\d+)")
_ROUTE = re.compile(r"^/(v1beta|v1)/models/([^/:]+):(generateContent|streamGenerateContent)$")
GOOGLE_NO_KEY = ("Method doesn't allow unregistered callers (callers without established identity). Please use API "
                 "Key or other form of API consumer identity to call this API.")
_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "Request had invalid authentication credentials.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    408: "Request timed out.",
    409: "The operation was aborted.",
    429: "You exceeded your current quota, please check your plan and billing details. For more information on this "
         "error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    500: "An internal error has occurred. Please retry or report in "
         "https://developers.generativeai.google/guide/troubleshooting",
    502: "Bad gateway.",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
_KINDS = {"overloaded": 503, "rate_limit": 429, "server": 500}
_FILTERS = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"}


def _duration(seconds: float) -> str:
    return f"{seconds:g}s"


def google_error(code: int, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message, "status": STATUS_TEXT.get(code, "UNKNOWN")}
    if details:
        err["details"] = details
    return {"error": err}


def google_status_body(fault: Fault) -> dict[str, Any]:
    code = fault.code or 500
    details: list[Any] = []
    if code == 429:
        details.append({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
             "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
             "quotaDimensions": {"location": "global", "model": "gemini-sim"}, "quotaValue": "10"}]})
        details.append({"@type": "type.googleapis.com/google.rpc.Help", "links": [
            {"description": "Learn more about Gemini API quotas",
             "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]})
    if fault.retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": _duration(fault.retry_delay)})
    return google_error(code, _MESSAGES.get(code, f"The service returned status {code}."), details)


def google_authorized(req: Request) -> bool:
    auth = req.header("authorization")
    return (bool(req.header("x-goog-api-key")) or bool(req.q("key").strip())
            or (auth[:7].lower() == "bearer " and bool(auth[7:].strip())))


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    return d[camel] if camel in d else d.get(snake)


def requires_signatures(model: str) -> bool:
    """Whether a model refuses a replayed function call turn without its thought signature: Gemini 3 and later
    do; 1.x and 2.x models, and image models, do not. A name without a version (the simulator's
    own ``gemini-sim``) behaves like the newest models, so a dropped signature is caught by default."""
    m = _VERSION.search(model.lower())
    if m is None:
        return True
    return int(m.group(1)) >= 3 and "image" not in model.lower()


def _b64_ok(sig: Any) -> bool:
    """Proto bytes in JSON: base64 in the standard or the URL-safe alphabet."""
    if not isinstance(sig, str):
        return False
    std = sig.strip().rstrip("=").replace("-", "+").replace("_", "/")
    try:
        base64.b64decode(std + "=" * (-len(std) % 4), validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


class Gemini(Dialect):
    name = "gemini"
    demo_model = "gemini-2.5-flash"
    body_indent = 2

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        m = _ROUTE.match(path)
        if method != "POST" or m is None:
            return None
        return {"version": m.group(1), "model": m.group(2), "stream": m.group(3) == "streamGenerateContent"}

    def authorized(self, req: Request) -> bool:
        return google_authorized(req)

    def _array(self, req: Request) -> bool:
        return req.route.get("stream") and req.q("alt") != "sse"

    def _wrap(self, req: Request, body: Any) -> Any:
        return [body] if self._array(req) else body

    def auth_error(self, req: Request) -> tuple[int, Any]:
        return 403, self._wrap(req, google_error(403, GOOGLE_NO_KEY))

    def error_body(self, err: ApiError, req: Request) -> Any:
        return self._wrap(req, google_error(err.status, err.message))

    def status_body(self, fault: Fault, req: Request) -> Any:
        return self._wrap(req, google_status_body(fault))

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        return ApiError(400, f"Invalid JSON payload received. {exc}")

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        req.model = req.route["model"]
        req.stream = bool(req.route["stream"])
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid JSON payload received. Expected an object.")
        contents = body.get("contents")
        if not contents:
            raise ApiError(400, "* GenerateContentRequest.contents: contents is not specified\n")
        if not isinstance(contents, list):
            raise ApiError(400, "Invalid JSON payload received. Unknown name \"contents\": Proto field is repeating, "
                                "cannot start object.")
        check_gemini(body)
        tools = body.get("tools")
        if tools is not None:
            for t, tool in enumerate(tools if isinstance(tools, list) else [tools]):
                decls = _get(tool, "functionDeclarations", "function_declarations") if isinstance(tool, dict) else None
                for d, decl in enumerate(decls or []):
                    if not isinstance(decl, dict) or not decl.get("name"):
                        raise ApiError(400, f"* GenerateContentRequest.tools[{t}].function_declarations[{d}].name: "
                                            "Name cannot be empty.\n")
        # shapes, roles and signatures' encoding
        kinds: list[str] = []  # per content: "calls", "responses", "text"
        for i, c in enumerate(contents):
            if not isinstance(c, dict):
                raise ApiError(400, f"Invalid JSON payload received. Expected an object at 'contents[{i}]'.")
            if "role" in c and c["role"] not in ("user", "model"):
                raise ApiError(400, "Please use a valid role: user, model.")
            parts = c.get("parts")
            if not parts or not isinstance(parts, list):
                raise ApiError(400, f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be "
                                    "empty.\n")
            has_fc = has_fr = False
            for k, p in enumerate(parts):
                if not isinstance(p, dict):
                    raise ApiError(400, f"Invalid JSON payload received. Expected an object at "
                                        f"'contents[{i}].parts[{k}]'.")
                sig = _get(p, "thoughtSignature", "thought_signature")
                if sig is not None and not _b64_ok(sig):
                    raise ApiError(400, f"Invalid value at 'contents[{i}].parts[{k}].thought_signature' (TYPE_BYTES), "
                                        f"Base64 decoding failed for \"{sig}\"")
                fc = _get(p, "functionCall", "function_call")
                fr = _get(p, "functionResponse", "function_response")
                if fc is not None:
                    has_fc = True
                    if not isinstance(fc, dict) or not fc.get("name"):
                        raise ApiError(400, f"* GenerateContentRequest.contents[{i}].parts[{k}].function_call.name: "
                                            "Name cannot be empty.\n")
                    if "args" in fc and not isinstance(fc["args"], dict):
                        raise ApiError(400, f"Invalid value at 'contents[{i}].parts[{k}].function_call.args' "
                                            "(type.googleapis.com/google.protobuf.Struct), "
                                            f"{dumps(fc['args']).decode()}")
                if fr is not None:
                    has_fr = True
                    if not isinstance(fr, dict) or not fr.get("name"):
                        raise ApiError(400, f"* GenerateContentRequest.contents[{i}].parts[{k}].function_response."
                                            "name: Name cannot be empty.\n")
                    resp = fr.get("response")
                    if isinstance(resp, list):
                        raise ApiError(400, "Invalid JSON payload received. Unknown name \"response\" at "
                                            f"'contents[{i}].parts[{k}].function_response': Proto field is not "
                                            "repeating, cannot start list.")
                    if resp is not None and not isinstance(resp, dict):
                        raise ApiError(400, f"Invalid value at 'contents[{i}].parts[{k}].function_response.response' "
                                            f"(type.googleapis.com/google.protobuf.Struct), {dumps(resp).decode()}")
                    for j, media in enumerate(fr.get("parts") or ()):
                        blob = _get(media, "inlineData", "inline_data") if isinstance(media, dict) else None
                        at = f"contents[{i}].parts[{k}].function_response.parts[{j}]"
                        if not isinstance(blob, dict) or not _get(blob, "mimeType", "mime_type"):
                            raise ApiError(400, f"* GenerateContentRequest.{at}.inline_data.mime_type: a function "
                                                "response part needs inline data with a MIME type\n")
                        if not base64_ok(blob.get("data")):
                            raise ApiError(400, f"Invalid value at '{at}.inline_data.data' (TYPE_BYTES), Base64 "
                                                "decoding failed")
            kinds.append("calls" if has_fc else "responses" if has_fr else "text")
        # turn structure: every function call turn is answered by the next content, one response per call
        for i, c in enumerate(contents):
            if kinds[i] == "responses" and (i == 0 or kinds[i - 1] != "calls"):
                raise ApiError(400, "Please ensure that function response turn comes immediately after a function "
                                    "call turn.")
            if kinds[i] != "calls":
                continue
            calls = [_get(p, "functionCall", "function_call") for p in c["parts"]
                     if _get(p, "functionCall", "function_call") is not None]
            nxt = contents[i + 1] if i + 1 < len(contents) else None
            responses = [] if nxt is None else [
                (k, _get(p, "functionResponse", "function_response")) for k, p in enumerate(nxt["parts"])
                if _get(p, "functionResponse", "function_response") is not None]
            if len(responses) != len(calls):
                raise ApiError(400, "Please ensure that the number of function response parts is equal to the number "
                                    "of function call parts of the function call turn.")
            ids = [fc.get("id") for fc in calls if fc.get("id")]
            if ids:
                remaining = list(ids)
                for k, fr in responses:
                    rid = fr.get("id")
                    if rid not in remaining:
                        raise ApiError(400, "functionResponse.id does not match functionCall.id: "
                                            f"contents[{i + 1}].parts[{k}].function_response.id is "
                                            f"{rid!r}, expected one of {remaining}.")
                    remaining.remove(rid)
        # thought signatures in the current turn (after the latest user text)
        cur = -1
        for i, c in enumerate(contents):
            if c.get("role", "user") == "user" and kinds[i] == "text":
                cur = i
        enforce = requires_signatures(req.model)
        for i in range(cur + 1, len(contents)):
            c = contents[i]
            for k, p in enumerate(c["parts"]):
                sig = _get(p, "thoughtSignature", "thought_signature")
                fc = _get(p, "functionCall", "function_call")
                if sig is not None and c.get("role") == "model" and sig not in SKIP_SIGNATURES:
                    bound = fc.get("name", "") if isinstance(fc, dict) else ""
                    if req.sim.signer.verify(sig, bound, prefix=SIG_PREFIX) is not True:
                        raise ApiError(400, "Corrupted thought signature.")
            if kinds[i] == "calls" and enforce:
                first = next(p for p in c["parts"] if _get(p, "functionCall", "function_call") is not None)
                if _get(first, "thoughtSignature", "thought_signature") is None:
                    name = _get(first, "functionCall", "function_call")["name"]
                    raise ApiError(400, "Function call is missing a thought_signature in functionCall parts. This is "
                                        "required for tools to work correctly, and missing thought_signature may lead "
                                        "to degraded model performance. Additional data, function call "
                                        f"`default_api:{name}` , position {i + 1}. Please refer to "
                                        "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")
        conv = Conversation()
        for i, c in enumerate(contents):
            if kinds[i] == "calls":
                conv.add("calls", [Call(fc.get("id") or None, fc["name"], fc.get("args", {})) for fc in
                                   (_get(p, "functionCall", "function_call") for p in c["parts"]) if fc is not None])
            elif kinds[i] == "responses":
                results = []
                for p in c["parts"]:
                    fr = _get(p, "functionResponse", "function_response")
                    if fr is None:
                        continue
                    resp = fr.get("response") or {}
                    is_err: bool | None = None
                    value: Any = resp
                    if resp.get("error"):
                        is_err, value = True, resp["error"]
                    elif "output" in resp:
                        value = resp["output"]
                    elif "result" in resp:
                        value = resp["result"]
                    results.append(Result(fr.get("id") or None, fr["name"], value, is_err))
                conv.add("results", results)
            else:
                text = "".join(p.get("text", "") for p in c["parts"] if isinstance(p.get("text"), str)
                               and not p.get("thought"))
                conv.add("user" if c.get("role", "user") == "user" else "text", text)
        return conv

    # ---- the response -----------------------------------------------------------------------------------------
    def _parts(self, reply: Reply, req: Request) -> list[dict[str, Any]]:
        if "parts" in req.state:
            return req.state["parts"]
        rand = req.rand
        parts: list[dict[str, Any]] = []
        for k, (name, args) in enumerate(reply.calls):
            fc: dict[str, Any] = {"name": name, "args": args}
            if req.sim.gemini_ids:
                fc["id"] = rand.lower(8)
            part: dict[str, Any] = {"functionCall": fc}
            if k == 0:
                part["thoughtSignature"] = req.sim.signer.sign(name, rand.nonce(), prefix=SIG_PREFIX)
            parts.append(part)
        req.state["parts"] = parts
        req.state["response_id"] = rand.token(22)
        return parts

    def _chunk(self, req: Request, reply: Reply, parts: list[Any], finish: str | None) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish:
            cand["finishReason"] = finish
        cand["index"] = 0
        prompt = max(1, len(dumps(req.body)) // 4)
        out = max(1, len(dumps([reply.text, reply.calls])) // 4)
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out + 24,
                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}], "thoughtsTokenCount": 24}
        return {"candidates": [cand], "usageMetadata": usage, "modelVersion": req.model,
                "responseId": req.state["response_id"]}

    def _chunks(self, reply: Reply, req: Request, max_tokens: bool) -> list[tuple[dict[str, Any], bool]]:
        """(chunk, carries content) in order."""
        parts = self._parts(reply, req)
        out: list[tuple[dict[str, Any], bool]] = []
        if parts:
            keep = parts[:-1] if max_tokens else parts
            for k, part in enumerate(keep):
                last = k == len(keep) - 1 and not max_tokens
                out.append((self._chunk(req, reply, [part], "STOP" if last else None), True))
            if max_tokens:
                out.append((self._chunk(req, reply, [{"text": ""}], "MAX_TOKENS"), False))
            return out
        text = reply.text or ""
        frags = text_fragments(text, req.rand)
        if max_tokens:
            frags = frags[:max(1, len(frags) // 2)]
        for k, frag in enumerate(frags):
            part: dict[str, Any] = {"text": frag}
            last = k == len(frags) - 1
            if last and not max_tokens:
                part["thoughtSignature"] = req.sim.signer.sign("", req.rand.nonce(), prefix=SIG_PREFIX)
            out.append((self._chunk(req, reply, [part], ("MAX_TOKENS" if max_tokens else "STOP") if last else None),
                        True))
        return out

    def _frame(self, req: Request, obj: Any, first: bool) -> bytes:
        if self._array(req):
            return (b"[" if first else b",") + dumps(obj, indent=2) + b"\n"
        return b"data: " + dumps(obj) + b"\r\n\r\n"

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        evs = [Ev(self._frame(req, chunk, k == 0), content)
               for k, (chunk, content) in enumerate(self._chunks(reply, req, max_tokens))]
        if self._array(req):
            evs.append(Ev(b"]"))
        return evs

    def _ending_chunk(self, req: Request, reply: Reply, reason: str) -> dict[str, Any]:
        """The last chunk of a candidate stopped with ``reason``: no content, the reason's own details."""
        chunk = self._chunk(req, reply, [], reason)
        cand = chunk["candidates"][0]
        del cand["content"]
        if reason == "MALFORMED_FUNCTION_CALL":
            names = [name for name, _ in reply.calls] or ["lookup_demo_value"]
            cand["finishMessage"] = f"Malformed function call: print(default_api.{names[0]}(key=height"
        elif reason in _FILTERS:
            cand["safetyRatings"] = [
                {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
                {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
                {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"}]
        return chunk

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        self._parts(Reply(text=""), req)  # allocates the response id
        text = partial_text(reply) if partial else ""
        chunks = [self._chunk(req, reply, [{"text": frag}], None)
                  for frag in (text_fragments(text, req.rand) if text else [])]
        evs = [Ev(self._frame(req, c, k == 0), True) for k, c in enumerate(chunks)]
        evs.append(Ev(self._frame(req, self._ending_chunk(req, reply, reason), not chunks)))
        if self._array(req):
            evs.append(Ev(b"]"))
        return evs

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        self._parts(Reply(text=""), req)
        chunk = self._ending_chunk(req, reply, reason)
        text = partial_text(reply) if partial else ""
        if text:
            chunk["candidates"][0]["content"] = {"parts": [{"text": text}], "role": "model"}
        return chunk

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        code = _KINDS[kind]
        out = [self._frame(req, google_error(code, _MESSAGES[code]), seq == 0)]
        if self._array(req):
            out.append(b"]")
        return out

    def in_stream_error_status(self, kind: str, req: Request) -> tuple[int, Any]:
        code = _KINDS[kind]
        return code, self.status_body(Fault.status(code), req)

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        parts = [dict(p) for p in self._parts(reply, req)]
        finish = "STOP"
        if max_tokens:
            finish = "MAX_TOKENS"
            parts = parts[:-1] or [{"text": ""}]
            if not reply.calls:
                text = reply.text or ""
                parts = [{"text": text[:max(1, len(text) // 2)]}]
        elif not parts:
            parts = [{"text": reply.text or "",
                      "thoughtSignature": req.sim.signer.sign("", req.rand.nonce(), prefix=SIG_PREFIX)}]
        return self._chunk(req, reply, parts, finish)

    def content_type(self, req: Request) -> str:
        return "application/json; charset=UTF-8" if self._array(req) else "text/event-stream"

    def whole_indent(self) -> int | None:
        return 2
