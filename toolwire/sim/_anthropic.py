"""Anthropic Messages (``POST /v1/messages``, header ``anthropic-version``).

Tool calls come after a ``thinking`` block whose ``signature`` is signed over its text. Replay rules checked
(C5): every thinking block sent back must keep its text and signature (else "Invalid `signature` in `thinking`
block"); the final assistant message whose tool_use blocks the tool_results answer must start with its
thinking block; the message after an assistant message with tool_use blocks is a user message that starts with
a tool_result for every id."""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

from ._base import Dialect, Ev, Request, base64_ok, partial_text
from ._core import ApiError, Call, Conversation, Fault, Reply, Result, dumps, fragments, text_fragments
from ._options import check_anthropic
from ._model import parse_content

__all__ = ["Anthropic"]

_PREFIX = b"\x12\xa4\x01"  # real signatures start "EqQB…"
_STATUS = {
    400: ("invalid_request_error", "Bad request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
                           "Billing to upgrade or purchase credits."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found"),
    408: ("timeout_error", "Request timed out"),
    409: ("invalid_request_error", "Conflict"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per "
                              "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."),
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
_KINDS = {"overloaded": ("overloaded_error", "Overloaded"),
          "rate_limit": ("rate_limit_error", "Rate limited"),
          "server": ("api_error", "Internal server error")}
_THINKING_REQUIRED = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` "
    "is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
    "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid "
    "this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def _error(req: Request, type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": _request_id(req)}


def _request_id(req: Request) -> str:
    rid = req.state.get("request_id")
    if rid is None:
        rid = req.state["request_id"] = "req_011C" + req.rand.token(20)
    return rid


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


_RESULT_BLOCKS = ("text", "image", "search_result", "document", "tool_reference")
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


#: the first bytes of each image type the Messages API takes
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
               (b"GIF89a", "image/gif"))


def _image_type(head: bytes) -> str | None:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _SIGNATURES if head.startswith(magic)), None)


def _check_media(kind: str, media_type: str, data: str, at: str) -> None:
    """The API reads what the media are: an image whose bytes are of another type than ``media_type`` says, or of
    none it reads, and a document that is no PDF, are refused (with the API's own messages)."""
    head = base64.b64decode(data[:24])
    if kind == "document":
        if not head.startswith(b"%PDF-"):
            raise ApiError(400, f"{at}.document.source.base64.data: The PDF specified was not valid.")
        return
    actual = _image_type(head)
    if actual is None:
        raise ApiError(400, f"{at}.image.source.base64.data: Could not process image")
    if actual != media_type:
        raise ApiError(400, f"{at}.image.source.base64: The image was specified using the {media_type} media type, "
                            f"but the image appears to be a {actual} image")


def _check_result_content(content: Any, where: str) -> None:
    """A tool_result's content as the Messages API checks it: text, or a list of blocks of the types it takes;
    text blocks not empty, base64 image and PDF sources of the listed types with data that decodes and is what its
    type says."""
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.tool_result.content: Input should be a valid string or a valid list")
    for j, block in enumerate(content):
        at = f"{where}.tool_result.content.{j}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _RESULT_BLOCKS:
            raise ApiError(400, f"{at}: Input tag '{kind}' found using 'type' does not match any of the expected "
                                f"tags: {', '.join(repr(t) for t in _RESULT_BLOCKS)}")
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
            raise ApiError(400, f"{at}.text: text content blocks must be non-empty")
        source = block.get("source") if kind in ("image", "document") else None
        if isinstance(source, dict) and source.get("type") == "base64":
            allowed = _IMAGE_TYPES if kind == "image" else ("application/pdf",)
            if source.get("media_type") not in allowed:
                raise ApiError(400, f"{at}.{kind}.source.base64.media_type: Input should be "
                                    f"{' or '.join(repr(t) for t in allowed)}")
            if not base64_ok(source.get("data")):
                raise ApiError(400, f"{at}.{kind}.source.base64.data: invalid base64 data")
            _check_media(kind, source["media_type"], source["data"], at)


class Anthropic(Dialect):
    name = "anthropic"
    demo_model = "claude-sonnet-4-5"
    overloaded_status = 529

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        return {} if method == "POST" and path.rstrip("/") == "/v1/messages" else None

    def authorized(self, req: Request) -> bool:
        auth = req.header("authorization")
        return bool(req.header("x-api-key")) or (auth[:7].lower() == "bearer " and bool(auth[7:].strip()))

    def auth_error(self, req: Request) -> tuple[int, Any]:
        return 401, _error(req, "authentication_error", "x-api-key header is required")

    def preflight(self, req: Request) -> None:
        if not req.header("anthropic-version"):
            raise ApiError(400, "anthropic-version: header is required")

    def error_body(self, err: ApiError, req: Request) -> Any:
        return _error(req, err.kind or _STATUS.get(err.status, ("invalid_request_error",))[0], err.message)

    def status_body(self, fault: Fault, req: Request) -> Any:
        type_, msg = _STATUS.get(fault.code or 500, ("api_error", "Internal server error"))
        return _error(req, type_, msg)

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        return ApiError(400, f"There was an error parsing the body: {exc}")

    def response_headers(self, req: Request) -> dict[str, str]:
        return {"request-id": _request_id(req)}

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        sim = req.sim
        if not isinstance(body, dict):
            raise ApiError(400, "Input should be a valid dictionary")
        for f in ("model", "max_tokens", "messages"):
            if f not in body:
                raise ApiError(400, f"{f}: Field required")
        if not isinstance(body["model"], str):
            raise ApiError(400, "model: Input should be a valid string")
        if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool):
            raise ApiError(400, "max_tokens: Input should be a valid integer")
        req.model = body["model"]
        req.stream = body.get("stream") is True
        tools = body.get("tools")
        if tools is not None:
            if not isinstance(tools, list):
                raise ApiError(400, "tools: Input should be a valid list")
            for k, tool in enumerate(tools):
                if not isinstance(tool, dict):
                    raise ApiError(400, f"tools.{k}: Input should be a valid dictionary")
                if tool.get("type") not in (None, "custom"):
                    continue  # server tools (web_search_…, bash_…) have their own shapes
                for f in ("name", "input_schema"):
                    if f not in tool:
                        raise ApiError(400, f"tools.{k}.custom.{f}: Field required")
        messages = body["messages"]
        if not isinstance(messages, list):
            raise ApiError(400, "messages: Input should be a valid list")
        if not messages:
            raise ApiError(400, "messages: at least one message is required")
        check_anthropic(body)
        choice = body.get("tool_choice")
        conv = Conversation(parallel=not (isinstance(choice, dict) and choice.get("disable_parallel_tool_use")))
        prev_tool_ids: list[str] = []
        conv_names: dict[str, str] = {}
        last = len(messages) - 1
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise ApiError(400, f"messages.{i}: Input should be a valid dictionary")
            role = m.get("role")
            if role not in ("user", "assistant"):
                raise ApiError(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if "content" not in m:
                raise ApiError(400, f"messages.{i}.content: Field required")
            blocks = _blocks(m["content"])
            if prev_tool_ids:
                # the previous assistant message used tools: this one must answer them first
                lead: list[str] = []
                if role == "user":
                    for b in blocks:
                        if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                            break
                        lead.append(b.get("tool_use_id"))
                missing = [t for t in prev_tool_ids if t not in lead]
                if missing:
                    raise ApiError(400, f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                                        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                                        "corresponding `tool_result` block in the next message.")
            if role == "user":
                results: list[Result] = []
                seen: set[str] = set()
                texts: list[str] = []
                for k, b in enumerate(blocks):
                    if not isinstance(b, dict) or "type" not in b:
                        raise ApiError(400, f"messages.{i}.content.{k}.type: Field required")
                    if b["type"] == "tool_result":
                        tid = b.get("tool_use_id")
                        if not isinstance(tid, str):
                            raise ApiError(400, f"messages.{i}.content.{k}.tool_result.tool_use_id: Field required")
                        if tid not in prev_tool_ids:
                            raise ApiError(400, f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                                                f"`tool_result` blocks: {tid}. Each `tool_result` block must have a "
                                                "corresponding `tool_use` block in the previous message.")
                        if tid in seen:
                            raise ApiError(400, f"messages.{i}.content.{k}: `tool_use_id` {tid} appears in more than "
                                                "one `tool_result` block; each `tool_use` block must have exactly "
                                                "one `tool_result` block.")
                        seen.add(tid)
                        _check_result_content(b.get("content"), f"messages.{i}.content.{k}")
                        is_err = b.get("is_error")
                        results.append(Result(tid, conv_names.get(tid), parse_content(_result_text(b.get("content"))),
                                              bool(is_err) if is_err is not None else None))
                    elif b["type"] == "text":
                        texts.append(b.get("text", ""))
                if results:
                    conv.add("results", results)
                elif texts:
                    conv.add("user", "".join(texts))
                prev_tool_ids = []
                continue
            # assistant
            tool_ids: list[str] = []
            calls: list[Call] = []
            for k, b in enumerate(blocks):
                if not isinstance(b, dict) or "type" not in b:
                    raise ApiError(400, f"messages.{i}.content.{k}.type: Field required")
                t = b["type"]
                if t == "thinking":
                    if sim.signer.verify(b.get("signature"), str(b.get("thinking", "")), prefix=_PREFIX) is not True:
                        raise ApiError(400, f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block")
                elif t == "tool_use":
                    for f in ("id", "name", "input"):
                        if f not in b:
                            raise ApiError(400, f"messages.{i}.content.{k}.tool_use.{f}: Field required")
                    if not isinstance(b["input"], dict):
                        raise ApiError(400, f"messages.{i}.content.{k}.tool_use.input: Input should be a valid "
                                            "dictionary")
                    tool_ids.append(b["id"])
                    calls.append(Call(b["id"], b["name"], b["input"]))
                    conv_names[b["id"]] = b["name"]
                elif t == "text" and b.get("text"):
                    conv.add("text", b["text"])
            if tool_ids:
                if i == last:
                    raise ApiError(400, f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                                        f"immediately after: {', '.join(tool_ids)}. Each `tool_use` block must have "
                                        "a corresponding `tool_result` block in the next message.")
                first = blocks[0].get("type") if blocks and isinstance(blocks[0], dict) else None
                if (i == last - 1 and first not in ("thinking", "redacted_thinking")
                        and any(sim._registry_get("thinking_for", t) for t in tool_ids)):
                    raise ApiError(400, _THINKING_REQUIRED.format(i=i, found=first))
                conv.add("calls", calls)
            prev_tool_ids = tool_ids
        return conv

    # ---- the response -----------------------------------------------------------------------------------------
    def _content(self, reply: Reply, req: Request) -> list[dict[str, Any]]:
        if "content" in req.state:
            return req.state["content"]
        rand = req.rand
        content: list[dict[str, Any]] = []
        if reply.calls:
            names = ", ".join(name for name, _ in reply.calls)
            thinking = f"The user's question needs data from my tools, so I will call {names} before answering."
            content.append({"type": "thinking", "thinking": thinking,
                            "signature": req.sim.signer.sign(thinking, rand.nonce(), prefix=_PREFIX)})
            for name, args in reply.calls:
                tid = "toolu_01" + rand.token(22)
                req.sim._registry_put("thinking_for", tid, True)
                content.append({"type": "tool_use", "id": tid, "name": name, "input": args})
        else:
            content.append({"type": "text", "text": reply.text or ""})
        req.state["content"] = content
        req.state["msg_id"] = "msg_01" + rand.token(22)
        return content

    def _usage(self, req: Request, reply: Reply, out: int | None = None) -> dict[str, Any]:
        return {"input_tokens": max(1, len(dumps(req.body)) // 4), "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": out if out is not None else max(1, len(dumps([reply.text, reply.calls])) // 4),
                "service_tier": "standard"}

    def _started(self, req: Request, reply: Reply, evs: list[Ev]) -> Callable[..., None]:
        """The event writer appending to ``evs``, after it wrote the ``message_start`` every stream opens with."""
        def ev(type_: str, content_: bool = False, **fields: Any) -> None:
            evs.append(Ev(b"event: " + type_.encode() + b"\ndata: " + dumps({"type": type_, **fields}) + b"\n\n",
                          content_))

        ev("message_start", message={"id": req.state["msg_id"], "type": "message", "role": "assistant",
                                     "model": req.model, "content": [], "stop_reason": None, "stop_sequence": None,
                                     "usage": self._usage(req, reply, 1)})
        return ev

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        rand = req.rand
        content = self._content(reply, req)
        evs: list[Ev] = []
        ev = self._started(req, reply, evs)
        stop = "tool_use" if reply.calls else "end_turn"
        tool_blocks = [b for b in content if b["type"] == "tool_use"]
        for idx, block in enumerate(content):
            t = block["type"]
            if t == "thinking":
                ev("content_block_start", index=idx, content_block={"type": "thinking", "thinking": "",
                                                                    "signature": ""})
                for frag in text_fragments(block["thinking"], rand):
                    ev("content_block_delta", index=idx, delta={"type": "thinking_delta", "thinking": frag})
                ev("content_block_delta", index=idx, delta={"type": "signature_delta",
                                                            "signature": block["signature"]})
                ev("content_block_stop", index=idx)
            elif t == "tool_use":
                ev("content_block_start", True, index=idx,
                   content_block={"type": "tool_use", "id": block["id"], "name": block["name"], "input": {},
                                  "caller": {"type": "direct"}})
                frags = fragments(json.dumps(block["input"], ensure_ascii=False), rand)
                if max_tokens and block is tool_blocks[-1]:
                    frags, stop = frags[:max(1, len(frags) // 2)], "max_tokens"
                ev("content_block_delta", True, index=idx, delta={"type": "input_json_delta", "partial_json": ""})
                for frag in frags:
                    ev("content_block_delta", True, index=idx, delta={"type": "input_json_delta",
                                                                      "partial_json": frag})
                ev("content_block_stop", index=idx)
            else:
                ev("content_block_start", index=idx, content_block={"type": "text", "text": ""})
                frags = text_fragments(block["text"], rand)
                if max_tokens:
                    frags, stop = frags[:max(1, len(frags) // 2)], "max_tokens"
                for frag in frags:
                    ev("content_block_delta", True, index=idx, delta={"type": "text_delta", "text": frag})
                ev("content_block_stop", index=idx)
            if idx == 0:
                ev("ping")
            if stop == "max_tokens":
                break
        ev("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
           usage={"output_tokens": self._usage(req, reply)["output_tokens"]})
        ev("message_stop")
        return evs

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        self._content(Reply(text=""), req)  # allocates the message id
        evs: list[Ev] = []
        ev = self._started(req, reply, evs)
        text = partial_text(reply) if partial else ""
        if text:
            ev("content_block_start", index=0, content_block={"type": "text", "text": ""})
            for frag in text_fragments(text, req.rand):
                ev("content_block_delta", True, index=0, delta={"type": "text_delta", "text": frag})
            ev("content_block_stop", index=0)
        ev("message_delta", delta={"stop_reason": reason, "stop_sequence": None},
           usage={"output_tokens": self._usage(req, reply)["output_tokens"]})
        ev("message_stop")
        return evs

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        self._content(Reply(text=""), req)
        text = partial_text(reply) if partial else ""
        return {"id": req.state["msg_id"], "type": "message", "role": "assistant", "model": req.model,
                "content": [{"type": "text", "text": text}] if text else [], "stop_reason": reason,
                "stop_sequence": None, "usage": self._usage(req, reply)}

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        type_, msg = _KINDS[kind]
        return [b"event: error\ndata: " + dumps(_error(req, type_, msg)) + b"\n\n"]

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        content = [dict(b) for b in self._content(reply, req)]
        stop = "tool_use" if reply.calls else "end_turn"
        if max_tokens:
            stop = "max_tokens"
            if reply.calls:
                content[-1]["input"] = {}
            else:
                text = content[-1]["text"]
                content[-1]["text"] = text[:max(1, len(text) // 2)]
        return {"id": req.state["msg_id"], "type": "message", "role": "assistant", "model": req.model,
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": self._usage(req, reply)}
