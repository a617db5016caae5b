"""OpenAI Responses API: output input items, replay, history repair (failure mode 19 in
docs/failure-modes.md).

Results, one input item per call in call order, each answering the call's ``call_id`` (never the ``fc_…`` item
id): ``function_call_output`` and ``custom_tool_call_output`` (``output``: text; for a rich result with an image
(JPEG, PNG, GIF, WebP, as a data URL) or a PDF resource, a list of ``input_text`` / ``input_image`` /
``input_file`` items in the parts' order, other parts described in words, see ``_parts``), and for the provider-defined
tools the application runs, the matching output item of the openai SDK's ``ResponseInputItemParam`` union:

* ``local_shell_call`` → ``local_shell_call_output {id: the call's call_id, output: text}`` (the SDK types name
  the call's id ``id`` here);
* ``shell_call`` → ``shell_call_output {call_id, output: [{stdout, stderr, outcome}]}``: a result that already
  is such a list (or one such object) is sent as it is; other text is ``stdout`` (ok) or ``stderr`` (error,
  outcome ``exit`` 1, or ``timeout`` for ``handler_timeout``);
* ``apply_patch_call`` → ``apply_patch_call_output {call_id, status: completed | failed, output: text}``;
* ``computer_call`` → ``computer_call_output {call_id, output: computer_screenshot}``: the result must be a
  screenshot (``{"image_url": …}`` / ``{"file_id": …}``, optionally with ``acknowledged_safety_checks``, or
  ``Content`` holding an image of a type OpenAI takes, sent as a data URL);
* client ``tool_search_call`` → ``tool_search_output {call_id, execution: "client", tools}``: the result is the
  list of tool definitions (or ``{"tools": [...]}``).

A computer or tool-search call answered with an error (or anything that is not a screenshot / tool list) gets
a blank output (a 1×1 transparent PNG, no tools) and its error text goes in a user message after all the
outputs, so the model is told what happened without breaking the one-output-per-call rule.

Replay: the output items in output order (reasoning items with their ``encrypted_content`` right before the
item they precede), each function call's ``arguments`` a JSON object string (failure mode 21), then the outputs.
"""

from __future__ import annotations

from typing import Any

from ...registry.content import ImagePart, Part, ResourcePart
from ...registry.result import ResultKind, ToolResult
from ...types import CallKind, ToolCall, Turn
from ._common import (
    MISSING_RESULT_TEXT,
    Actions,
    CallCounter,
    CallRef,
    IdRenamer,
    Pair,
    RepairKind,
    as_json_value,
    deep_copy,
    object_arguments_text,
    result_text,
    wire_id,
)
from ._flat import Group, place_results
from ._part import Results
from ._parts import OPENAI_IMAGES, PDF, joined, media, pieces

__all__ = ["PROVIDER", "PART", "encode", "replay", "repair", "BLANK_SCREENSHOT"]

PROVIDER = "openai-responses"

#: a 1×1 transparent PNG: the screenshot of a computer call that could not run
BLANK_SCREENSHOT = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                    "DwAChwGA60e6kgAAAABJRU5ErkJggg==")

#: call item type -> output item type
OUTPUT_TYPE = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "tool_search_call": "tool_search_output",
}
_OUTPUTS = frozenset(OUTPUT_TYPE.values())
#: items the model produced (a turn is a run of them); user/system/developer messages and outputs are not
_MODEL_ITEMS = frozenset({
    "reasoning", "function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
    "computer_call", "tool_search_call", "web_search_call", "file_search_call", "mcp_call", "mcp_list_tools",
    "mcp_approval_request", "image_generation_call", "code_interpreter_call", "program", "program_output",
    "compaction", "item_reference",
})


def _builtin_type(call: ToolCall) -> str:
    if call.kind is CallKind.BUILTIN:
        return f"{call.name}_call"
    return "custom_tool_call" if call.kind is CallKind.CUSTOM else "function_call"


def _shell_output(result: Any) -> list[dict[str, Any]]:
    content = as_json_value(result.content)
    chunk_keys = {"stdout", "stderr", "outcome"}
    if not result.is_error:
        if isinstance(content, dict) and chunk_keys <= set(content):
            return [content]
        if isinstance(content, list) and content and all(isinstance(c, dict) and chunk_keys <= set(c)
                                                         for c in content):
            return content
        return [{"stdout": result_text(result), "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    outcome = ({"type": "timeout"} if result.kind is ResultKind.HANDLER_TIMEOUT
               else {"type": "exit", "exit_code": 1})
    return [{"stdout": "", "stderr": result_text(result), "outcome": outcome}]


def _data_url(kind: str, data: str) -> str:
    return f"data:{kind};base64,{data}"


def _filename(uri: str) -> str:
    """A file name for a PDF resource: the last segment of its uri (``document.pdf`` when it has none)."""
    name = uri.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1][-100:]
    name = "".join(c for c in name if c.isprintable() and c not in '\\/:*?"<>|') or "document"
    return name if name.lower().endswith(".pdf") else name + ".pdf"


