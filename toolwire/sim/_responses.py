"""OpenAI Responses (``POST /v1/responses``).

Function calls come after a ``reasoning`` item whose ``encrypted_content`` is signed. A stateless follow-up
(``input`` replays the items) must keep each replayed ``function_call`` (by item id ``fc_…``) after its
reasoning item with that content unchanged; with ``previous_response_id`` the stored items are used instead
(responses are stored unless ``store`` is false)."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ._base import Ev, Request, base64_ok, partial_text
from ._chat import OpenAIDialect, check_openai_tools
from ._core import ApiError, Call, Conversation, Reply, Result, dumps, fragments, text_fragments
from ._options import check_responses
from ._model import parse_content

__all__ = ["OpenAIResponses"]

_PREFIX = b"\x80\x00\x00\x00\x00"  # looks like the Fernet tokens the real API returns ("gAAAAA…")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


_DATA_URL = re.compile(r"data:([a-z0-9.+-]+/[a-z0-9.+-]+);base64,(.*)", re.S)


def _check_output_part(part: Any, where: str) -> None:
    """An item of a list ``output``: input_text, input_image (an http(s) URL or a base64 data URL of an image),
    input_file (base64 data URL)."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in ("input_text", "input_image", "input_file"):
        raise ApiError(400, f"Invalid value: '{kind}'. Supported values are: 'input_text', 'input_image', and "
                            "'input_file'.", param=f"{where}.type", code="invalid_value")
    url = part.get("image_url") if kind == "input_image" else part.get("file_data") if kind == "input_file" else None
    if url is None or (kind == "input_image" and url.startswith(("https://", "http://"))):
        return
    found = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if found is None or not base64_ok(found.group(2)) \
            or (kind == "input_image" and not found.group(1).startswith("image/")):
        field = "image_url" if kind == "input_image" else "file_data"
        raise ApiError(400, f"Invalid '{where}.{field}'. Expected a base64-encoded data URL with "
                            f"{'an image' if kind == 'input_image' else 'a file'} MIME type "
                            f"(e.g. 'data:image/png;base64,...'), but got a value that is not.",
                       param=f"{where}.{field}", code="invalid_value")


