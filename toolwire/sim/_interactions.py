"""Gemini Interactions (``POST /v1beta/interactions``), the current "steps" schema.

Stateful: every interaction is stored under its id (unless ``store`` is false), so a request with
``previous_interaction_id`` continues it; when that interaction ended with pending function calls
(``requires_action``) the new ``input`` must hold one ``function_result`` per pending call, ``call_id``
matching. A stateless request may instead replay the steps itself (``function_call`` steps before their
``function_result``). Streams: ``event:`` lines, payloads discriminated by ``event_type``, ``data: [DONE]`` last.
HTTP errors are ``{"error": {"code": <status name>, "message": …}}`` (the SDK types ``code`` as a string)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ._base import STATUS_TEXT, Dialect, Ev, Request, base64_ok, partial_text
from ._core import ApiError, Call, Conversation, Fault, Reply, Result, dumps, fragments, text_fragments
from ._options import check_interactions
from ._gemini import _MESSAGES, GOOGLE_NO_KEY, SIG_PREFIX, _duration, google_authorized
from ._model import parse_content

__all__ = ["Interactions"]

_ROUTE = re.compile(r"^/(v1beta|v1alpha|v1)/interactions$")
_CONTENT_TYPES = {"text", "image", "audio", "document", "video"}
_KINDS = {"overloaded": 503, "rate_limit": 429, "server": 500}


def _error(code: int, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": STATUS_TEXT.get(code, "UNKNOWN"), "message": message}
    if details:
        err["details"] = details
    return {"error": err}


def _timestamp(req: Request) -> str:
    """The request's time as the API writes ``created`` and ``updated``: ISO 8601 in UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(req.created))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"
                       and isinstance(c.get("text"), str))
    return ""


def _result_value(result: Any) -> Any:
    if isinstance(result, str):
        return parse_content(result)
    if isinstance(result, list):
        text = _text(result)
        return parse_content(text) if text else result
    return result