def _native(part: Part) -> dict[str, Any] | None:
    found = media(part, OPENAI_IMAGES)
    if found is not None:
        # ``detail`` is optional in a function_call_output, required in a custom_tool_call_output: always sent
        return {"type": "input_image", "image_url": _data_url(*found), "detail": "auto"}
    found = media(part, frozenset({PDF})) if isinstance(part, ResourcePart) else None
    if found is not None and isinstance(part, ResourcePart):
        return {"type": "input_file", "filename": _filename(part.uri), "file_data": _data_url(*found)}
    return None


def _output(result: ToolResult) -> str | list[dict[str, Any]]:
    """A ``function_call_output`` / ``custom_tool_call_output``'s ``output``."""
    if result.parts is None:
        return result_text(result)
    items = pieces(result, _native)
    text = joined(result, items)
    if text is not None:
        return text
    return [{"type": "input_text", "text": i} if isinstance(i, str) else i for i in items if i != ""]


def _screenshot(result: Any) -> tuple[dict[str, Any], list[Any] | None] | None:
    if not result.is_error:
        for part in result.parts or ():
            found = media(part, OPENAI_IMAGES) if isinstance(part, ImagePart) else None
            if found is not None:
                return {"type": "computer_screenshot", "image_url": _data_url(*found)}, None
    content = as_json_value(result.content)
    if result.is_error or not isinstance(content, dict):
        return None
    shot = {"type": "computer_screenshot"}
    for key in ("image_url", "file_id"):
        if isinstance(content.get(key), str):
            shot[key] = content[key]
    if len(shot) == 1:
        return None
    checks = content.get("acknowledged_safety_checks")
    return shot, checks if isinstance(checks, list) else None


def _tools(result: Any) -> list[Any] | None:
    content = as_json_value(result.content)
    if result.is_error:
        return None
    if isinstance(content, dict) and isinstance(content.get("tools"), list):
        return content["tools"]
    if isinstance(content, list) and all(isinstance(t, dict) for t in content):
        return content
    return None


def output_item(call_type: str, call_id: str, result: Any) -> tuple[dict[str, Any], str | None]:
    """The output item answering a call of ``call_type``, and a note for the model when the item cannot carry
    the result's text (see the module docstring)."""
    if call_type == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": result_text(result)}, None
    if call_type == "shell_call":
        return {"type": "shell_call_output", "call_id": call_id, "output": _shell_output(result)}, None
    if call_type == "apply_patch_call":
        return {"type": "apply_patch_call_output", "call_id": call_id,
                "status": "failed" if result.is_error else "completed", "output": result_text(result)}, None
    if call_type == "computer_call":
        shot = _screenshot(result)
        item: dict[str, Any] = {"type": "computer_call_output", "call_id": call_id}
        if shot is None:
            item["output"] = {"type": "computer_screenshot", "image_url": BLANK_SCREENSHOT}
            return item, f"The computer call {call_id} did not produce a screenshot: {result_text(result)}"
        item["output"], checks = shot
        if checks:
            item["acknowledged_safety_checks"] = checks
        return item, None
    if call_type == "tool_search_call":
        tools = _tools(result)
        item = {"type": "tool_search_output", "call_id": call_id, "execution": "client", "tools": tools or []}
        if tools is None:
            return item, f"The tool search {call_id} returned no tools: {result_text(result)}"
        return item, None
    out_type = "custom_tool_call_output" if call_type == "custom_tool_call" else "function_call_output"
    return {"type": out_type, "call_id": call_id, "output": _output(result)}, None


