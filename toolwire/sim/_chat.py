"""OpenAI Chat Completions (``POST /v1/chat/completions``)."""

from __future__ import annotations

import json
import re
from typing import Any

from ._base import Dialect, Ev, Request, bearer, partial_text
from ._core import ApiError, Call, Conversation, Fault, Reply, Result, dumps, fragments, text_fragments
from ._options import check_chat
from ._model import parse_content

__all__ = ["OpenAIChat", "openai_error", "openai_status_body", "check_openai_tools"]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_NO_KEY = ("You didn't provide an API key. You need to provide your API key in an Authorization header using "
           "Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if "
           "you're accessing the API from your browser and are prompted for a username. You can obtain an API key "
           "from https://platform.openai.com/account/api-keys.")
_BAD_JSON = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
             "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If "
             "you have trouble figuring out how to fix this, please contact us through our help center at "
             "help.openai.com.)")


def openai_error(message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


_STATUS = {
    400: ("Bad request.", "invalid_request_error", None),
    401: ("Incorrect API key provided: sk-sim****. You can find your API key at "
          "https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to sample from this model", "invalid_request_error", None),
    404: ("The model does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"),
    408: ("Request timed out.", "timeout", None),
    409: ("The request conflicted with another request. Please retry.", "conflict", None),
    429: ("Rate limit reached for requests. Please try again in 1s.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    502: ("Bad gateway.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later", "server_error", None),
    504: ("Gateway timeout.", "server_error", None),
}


def openai_status_body(code: int) -> dict[str, Any]:
    msg, type_, err_code = _STATUS.get(code, (f"The server returned status {code}.", "server_error", None))
    return openai_error(msg, type_, None, err_code)


def check_openai_tools(tools: Any, *, nested: bool) -> None:
    """Chat nests functions under ``function``; Responses declares them flat."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise ApiError(400, f"Invalid type for 'tools': expected an array, but got {type(tools).__name__} "
                            "instead.", param="tools", code="invalid_type")
    if len(tools) > 128:
        raise ApiError(400, f"Invalid 'tools': array too long. Expected an array with maximum length 128, but got "
                            f"an array with length {len(tools)} instead.", param="tools",
                       code="array_above_max_length")
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict) or "type" not in tool:
            raise ApiError(400, f"Missing required parameter: 'tools[{k}].type'.", param=f"tools[{k}].type",
                           code="missing_required_parameter")
        if tool["type"] != "function":
            continue
        if nested:
            fn = tool.get("function")
            if not isinstance(fn, dict):
                raise ApiError(400, f"Missing required parameter: 'tools[{k}].function'.",
                               param=f"tools[{k}].function", code="missing_required_parameter")
            name, where = fn.get("name"), f"tools[{k}].function.name"
        else:
            name, where = tool.get("name"), f"tools[{k}].name"
        if not isinstance(name, str):
            raise ApiError(400, f"Missing required parameter: '{where}'.", param=where,
                           code="missing_required_parameter")
        if not _NAME.match(name):
            raise ApiError(400, f"Invalid '{where}': string does not match pattern. Expected a string that matches "
                                "the pattern '^[a-zA-Z0-9_-]+$'.", param=where, code="invalid_value")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _args(text: Any) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


class OpenAIDialect(Dialect):
    """What OpenAI's endpoints share: bearer auth and OpenAI's error bodies; ``path`` is the endpoint."""

    path = ""

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        return {} if method == "POST" and path.rstrip("/") == self.path else None

    def authorized(self, req: Request) -> bool:
        return bearer(req)

    def auth_error(self, req: Request) -> tuple[int, Any]:
        return 401, openai_error(_NO_KEY)

    def error_body(self, err: ApiError, req: Request) -> Any:
        return openai_error(err.message, err.kind or "invalid_request_error", err.param, err.code)

    def status_body(self, fault: Fault, req: Request) -> Any:
        return openai_status_body(fault.code or 500)

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        return ApiError(400, _BAD_JSON)


class OpenAIChat(OpenAIDialect):
    name = "openai-chat"
    demo_model = "gpt-4.1-mini"
    path = "/v1/chat/completions"

    def response_headers(self, req: Request) -> dict[str, str]:
        return {"x-request-id": "req_" + req.rand.hex(32), "openai-processing-ms": "12"}

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid type for request body: expected an object.", code="invalid_type")
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise ApiError(400, "you must provide a model parameter")
        req.model = body["model"]
        req.stream = body.get("stream") is True
        opts = body.get("stream_options") or {}
        req.state["include_usage"] = bool(isinstance(opts, dict) and opts.get("include_usage"))
        req.state["obfuscation"] = not (isinstance(opts, dict) and opts.get("include_obfuscation") is False)
        check_openai_tools(body.get("tools"), nested=True)
        check_chat(body)
        messages = body.get("messages")
        if messages is None:
            raise ApiError(400, "Missing required parameter: 'messages'.", param="messages",
                           code="missing_required_parameter")
        if not isinstance(messages, list):
            raise ApiError(400, "Invalid type for 'messages': expected an array.", param="messages",
                           code="invalid_type")
        if not messages:
            raise ApiError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
                                "an empty array instead.", param="messages", code="empty_array")
        conv = Conversation(parallel=body.get("parallel_tool_calls") is not False)
        pending: dict[str, Any] | None = None  # the last assistant message with tool_calls

        def unanswered() -> None:
            if pending is None:
                return
            missing = [i for i in pending["ids"] if i not in pending["answered"]]
            if missing:
                raise ApiError(400, "An assistant message with 'tool_calls' must be followed by tool messages "
                                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                                    "response messages: " + ", ".join(missing),
                               param=f"messages.[{pending['index']}].role")

        results: list[Result] = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise ApiError(400, f"Invalid type for 'messages[{i}]': expected an object, but got "
                                    f"{type(m).__name__} instead.", param=f"messages[{i}]", code="invalid_type")
            role = m.get("role")
            if role not in _ROLES:
                raise ApiError(400, f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                                    "'user', 'function', 'tool', and 'developer'.", param=f"messages[{i}].role",
                               code="invalid_value")
            if role != "tool":
                unanswered()
                if pending is not None:
                    conv.add("results", results)
                    results, pending = [], None
            if role == "tool":
                tcid = m.get("tool_call_id")
                if not isinstance(tcid, str):
                    raise ApiError(400, f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                                   param=f"messages[{i}].tool_call_id", code="missing_required_parameter")
                if pending is None or tcid not in pending["ids"]:
                    raise ApiError(400, "Invalid parameter: messages with role 'tool' must be a response to a "
                                        "preceeding message with 'tool_calls'.", param=f"messages.[{i}].role")
                if tcid in pending["answered"]:
                    raise ApiError(400, f"Invalid parameter: duplicate tool message for tool_call_id '{tcid}'. "
                                        "Each 'tool_call_id' must be answered by exactly one message with role "
                                        "'tool'.", param=f"messages.[{i}].tool_call_id")
                content = m.get("content")
                if not isinstance(content, (str, list)):
                    raise ApiError(400, f"Invalid type for 'messages[{i}].content': expected one of a string or "
                                        "array of objects, but got " + ("null" if content is None else
                                                                        type(content).__name__) + " instead.",
                                   param=f"messages[{i}].content", code="invalid_type")
                pending["answered"].add(tcid)
                results.append(Result(tcid, pending["names"].get(tcid), parse_content(_text(content))))
            elif role == "assistant":
                tcs = m.get("tool_calls")
                if m.get("content") is None and not tcs and m.get("function_call") is None:
                    raise ApiError(400, "Invalid value for 'content': expected a string, got null.",
                                   param=f"messages.[{i}].content")
                text = _text(m.get("content"))
                if text:
                    conv.add("text", text)
                if tcs:
                    if not isinstance(tcs, list):
                        raise ApiError(400, f"Invalid type for 'messages[{i}].tool_calls': expected an array.",
                                       param=f"messages[{i}].tool_calls", code="invalid_type")
                    calls = []
                    for k, tc in enumerate(tcs):
                        where = f"messages[{i}].tool_calls[{k}]"
                        if not isinstance(tc, dict) or not isinstance(tc.get("id"), str):
                            raise ApiError(400, f"Missing required parameter: '{where}.id'.", param=f"{where}.id",
                                           code="missing_required_parameter")
                        if tc.get("type") not in ("function", "custom"):
                            raise ApiError(400, f"Missing required parameter: '{where}.type'.",
                                           param=f"{where}.type", code="missing_required_parameter")
                        fn = tc.get(tc["type"])
                        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                            raise ApiError(400, f"Missing required parameter: '{where}.{tc['type']}'.",
                                           param=f"{where}.{tc['type']}", code="missing_required_parameter")
                        field = "arguments" if tc["type"] == "function" else "input"
                        if not isinstance(fn.get(field), str):
                            got = "null" if fn.get(field) is None else type(fn.get(field)).__name__
                            got = {"dict": "an object", "list": "an array"}.get(got, got)
                            raise ApiError(400, f"Invalid type for '{where}.{tc['type']}.{field}': expected a "
                                                f"string, but got {got} instead.",
                                           param=f"{where}.{tc['type']}.{field}", code="invalid_type")
                        calls.append(Call(tc["id"], fn["name"], _args(fn[field])))
                    ids = [c.id for c in calls]
                    pending = {"index": i, "ids": ids, "answered": set(), "names": {c.id: c.name for c in calls}}
                    conv.add("calls", calls)
            elif role == "user":
                conv.add("user", _text(m.get("content")))
        unanswered()
        if pending is not None:
            conv.add("results", results)
        return conv

    # ---- the response -----------------------------------------------------------------------------------------
    def _plan(self, reply: Reply, req: Request) -> list[tuple[str, str, str]]:
        calls = req.state.get("calls")
        if calls is None:
            calls = [("call_" + req.rand.token(24), name, json.dumps(args, ensure_ascii=False))
                     for name, args in reply.calls]
            req.state["calls"] = calls
        return calls

    def _chunker(self, req: Request) -> tuple[dict[str, Any], Any]:
        """The fields every chunk of one stream shares, and a function making one chunk's event."""
        rand = req.rand
        cid = "chatcmpl-" + rand.token(29)
        base = {"id": cid, "object": "chat.completion.chunk", "created": req.created, "model": req.model,
                "service_tier": "default", "system_fingerprint": "fp_sim" + rand.hex(6)}

        def chunk(delta: dict[str, Any], finish: str | None = None, content: bool = False) -> Ev:
            obj = dict(base)
            obj["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            if req.state["include_usage"]:
                obj["usage"] = None
            if req.state["obfuscation"]:
                obj["obfuscation"] = rand.token(rand.rng.randint(2, 14))
            return Ev(b"data: " + dumps(obj) + b"\n\n", content)

        return base, chunk

    def _stream_end(self, req: Request, reply: Reply, base: dict[str, Any]) -> list[Ev]:
        evs = []
        if req.state["include_usage"]:
            usage = dict(base)
            usage["choices"] = []
            usage["usage"] = self._usage(req, reply)
            evs.append(Ev(b"data: " + dumps(usage) + b"\n\n"))
        evs.append(Ev(b"data: [DONE]\n\n"))
        return evs

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        rand = req.rand
        base, chunk = self._chunker(req)
        calls = self._plan(reply, req)
        evs = [chunk({"role": "assistant", "content": None if calls else "", "refusal": None})]
        finish = "tool_calls" if calls else "stop"
        if calls:
            for k, (call_id, name, args) in enumerate(calls):
                frags = fragments(args, rand)
                if max_tokens and k == len(calls) - 1:
                    frags = frags[:max(1, len(frags) // 2)]
                    finish = "length"
                evs.append(chunk({"tool_calls": [{"index": k, "id": call_id, "type": "function",
                                                  "function": {"name": name, "arguments": ""}}]}, content=True))
                for frag in frags:
                    evs.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": frag}}]},
                                     content=True))
        else:
            frags = text_fragments(reply.text or "", rand)
            if max_tokens:
                frags, finish = frags[:max(1, len(frags) // 2)], "length"
            for frag in frags:
                evs.append(chunk({"content": frag}, content=True))
        evs.append(chunk({}, finish))
        return evs + self._stream_end(req, reply, base)

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        base, chunk = self._chunker(req)
        evs = [chunk({"role": "assistant", "content": "", "refusal": None})]
        text = partial_text(reply) if partial else ""
        for frag in text_fragments(text, req.rand) if text else []:
            evs.append(chunk({"content": frag}, content=True))
        evs.append(chunk({}, reason))
        return evs + self._stream_end(req, reply, base)

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        text = partial_text(reply) if partial else None
        message = {"role": "assistant", "content": text or None, "refusal": None, "annotations": []}
        return {"id": "chatcmpl-" + req.rand.token(29), "object": "chat.completion", "created": req.created,
                "model": req.model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                 "finish_reason": reason}],
                "usage": self._usage(req, reply), "service_tier": "default",
                "system_fingerprint": "fp_sim" + req.rand.hex(6)}

    def _usage(self, req: Request, reply: Reply) -> dict[str, Any]:
        prompt = max(1, len(dumps(req.body)) // 4)
        completion = max(1, len(dumps([reply.text, reply.calls])) // 4)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        msg, type_, code = {
            "overloaded": ("The server is currently overloaded with other requests. Sorry about that! You can retry "
                           "your request.", "server_error", "server_is_overloaded"),
            "rate_limit": ("Rate limit reached for requests. Please try again in 1s.", "requests",
                           "rate_limit_exceeded"),
            "server": ("The server had an error while processing your request. Sorry about that!", "server_error",
                       None),
        }[kind]
        return [b"data: " + dumps(openai_error(msg, type_, None, code)) + b"\n\n"]

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        calls = self._plan(reply, req)
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
        finish = "tool_calls" if calls else "stop"
        if calls:
            tcs = []
            for k, (call_id, name, args) in enumerate(calls):
                if max_tokens and k == len(calls) - 1:
                    args, finish = args[:max(1, len(args) // 2)], "length"
                tcs.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})
            message["tool_calls"] = tcs
        else:
            text = reply.text or ""
            if max_tokens:
                text, finish = text[:max(1, len(text) // 2)], "length"
            message["content"] = text
        return {"id": "chatcmpl-" + req.rand.token(29), "object": "chat.completion", "created": req.created,
                "model": req.model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                 "finish_reason": finish}],
                "usage": self._usage(req, reply), "service_tier": "default",
                "system_fingerprint": "fp_sim" + req.rand.hex(6)}

    def content_type(self, req: Request) -> str:
        return "text/event-stream; charset=utf-8" if req.stream else "application/json"