class Interactions(Dialect):
    name = "gemini-interactions"
    demo_model = "gemini-2.5-flash"

    def route(self, method: str, path: str) -> dict[str, Any] | None:
        return {} if method == "POST" and _ROUTE.match(path.rstrip("/")) else None

    def authorized(self, req: Request) -> bool:
        return google_authorized(req)

    def auth_error(self, req: Request) -> tuple[int, Any]:
        return 403, _error(403, GOOGLE_NO_KEY)

    def error_body(self, err: ApiError, req: Request) -> Any:
        return _error(err.status, err.message)

    def status_body(self, fault: Fault, req: Request) -> Any:
        code = fault.code or 500
        details = None
        if fault.retry_delay is not None:
            details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": _duration(fault.retry_delay)}]
        return _error(code, _MESSAGES.get(code, f"The service returned status {code}."), details)

    def bad_json(self, req: Request, exc: Exception) -> ApiError:
        return ApiError(400, f"Invalid JSON payload received. {exc}")

    # ---- the request ------------------------------------------------------------------------------------------
    def read(self, req: Request) -> Conversation:
        body = req.body
        sim = req.sim
        if not isinstance(body, dict):
            raise ApiError(400, "Invalid JSON payload received. Expected an object.")
        if not body.get("model") and not body.get("agent"):
            raise ApiError(400, "Either model or agent must be specified.")
        req.model = body.get("model") or body.get("agent")
        req.stream = body.get("stream") is True
        check_interactions(body)
        if "input" not in body:
            raise ApiError(400, "input is required.")
        prev: dict[str, Any] | None = None
        prev_id = body.get("previous_interaction_id")
        if prev_id is not None:
            prev = sim._store_get("interactions", prev_id)
            if prev is None:
                raise ApiError(404, f"Interaction {prev_id} not found.")
        raw = body["input"]
        if isinstance(raw, str):
            items: list[Any] = [{"type": "text", "text": raw}]
        elif isinstance(raw, dict):
            items = [raw]
        elif isinstance(raw, list):
            items = raw
        else:
            raise ApiError(400, "Invalid value at 'input': expected a string, a content, or a list of contents or "
                                "steps.")
        conv = Conversation(entries=[(k, list(v) if isinstance(v, list) else v)
                                     for k, v in (prev["entries"] if prev else [])])
        pending: dict[str, str] = dict(prev["pending"]) if prev else {}
        answered: set[str] = set()
        user_text: list[str] = []

        def flush_user() -> None:
            if user_text:
                conv.add("user", "".join(user_text))
                user_text.clear()

        for k, item in enumerate(items):
            if not isinstance(item, dict):
                raise ApiError(400, f"Invalid value at 'input[{k}]': expected an object.")
            t = item.get("type")
            if "role" in item and t is None:  # a turn {role, content}
                text = _text(item.get("content"))
                flush_user()
                conv.add("user" if item.get("role") == "user" else "text", text)
            elif t in _CONTENT_TYPES:
                if t == "text":
                    user_text.append(item.get("text", ""))
            elif t == "user_input":
                flush_user()
                conv.add("user", _text(item.get("content")))
            elif t == "model_output":
                flush_user()
                conv.add("text", _text(item.get("content")))
            elif t == "thought":
                sig = item.get("signature")
                if sig is not None and sim.signer.verify(sig, "", prefix=SIG_PREFIX) is not True:
                    raise ApiError(400, "Corrupted thought signature.")
            elif t == "function_call":
                flush_user()
                if not isinstance(item.get("id"), str) or not isinstance(item.get("name"), str):
                    raise ApiError(400, f"input[{k}]: a function_call step needs an id and a name.")
                if not isinstance(item.get("arguments", {}), dict):
                    raise ApiError(400, f"Invalid value at 'input[{k}].arguments' "
                                        "(type.googleapis.com/google.protobuf.Struct).")
                pending[item["id"]] = item["name"]
                conv.add("calls", [Call(item["id"], item["name"], item.get("arguments", {}))])
            elif t == "function_result":
                flush_user()
                cid = item.get("call_id")
                if not isinstance(cid, str):
                    raise ApiError(400, f"input[{k}].call_id is required for a function_result.")
                if "result" not in item:
                    raise ApiError(400, f"input[{k}].result is required for a function_result.")
                for j, sub in enumerate(item["result"] if isinstance(item["result"], list) else ()):
                    kind = sub.get("type") if isinstance(sub, dict) else None
                    if kind not in ("text", "image", "audio", "document", "video", "function"):
                        raise ApiError(400, f"Invalid value at 'input[{k}].result[{j}].type': unknown content "
                                            f"type {kind!r}.")
                    if kind in ("image", "audio", "document", "video") and "data" in sub \
                            and not base64_ok(sub["data"]):
                        raise ApiError(400, f"Invalid value at 'input[{k}].result[{j}].data' (TYPE_BYTES), Base64 "
                                            "decoding failed")
                if cid not in pending or cid in answered:
                    where = f" of interaction {prev_id}" if prev_id else ""
                    raise ApiError(400, f"function_result call_id '{cid}' does not match any pending function_call"
                                        f"{where}.")
                answered.add(cid)
                is_err = item.get("is_error")
                conv.add("results", [Result(cid, item.get("name") or pending[cid], _result_value(item["result"]),
                                            bool(is_err) if is_err is not None else None)])
            else:
                raise ApiError(400, f"Invalid value at 'input[{k}].type': unknown content or step type {t!r}.")
        flush_user()
        missing = [cid for cid in pending if cid not in answered]
        if missing:
            where = f"interaction {prev_id}" if prev_id and missing[0] in (prev or {}).get("pending", {}) \
                else "the input"
            raise ApiError(400, f"No function_result was provided for function_call '{missing[0]}' "
                                f"({pending[missing[0]]}) of {where}: every pending function_call needs exactly one "
                                "function_result.")
        req.state["conv"] = conv
        return conv

    # ---- the response -----------------------------------------------------------------------------------------
    def _steps(self, reply: Reply, req: Request) -> list[dict[str, Any]]:
        if "steps" in req.state:
            return req.state["steps"]
        rand = req.rand
        steps: list[dict[str, Any]] = []
        if reply.calls:
            steps.append({"type": "thought", "signature": req.sim.signer.sign("", rand.nonce(), prefix=SIG_PREFIX)})
            for name, args in reply.calls:
                steps.append({"type": "function_call", "id": rand.lower(8), "name": name, "arguments": args})
        else:
            steps.append({"type": "model_output", "content": [{"type": "text", "text": reply.text or ""}]})
        req.state["steps"] = steps
        req.state["id"] = "v1_" + rand.token(44)
        return steps

    def _usage(self, req: Request, reply: Reply) -> dict[str, Any]:
        inp = max(1, len(dumps(req.body)) // 4)
        out = max(1, len(dumps([reply.text, reply.calls])) // 4)
        return {"total_input_tokens": inp, "total_output_tokens": out, "total_thought_tokens": 24,
                "total_tokens": inp + out + 24}

    def _interaction(self, req: Request, status: str, **extra: Any) -> dict[str, Any]:
        return {"id": req.state["id"], "status": status, "object": "interaction", "model": req.model, **extra}

    def events(self, reply: Reply, req: Request, *, max_tokens: bool) -> list[Ev]:
        rand = req.rand
        steps = self._steps(reply, req)
        evs: list[Ev] = []

        def ev(type_: str, content: bool = False, **fields: Any) -> None:
            evs.append(Ev(b"event: " + type_.encode() + b"\ndata: " + dumps({"event_type": type_, **fields})
                          + b"\n\n", content))

        ev("interaction.created", interaction=self._interaction(req, "in_progress", created=_timestamp(req)))
        ev("interaction.status_update", interaction_id=req.state["id"], status="in_progress")
        status = "requires_action" if reply.calls else "completed"
        calls = [s for s in steps if s["type"] == "function_call"]
        for idx, step in enumerate(steps):
            t = step["type"]
            if t == "thought":
                ev("step.start", index=idx, step={"type": "thought"})
                ev("step.delta", index=idx, delta={"type": "thought_signature", "signature": step["signature"]})
                ev("step.stop", index=idx)
            elif t == "function_call":
                ev("step.start", True, index=idx, step={**step, "arguments": {}})
                frags = fragments(json.dumps(step["arguments"], ensure_ascii=False), rand)
                cut = max_tokens and step is calls[-1]
                if cut:
                    frags = frags[:max(1, len(frags) // 2)]
                for frag in frags:
                    ev("step.delta", True, index=idx, delta={"type": "arguments_delta", "arguments": frag})
                if cut:
                    status = "incomplete"
                    break
                ev("step.stop", index=idx)
            else:
                ev("step.start", index=idx, step={"type": "model_output", "content": []})
                frags = text_fragments(step["content"][0]["text"], rand)
                if max_tokens:
                    frags, status = frags[:max(1, len(frags) // 2)], "incomplete"
                for frag in frags:
                    ev("step.delta", True, index=idx, delta={"type": "text", "text": frag})
                if max_tokens:
                    break
                ev("step.stop", index=idx)
        ev("interaction.completed", interaction=self._interaction(req, status, usage=self._usage(req, reply)))
        evs.append(Ev(b"data: [DONE]\n\n"))
        req.state["status"] = status
        return evs

    def ending_events(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> list[Ev]:
        self._steps(Reply(text=""), req)  # allocates the interaction id
        evs: list[Ev] = []

        def ev(type_: str, content: bool = False, **fields: Any) -> None:
            evs.append(Ev(b"event: " + type_.encode() + b"\ndata: " + dumps({"event_type": type_, **fields})
                          + b"\n\n", content))

        ev("interaction.created", interaction=self._interaction(req, "in_progress", created=_timestamp(req)))
        ev("interaction.status_update", interaction_id=req.state["id"], status="in_progress")
        text = partial_text(reply) if partial else ""
        if text:
            ev("step.start", index=0, step={"type": "model_output", "content": []})
            for frag in text_fragments(text, req.rand):
                ev("step.delta", True, index=0, delta={"type": "text", "text": frag})
        ev("interaction.completed", interaction=self._interaction(req, reason, usage=self._usage(req, reply)))
        evs.append(Ev(b"data: [DONE]\n\n"))
        req.state["status"] = reason
        return evs

    def ending_whole(self, reply: Reply, req: Request, *, reason: str, partial: bool) -> Any:
        self._steps(Reply(text=""), req)
        text = partial_text(reply) if partial else ""
        steps = [{"type": "model_output", "content": [{"type": "text", "text": text}]}] if text else []
        req.state["status"] = reason
        return self._interaction(req, reason, steps=steps, usage=self._usage(req, reply),
                                 created=_timestamp(req), updated=_timestamp(req),
                                 previous_interaction_id=req.body.get("previous_interaction_id"))

    def stream_error(self, kind: str, req: Request, seq: int) -> list[bytes]:
        code = _KINDS[kind]
        payload = {"event_type": "error", "error": {"code": STATUS_TEXT[code], "message": _MESSAGES[code]}}
        return [b"event: error\ndata: " + dumps(payload) + b"\n\n"]

    def whole(self, reply: Reply, req: Request, *, max_tokens: bool) -> Any:
        steps = [dict(s) for s in self._steps(reply, req)]
        status = "requires_action" if reply.calls else "completed"
        if max_tokens:
            status = "incomplete"
            steps = steps[:-1]
            if not reply.calls:
                text = reply.text or ""
                steps = [{"type": "model_output", "content": [{"type": "text", "text": text[:max(1, len(text) // 2)]}]}]
        req.state["status"] = status
        return self._interaction(req, status, steps=steps, usage=self._usage(req, reply),
                                 created=_timestamp(req), updated=_timestamp(req),
                                 previous_interaction_id=req.body.get("previous_interaction_id"))

    def finish(self, reply: Reply, req: Request, *, outcome: str) -> None:
        if req.body.get("store") is False or "id" not in req.state:
            return
        conv: Conversation = req.state["conv"]
        entries = [(k, list(v) if isinstance(v, list) else v) for k, v in conv.entries]
        pending: dict[str, str] = {}
        ok = outcome == "ok" and req.state.get("status") in ("requires_action", "completed")
        if ok and reply.calls:
            calls = [Call(s["id"], s["name"], s["arguments"]) for s in req.state["steps"]
                     if s["type"] == "function_call"]
            entries.append(("calls", calls))
            pending = {c.id: c.name for c in calls}
        elif ok:
            entries.append(("text", reply.text or ""))
        status = req.state.get("status") if outcome == "ok" else "incomplete" if outcome == "max_tokens" else "failed"
        req.sim._store_put("interactions", req.state["id"], {"entries": entries, "pending": pending,
                                                            "status": status})