class OpenAIResponses(OpenAIDialect):
    name = "openai-responses"
    demo_model = "gpt-5-mini"
    path = "/v1/responses"

    def response_headers(self, req: Request) -> dict[str, str]:
        return {"x-request-id": "req_" + req.rand.hex(32)}

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        sim = req.sim
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid type for request body: expected an object.", code="invalid_type")
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise ApiError(400, "Missing required parameter: 'model'.", param="model",
                           code="missing_required_parameter")
        req.model = body["model"]
        req.stream = body.get("stream") is True
        opts = body.get("stream_options") or {}
        req.state["obfuscation"] = not (isinstance(opts, dict) and opts.get("include_obfuscation") is False)
        check_openai_tools(body.get("tools"), nested=False)
        check_responses(body)
        prev_items: list[dict[str, Any]] = []
        prev_id = body.get("previous_response_id")
        if prev_id is not None:
            stored = sim._store_get("responses", prev_id)
            if stored is None:
                raise ApiError(400, f"Previous response with id '{prev_id}' not found.", param="previous_response_id",
                               code="previous_response_not_found")
            prev_items = stored
        raw = body.get("input")
        if raw is None and not prev_items:
            raise ApiError(400, "Missing required parameter: 'input'.", param="input",
                           code="missing_required_parameter")
        if isinstance(raw, str):
            new_items: list[Any] = [{"type": "message", "role": "user", "content": raw}]
        elif isinstance(raw, list):
            new_items = raw
        elif raw is None:
            new_items = []
        else:
            raise ApiError(400, "Invalid type for 'input': expected one of a string or array of input items, but "
                                f"got {type(raw).__name__} instead.", param="input", code="invalid_type")
        for k, item in enumerate(new_items):
            if not isinstance(item, dict):
                raise ApiError(400, f"Invalid type for 'input[{k}]': expected an object.", param=f"input[{k}]",
                               code="invalid_type")
            t = item.get("type", "message" if "role" in item else None)
            if t == "function_call":
                for f in ("call_id", "name", "arguments"):
                    if not isinstance(item.get(f), str):
                        raise ApiError(400, f"Missing required parameter: 'input[{k}].{f}'.",
                                       param=f"input[{k}].{f}", code="missing_required_parameter")
            elif t == "function_call_output":
                if not isinstance(item.get("call_id"), str):
                    raise ApiError(400, f"Missing required parameter: 'input[{k}].call_id'.",
                                   param=f"input[{k}].call_id", code="missing_required_parameter")
                if not isinstance(item.get("output"), (str, list)):
                    raise ApiError(400, f"Missing required parameter: 'input[{k}].output'.",
                                   param=f"input[{k}].output", code="missing_required_parameter")
                for j, part in enumerate(item["output"] if isinstance(item["output"], list) else ()):
                    _check_output_part(part, f"input[{k}].output[{j}]")
            elif t == "reasoning":
                self._check_reasoning(req, new_items, k, item)
            elif t is None:
                raise ApiError(400, f"Missing required parameter: 'input[{k}].type'.", param=f"input[{k}].type",
                               code="missing_required_parameter")
        # stateless replay: a function_call the model made after reasoning needs that reasoning item before it
        seen_reasoning = {it.get("id") for it in prev_items if it.get("type") == "reasoning"}
        for item in new_items:
            if item.get("type") == "reasoning":
                seen_reasoning.add(item.get("id"))
            elif item.get("type") == "function_call" and isinstance(item.get("id"), str):
                rs = sim._registry_get("reasoning_for", item["id"])
                if rs is not None and rs not in seen_reasoning:
                    raise ApiError(400, f"Item '{item['id']}' of type 'function_call' was provided without its "
                                        f"required 'reasoning' item: '{rs}'.", param="input")
        items = prev_items + new_items
        # every output answers an earlier call, every call has an output
        calls_seen: dict[str, int] = {}
        answered: set[str] = set()
        for item in items:
            t = item.get("type")
            if t == "function_call":
                calls_seen[item["call_id"]] = 1
            elif t == "function_call_output":
                if item["call_id"] not in calls_seen:
                    raise ApiError(400, "No tool call found for function call output with call_id "
                                        f"{item['call_id']}.", param="input")
                answered.add(item["call_id"])
        for cid in calls_seen:
            if cid not in answered:
                raise ApiError(400, f"No tool output found for function call {cid}.", param="input")
        req.state["items"] = items
        conv = Conversation(parallel=body.get("parallel_tool_calls") is not False)
        names: dict[str, str] = {}
        for item in items:
            t = item.get("type", "message" if "role" in item else None)
            if t == "message":
                if item.get("role") == "user":
                    conv.add("user", _text(item.get("content")))
                elif item.get("role") == "assistant":
                    conv.add("text", _text(item.get("content")))
            elif t == "function_call":
                try:
                    args = json.loads(item["arguments"])
                except ValueError:
                    args = None
                names[item["call_id"]] = item["name"]
                conv.add("calls", [Call(item["call_id"], item["name"], args)])
            elif t == "function_call_output":
                out = item["output"]
                conv.add("results", [Result(item["call_id"], names.get(item["call_id"]),
                                            parse_content(_text(out)))])
        return conv

    def _check_reasoning(self, req: Request, items: list[Any], k: int, item: dict[str, Any]) -> None:
        rs = item.get("id")
        if not isinstance(rs, str):
            raise ApiError(400, f"Missing required parameter: 'input[{k}].id'.", param=f"input[{k}].id",
                           code="missing_required_parameter")
        enc = item.get("encrypted_content")
        if enc is None:
            if req.sim._registry_get("stored_reasoning", rs) is None:
                raise ApiError(404, f"Item with id '{rs}' not found. Items are not persisted when `store` is set to "
                                    "false. Try again with `store` set to true, or remove this item from your "
                                    "input.", param="input")
        elif not req.sim.signer.verify(enc, rs, prefix=_PREFIX):
            raise ApiError(400, f"The encrypted content for item {rs} could not be verified. Reason: Encrypted "
                                "content could not be decrypted or parsed.", param="input",
                           code="invalid_encrypted_content")
        nxt = items[k + 1] if k + 1 < len(items) else None
        nt = None if not isinstance(nxt, dict) else nxt.get("type", "message" if "role" in nxt else None)
        if nt not in ("function_call", "message", "custom_tool_call") or (nt == "message" and
                                                                          nxt.get("role") != "assistant"):
            raise ApiError(400, f"Item '{rs}' of type 'reasoning' was provided without its required following "
                                "item.", param="input")

    # ---- the response -----------------------------------------------------------------------------------------
    def _output(self, reply: Reply, req: Request) -> dict[str, Any]:
        """The output items (allocated once per request)."""
        if "out" in req.state:
            return req.state["out"]
        rand = req.rand
        out: dict[str, Any] = {"resp_id": "resp_" + rand.hex(50), "items": []}
        if reply.calls:
            rs = "rs_" + rand.hex(50)
            enc = req.sim.signer.sign(rs, rand.nonce(), prefix=_PREFIX, urlsafe=True)
            out["items"].append({"id": rs, "type": "reasoning", "encrypted_content": enc, "summary": []})
            for name, args in reply.calls:
                fc = "fc_" + rand.hex(50)
                out["items"].append({"id": fc, "type": "function_call", "status": "completed",
                                     "arguments": json.dumps(args, ensure_ascii=False),
                                     "call_id": "call_" + rand.token(24), "name": name})
                req.sim._registry_put("reasoning_for", fc, rs)
        else:
            out["items"].append({"id": "msg_" + rand.hex(50), "type": "message", "status": "completed",
                                 "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                              "text": reply.text or ""}], "role": "assistant"})
        req.state["out"] = out
        return out

    def _response(self, req: Request, status: str, output: list[Any], usage: Any = None,
                  **extra: Any) -> dict[str, Any]:
        body = req.body
        resp = {"id": req.state["out"]["resp_id"], "object": "response", "created_at": req.created,
                "status": status, "background": False, "error": None, "incomplete_details": None,
                "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
                "max_tool_calls": None, "model": req.model, "output": output,
                "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "previous_response_id": body.get("previous_response_id"),
                "reasoning": {"effort": "medium", "summary": None}, "service_tier": "default",
                "store": body.get("store", True), "temperature": 1.0, "text": {"format": {"type": "text"}},
                "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []), "top_p": 1.0,
                "truncation": "disabled", "usage": usage, "user": None, "metadata": {}}
        resp.update(extra)
        return resp

    def _usage(self, req: Request, reply: Reply) -> dict[str, Any]:
        inp = max(1, len(dumps(req.body)) // 4)
        out = max(1, len(dumps([reply.text, reply.calls])) // 4) + (16 if reply.calls else 0)
        return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 16 if reply.calls else 0}, "total_tokens": inp + out}

    def _opened(self, req: Request, evs: list[Ev]) -> Callable[..., None]:
        """The event writer appending to ``evs`` (sequence numbers, obfuscation on deltas), after it wrote the
        two events every stream opens with."""
        rand = req.rand

        def ev(type_: str, content: bool = False, **fields: Any) -> None:
            obj = {"type": type_, "sequence_number": len(evs), **fields}
            if "delta" in fields and req.state["obfuscation"]:
                obj["obfuscation"] = rand.token(rand.rng.randint(2, 14))
            evs.append(Ev(b"event: " + type_.encode() + b"\ndata: " + dumps(obj) + b"\n\n", content))

        ev("response.created", response=self._response(req, "in_progress", []))
        ev("response.in_progress", response=self._response(req, "in_progress", []))
        return ev

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        rand = req.rand
        items = self._output(reply, req)["items"]
        evs: list[Ev] = []
        ev = self._opened(req, evs)
        final: list[Any] = []
        cut = False
        calls = [it for it in items if it["type"] == "function_call"]
        for idx, item in enumerate(items):
            t = item["type"]
            if t == "reasoning":
                ev("response.output_item.added", output_index=idx,
                   item={"id": item["id"], "type": "reasoning", "summary": []})
                ev("response.output_item.done", output_index=idx, item=item)
                final.append(item)
            elif t == "function_call":
                ev("response.output_item.added", output_index=idx,
                   item={**item, "status": "in_progress", "arguments": ""})
                frags = fragments(item["arguments"], rand)
                if max_tokens and item is calls[-1]:
                    frags = frags[:max(1, len(frags) // 2)]
                    cut = True
                for frag in frags:
                    ev("response.function_call_arguments.delta", True, item_id=item["id"], output_index=idx,
                       delta=frag)
                if cut:
                    final.append({**item, "status": "incomplete", "arguments": "".join(frags)})
                    break
                ev("response.function_call_arguments.done", item_id=item["id"], output_index=idx,
                   name=item["name"], arguments=item["arguments"])
                ev("response.output_item.done", output_index=idx, item=item)
                final.append(item)
            else:  # message
                text = item["content"][0]["text"]
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
                ev("response.output_item.added", output_index=idx,
                   item={**item, "status": "in_progress", "content": []})
                ev("response.content_part.added", item_id=item["id"], output_index=idx, content_index=0, part=part)
                frags = text_fragments(text, rand)
                if max_tokens:
                    frags, cut = frags[:max(1, len(frags) // 2)], True
                for frag in frags:
                    ev("response.output_text.delta", True, item_id=item["id"], output_index=idx, content_index=0,
                       delta=frag, logprobs=[])
                if cut:
                    final.append({**item, "status": "incomplete",
                                  "content": [{**part, "text": "".join(frags)}]})
                    break
                ev("response.output_text.done", item_id=item["id"], output_index=idx, content_index=0, text=text,
                   logprobs=[])
                ev("response.content_part.done", item_id=item["id"], output_index=idx, content_index=0,
                   part={**part, "text": text})
                ev("response.output_item.done", output_index=idx, item=item)
                final.append(item)
        usage = self._usage(req, reply)
        if cut:
            ev("response.incomplete", response=self._response(
                req, "incomplete", final, usage, incomplete_details={"reason": "max_output_tokens"}))
        else:
            ev("response.completed", response=self._response(req, "completed", final, usage))
        return evs

    def _partial_message(self, reply: Reply, req: Request) -> tuple[dict[str, Any], str]:
        """The incomplete message item an unclean ending leaves behind, and its text."""
        text = partial_text(reply)
        item = {"id": "msg_" + req.rand.hex(50), "type": "message", "status": "incomplete", "role": "assistant",
                "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]}
        return item, text

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        rand = req.rand
        self._output(Reply(text=""), req)  # allocates the response id
        evs: list[Ev] = []
        ev = self._opened(req, evs)
        final: list[Any] = []
        if partial:
            item, text = self._partial_message(reply, req)
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            ev("response.output_item.added", output_index=0, item={**item, "status": "in_progress", "content": []})
            ev("response.content_part.added", item_id=item["id"], output_index=0, content_index=0, part=part)
            for frag in text_fragments(text, rand) if text else []:
                ev("response.output_text.delta", True, item_id=item["id"], output_index=0, content_index=0,
                   delta=frag, logprobs=[])
            final.append(item)
        ev("response.incomplete", response=self._response(req, "incomplete", final, self._usage(req, reply),
                                                          incomplete_details={"reason": reason}))
        return evs

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        self._output(Reply(text=""), req)
        output = [self._partial_message(reply, req)[0]] if partial else []
        return self._response(req, "incomplete", output, self._usage(req, reply),
                              incomplete_details={"reason": reason})

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        code, msg = {
            "overloaded": ("server_is_overloaded", "Our servers are currently overloaded. Please try again later."),
            "rate_limit": ("rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."),
            "server": ("server_error", "An error occurred while processing your request. You can retry your "
                                       "request."),
        }[kind]
        err = {"type": "error", "code": code, "message": msg, "param": None, "sequence_number": seq}
        failed = {"type": "response.failed", "sequence_number": seq + 1,
                  "response": self._response(req, "failed", [], None, error={"code": code if kind != "overloaded"
                                                                             else "server_error", "message": msg})}
        return [b"event: error\ndata: " + dumps(err) + b"\n\n",
                b"event: response.failed\ndata: " + dumps(failed) + b"\n\n"]

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        items = [dict(it) for it in self._output(reply, req)["items"]]
        usage = self._usage(req, reply)
        if max_tokens:
            last = items[-1]
            if last["type"] == "function_call":
                last.update(status="incomplete", arguments=last["arguments"][:max(1, len(last["arguments"]) // 2)])
            else:
                text = last["content"][0]["text"]
                last.update(status="incomplete",
                            content=[{**last["content"][0], "text": text[:max(1, len(text) // 2)]}])
            return self._response(req, "incomplete", items, usage, incomplete_details={"reason": "max_output_tokens"})
        return self._response(req, "completed", items, usage)

    def content_type(self, req: Request) -> str:
        return "text/event-stream; charset=utf-8"

    def finish(self, reply: Reply, req: Request, *, outcome: str) -> None:
        if outcome != "ok" or req.body.get("store") is False or "out" not in req.state:
            return
        out = req.state["out"]
        req.sim._store_put("responses", out["resp_id"], list(req.state["items"]) + list(out["items"]))
        for it in out["items"]:
            if it["type"] == "reasoning":
                req.sim._registry_put("stored_reasoning", it["id"], True)
