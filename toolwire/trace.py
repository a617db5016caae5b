"""Per-call traces: each call's path through the state machine, as text or as a highlighted diagram.

``format_trace(turn)`` works on any Turn (live from a ``StreamParser``, or from ``parse``); the ``toolwire
trace`` command replays a captured stream through it. Positions are payload numbers: the n-th provider event
(SSE message, JSON line or body) of the stream caused that transition. Argument fragments after the first are
accepted without a transition (see ``statemachine/table.py``), so a trace shows the first one and a count.
"""

from __future__ import annotations

from pathlib import Path

from . import diagram
from .types import ToolCall, Turn

__all__ = ["format_trace", "call_diagram", "write_call_diagrams"]


def _label(call: ToolCall) -> str:
    return f"{call.local_id} {call.name or '?'} (call_id {call.call_id or '-'})"


def format_trace(turn: Turn) -> str:
    """A readable trace of every call in ``turn``: trigger, from, to, the payload that caused it, problems."""
    lines = [f"turn: provider={turn.provider} finish_reason="
             f"{turn.finish_reason.value if turn.finish_reason else None} "
             f"(raw {turn.raw_finish_reason!r}) error={turn.error.type if turn.error else None}"]
    if not turn.calls:
        lines.append("  (no calls)")
    for call in turn.calls:
        lines.append(f"call {_label(call)}: {call.state.value}")
        if call.announced_at is not None:
            lines.append(f"  {'announce':<9} {'':>12}    {'announced':<12} at payload #{call.announced_at}")
        for step in call.history:
            where = f"payload #{step.position}" if step.position is not None else "-"
            lines.append(f"  {step.trigger:<9} {step.src.value:>12} -> {step.dst.value:<12} at {where}")
        lines.append(f"  arguments: {len(call.raw_arguments)} chars")
        if call.problem is not None:
            lines.append(f"  problem: {call.problem.code.value}: {call.problem.message}")
    for sc in turn.server_calls:
        lines.append(f"server call {sc.type} {sc.name} (call_id {sc.call_id or '-'}): run by the provider")
    return "\n".join(lines) + "\n"


def call_diagram(call: ToolCall, fmt: str = "mermaid") -> str:
    """The call machine with ``call``'s path highlighted (visited states, and the state it ended in)."""
    visited = [step.src for step in call.history] + [step.dst for step in call.history]
    return diagram.render(fmt, visited=visited, active=call.state)


def write_call_diagrams(turn: Turn, directory: str | Path, fmt: str = "mermaid") -> list[Path]:
    """Write one diagram per call of ``turn`` into ``directory`` (``<local_id>.mmd`` / ``.dot`` / ``.svg``)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ext = {"mermaid": "mmd", "dot": "dot", "svg": "svg"}[fmt]
    paths = []
    for call in turn.calls:
        path = out / f"{call.local_id}.{ext}"
        path.write_text(call_diagram(call, fmt))
        paths.append(path)
    return paths
