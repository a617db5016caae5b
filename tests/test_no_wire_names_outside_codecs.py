"""Provider field names stay in ``toolwire/codecs/`` (and the simulator, ``toolwire/sim/``, which speaks the wire on
purpose): everywhere else in the package asks a dialect record instead.

The names are built from the codecs themselves: every field name (as it is on the wire: camelCase where a Struct
renames) and every tag of the msgspec Structs each registered dialect's codec module defines, keeping those that
are identifiers of more than one word (``partial_json``, ``functionCall``, ``response.output_item.done``), since
one-word names (``id``, ``name``, ``content``) are everyone's; then the request-side names the results and
declarations parts write, which no response Struct holds. A new codec adds its names to the list by existing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import msgspec
import pytest

from toolwire.codecs import dialects

ROOT = Path(__file__).resolve().parents[1] / "toolwire"
#: where provider field names belong
OWNERS = ("codecs", "sim")

#: names the requests, results and declarations of the dialects use, which no response Struct of a codec holds
REQUEST_SIDE = (
    "tool_call_id", "tool_use", "tool_use_id", "tool_result", "server_tool_use", "mcp_tool_use", "input_json",
    "function_call", "function_result", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "functionCall", "functionResponse", "function_response", "functionDeclarations", "parametersJsonSchema",
    "toolUse", "toolResult", "toolSpec", "toolConfig", "toolChoice", "functionCallingConfig", "generationConfig",
    "generation_config", "previous_interaction_id", "disable_parallel_tool_use", "parallel_tool_calls",
    "stream_options", "reasoning_effort", "thinkingConfig", "systemInstruction", "system_instruction",
)

#: names that are also toolwire's own public vocabulary, where they mean toolwire's thing, not a provider's field
ALLOWED = {
    # ToolCall.call_id and ToolResult.call_id: the canonical call's id, whatever the provider names it
    "call_id",
    # Turn.finish_reason and Choice.finish_reason: the canonical finish reason (FinishReason)
    "finish_reason",
    # FinishReason.TOOL_CALLS's value: the canonical finish reason of a turn with calls
    "tool_calls",
    # ToolLoop(tool_choice=...), toolwire.ToolChoice: the canonical tool choice, and `toolwire declare`'s output
    "tool_choice",
    # Tool.input_schema and ToolSpec.input_schema: the canonical tool's JSON Schema
    "input_schema",
    # ToolLoop(reasoning_effort=...): the loop's option, which each dialect puts in its own field
    "reasoning_effort",
    # toolwire.mcp's JSON-RPC request ids (MCP's own word; Anthropic's error event happens to carry one too)
    "request_id",
}


def _structs(module: object) -> list[type[msgspec.Struct]]:
    found: list[type[msgspec.Struct]] = []
    for value in vars(module).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, type) and issubclass(item, msgspec.Struct) \
                    and item.__module__ == module.__name__:  # type: ignore[attr-defined]
                found.append(item)
    return found


def wire_names() -> set[str]:
    """The provider field names and tags of every registered dialect's codec, and the request-side names."""
    names: set[str] = set(REQUEST_SIDE)
    for d in dialects():
        module = sys.modules[d.codec.__module__]
        for struct in _structs(module):
            info = msgspec.inspect.type_info(struct)
            tag = getattr(info, "tag", None)
            if isinstance(tag, str):
                names.add(tag)
            names.update(f.encode_name for f in info.fields)
    return {n for n in names if not n.startswith("_") and re.search(r"[_.]|[a-z][A-Z]", n)} - ALLOWED


def leaks(names: set[str], root: Path = ROOT) -> list[str]:
    """``path:line: name`` for every whole-word occurrence of a name in the package outside ``OWNERS``."""
    pattern = re.compile(r"(?<![A-Za-z0-9_.])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True))
                         + r")(?![A-Za-z0-9_])")
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in OWNERS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in pattern.finditer(line):
                out.append(f"toolwire/{rel.as_posix()}:{number}: {m.group(1)}")
    return out


def test_the_wire_names_come_from_every_dialect():
    """The list holds names of every dialect's responses, so a new codec's own names are checked too."""
    names = wire_names()
    for d in dialects():
        module = sys.modules[d.codec.__module__]
        own = set()
        for struct in _structs(module):
            info = msgspec.inspect.type_info(struct)
            own.update(f.encode_name for f in info.fields)
        assert own & names, f"{d.id}: no multi-word field name in its codec's Structs"
    assert {"partial_json", "functionCall", "response.output_item.done", "step.delta"} <= names


def test_no_provider_field_name_outside_codecs_and_sim():
    """No provider field name appears in toolwire/ outside codecs/ and sim/ (code, comments and docstrings)."""
    found = leaks(wire_names())
    assert found == [], "provider field names outside toolwire/codecs and toolwire/sim:\n" + "\n".join(found)


def test_the_check_finds_a_leak(tmp_path):
    """A module outside codecs/ that names a wire field is reported; the same text under codecs/ is not."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "codecs").mkdir()
    (tmp_path / "harness" / "loop.py").write_text('if item.get("type") == "function_result":\n    pass\n')
    (tmp_path / "codecs" / "x.py").write_text('FIELD = "function_result"\n')
    assert leaks(wire_names(), tmp_path) == ["toolwire/harness/loop.py:1: function_result"]


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed_names_are_public_vocabulary(name):
    """Each allowed name is toolwire's own: an attribute, argument or value of its public API."""
    import toolwire
    from toolwire.harness import ToolLoop

    public = {"call_id": toolwire.ToolCall.__struct_fields__, "finish_reason": toolwire.Turn.__struct_fields__,
              "tool_calls": [r.value for r in toolwire.FinishReason],
              "tool_choice": ToolLoop.__init__.__code__.co_varnames,
              "reasoning_effort": ToolLoop.__init__.__code__.co_varnames,
              "input_schema": toolwire.ToolSpec.__struct_fields__,
              "request_id": _mcp_wire_names()}
    assert name in public[name]


def _mcp_wire_names() -> str:
    """The source of toolwire.mcp's JSON-RPC layer, where request ids are MCP's own."""
    return "".join(p.read_text(encoding="utf-8") for p in (ROOT / "mcp").glob("*.py"))