def _note(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def encode(turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> list[dict[str, Any]]:
    """One output item per call, in call order (then any notes, see the module docstring)."""
    items, notes = [], []
    for call, result in pairs:
        item, note = output_item(_builtin_type(call), wire_id(turn, call), result)
        items.append(item)
        if note:
            notes.append(_note(note))
    return items + notes


def _find_item(items: list[Any], call: ToolCall, used: set[int]) -> int | None:
    iid = call.provider_meta.get("item_id")
    want = _builtin_type(call)
    for i, item in enumerate(items):
        if i in used or not isinstance(item, dict) or item.get("type") != want:
            continue
        if iid is not None and item.get("id") == iid:
            return i
        if iid is None and call.call_id is not None and item.get("call_id") == call.call_id:
            return i
    for i, item in enumerate(items):  # no ids to go by: the next unused item of the call's type
        if i not in used and isinstance(item, dict) and item.get("type") == want and iid is None \
                and call.call_id is None:
            return i
    return None


def replay(turn: Turn, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The output items, arguments in the accepted form, every call with a ``call_id``."""
    items = deep_copy(list(turn.assistant_message or []))
    used: set[int] = set()
    for call in calls:
        i = _find_item(items, call, used)
        if i is None:
            continue
        used.add(i)
        item = items[i]
        item["call_id"] = wire_id(turn, call)
        if item["type"] == "function_call":
            item["arguments"], _ = object_arguments_text(item.get("arguments"))
        elif item["type"] == "custom_tool_call" and not isinstance(item.get("input"), str):
            item["input"] = call.raw_arguments
    return items


# ---- history repair -----------------------------------------------------------------------------------------
def _type(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    t = item.get("type")
    if t is None and "role" in item:
        return "message"
    return t if isinstance(t, str) else None


def _is_model(item: Any) -> bool:
    t = _type(item)
    if t == "message":
        return item.get("role") == "assistant"
    if t == "tool_search_output":
        return item.get("execution") != "client"
    return t in _MODEL_ITEMS


def _call_type(item: Any) -> str | None:
    t = _type(item)
    if t in OUTPUT_TYPE and (t != "tool_search_call" or item.get("execution") == "client"):
        return t
    return None


def _result_id(item: Any) -> str | None:
    t = _type(item)
    if t not in _OUTPUTS or (t == "tool_search_output" and item.get("execution") != "client"):
        return None
    cid = item.get("call_id")
    if t == "local_shell_call_output" and not isinstance(cid, str):
        cid = item.get("id")
    return cid if isinstance(cid, str) else ""


def _set_result_id(item: dict[str, Any], new: str) -> None:
    if item.get("type") == "local_shell_call_output" and not isinstance(item.get("call_id"), str):
        item["id"] = new
    else:
        item["call_id"] = new


def _all_ids(items: list[Any]) -> Any:
    for item in items:
        rid = _result_id(item)
        if rid is not None:
            yield rid
        elif _call_type(item) is not None:
            yield item.get("call_id")


def repair(items: list[Any], *, echo_ids: bool = True, counter: CallCounter) -> tuple[list[Any], Actions]:
    """Every call item answered by exactly one output item after its turn (the run of model items holding it),
    in call order; reasoning items kept right before the item they precede; malformed arguments replaced.
    ``items`` is the repair's own copy."""
    actions = Actions()
    groups: list[Group] = []
    drop: set[int] = set()
    run: list[int] = []  # positions of the current run of model items
    run_calls: list[CallRef] = []
    run_ids: set[str] = set()
    renamer = IdRenamer(lambda: _all_ids(items))

    def close_run() -> None:
        # a reasoning item must be followed by an item of its turn
        while run and _type(items[run[-1]]) == "reasoning":
            pos = run.pop()
            drop.add(pos)
            actions.add(RepairKind.DROPPED_REASONING, pos,
                        detail="a reasoning item with no item after it in its turn was dropped")
        if run_calls:
            groups.append(Group(run[-1], list(run_calls), run[0]))
        run.clear()
        run_calls.clear()
        run_ids.clear()

    for i, item in enumerate(items):
        rid = _result_id(item)
        if rid is not None:
            if rid in run_ids:
                close_run()  # the turn ended: its results follow
            continue
        if not _is_model(item):
            close_run()
            continue
        run.append(i)
        ct = _call_type(item)
        if ct is None:
            continue
        counter.add(i)
        match = None
        if not isinstance(item.get("call_id"), str) or not item["call_id"]:
            item["call_id"] = f"tw_call_{i}"
            actions.add(RepairKind.ASSIGNED_ID, i, item["call_id"], item.get("name"),
                        detail="a call item without a call_id got one")
        elif item["call_id"] in run_ids:
            match, item["call_id"] = item["call_id"], renamer.new(item["call_id"])
            actions.add(RepairKind.ASSIGNED_ID, i, item["call_id"], item.get("name"),
                        detail=f"a second call item with call_id {match!r} in one turn got a new one (the next "
                               f"output with that call_id, if any, answers it under the new one)")
        if ct == "function_call":
            fixed, changed = object_arguments_text(item.get("arguments"))
            if changed:
                item["arguments"] = fixed
                actions.add(RepairKind.REPLACED_ARGUMENTS, i, item["call_id"], item.get("name"),
                            detail="arguments that were not a JSON object were replaced")
        run_calls.append(CallRef(item["call_id"], item.get("name"), i, ct, match=match))
        run_ids.add(item["call_id"])
    close_run()

    def missing(c: CallRef) -> dict[str, Any]:
        placeholder = ToolResult(call_id=c.id, local_id=c.id, name=c.name, content=MISSING_RESULT_TEXT,
                                 is_error=True, kind=ResultKind.NOT_RUN)
        item, _ = output_item(c.type, c.id, placeholder)
        return item

    keep_unknown = any(_type(item) == "item_reference" for item in items)
    out = place_results(items, groups, _result_id, missing, actions, set_result_id=_set_result_id, drop=drop,
                        keep_unknown=keep_unknown)
    return out, actions


class ResponsesResults(Results):
    """OpenAI Responses output items, replay and repair (see the module docstring)."""

    dialect = PROVIDER

    def encode(self, turn: Turn, pairs: list[Pair], *, echo_ids: bool = True) -> Any:
        return encode(turn, pairs, echo_ids=echo_ids)

    def replay(self, turn: Turn, calls: list[ToolCall]) -> list[Any]:
        return replay(turn, calls)

    def repair(self, messages: list[Any], *, echo_ids: bool = True, counter: CallCounter
               ) -> tuple[list[Any], Actions]:
        return repair(messages, echo_ids=echo_ids, counter=counter)


PART = ResponsesResults()
