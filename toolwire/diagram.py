"""State diagrams generated from the one transition table (``toolwire.statemachine.table.TRANSITIONS``).

Never drawn by hand: ``mermaid()`` asks ``transitions``' own diagram extension (a ``GraphMachine`` built from the
same table, mermaid engine), ``dot()`` writes Graphviz source from the table, ``svg()`` renders that source with
Graphviz's ``dot`` when it is installed. A test regenerates the committed ``diagrams/`` files and fails if they
differ from the live table.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Iterable

from transitions.extensions.diagrams import GraphMachine

from .errors import UsageError
from .statemachine.table import TERMINAL_STATES, TRANSITIONS
from .types import CallState

__all__ = ["mermaid", "dot", "svg", "FORMATS"]

FORMATS = ("mermaid", "dot", "svg")


class _Model:
    pass


def _graph_machine() -> GraphMachine:
    m = GraphMachine(model=None, states=[s.value for s in CallState], initial=CallState.ANNOUNCED.value,
                     auto_transitions=False, graph_engine="mermaid", title="toolwire call")
    for trigger, sources, dst in TRANSITIONS:
        m.add_transition(trigger.value, [s.value for s in sources], dst.value if dst is not None else None)
    return m


def mermaid(visited: Iterable[CallState] = (), active: CallState | None = None) -> str:
    """Mermaid ``stateDiagram-v2`` source of the call machine.

    With ``visited`` and ``active`` (a call's path), the states it went through are marked ``s_previous`` and the
    state it ended in ``s_active`` (the classes transitions defines), so the path shows in the picture.
    """
    machine = _graph_machine()
    model = _Model()
    machine.add_model(model)
    lines = model.get_graph().draw(None).splitlines()
    visited_names = {s.value for s in visited}
    active_name = active.value if active is not None else None
    out = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("Class "):
            # mermaid's keyword is lower-case; transitions writes "Class"
            _, state, _cls = stripped.split()
            if state == active_name:
                cls = "s_active"
            elif state in visited_names:
                cls = "s_previous"
            else:
                cls = "s_default"
            line = line[: len(line) - len(stripped)] + f"class {state} {cls}"
        out.append(line.rstrip())
    return "\n".join(out).rstrip() + "\n"


def dot(visited: Iterable[CallState] = (), active: CallState | None = None) -> str:
    """Graphviz source of the call machine (terminal states drawn as double circles)."""
    visited_names = {s.value for s in visited}
    lines = [
        "digraph toolwire_call {",
        '  rankdir=LR;',
        '  node [shape=ellipse, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        '  __start [shape=point, label=""];',
    ]
    for state in CallState:
        attrs = []
        if state in TERMINAL_STATES:
            attrs.append("shape=doublecircle")
        if active is not None and state is active:
            attrs.append('style=filled, fillcolor="darksalmon"')
        elif state.value in visited_names:
            attrs.append('style=filled, fillcolor="azure"')
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {state.value}{suffix};")
    lines.append(f"  __start -> {CallState.ANNOUNCED.value};")
    for trigger, sources, dst in TRANSITIONS:
        for src in sources:
            target = src if dst is None else dst
            label = trigger.value + (" [internal]" if dst is None else "")
            lines.append(f'  {src.value} -> {target.value} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg(visited: Iterable[CallState] = (), active: CallState | None = None) -> str:
    """SVG rendered by Graphviz's ``dot``. Raises ``UsageError`` when Graphviz is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise UsageError("SVG needs Graphviz's `dot`, which is not installed (Debian: apt-get install graphviz); "
                         "--format mermaid and --format dot need nothing")
    proc = subprocess.run([exe, "-Tsvg"], input=dot(visited, active).encode(), capture_output=True, check=False)
    if proc.returncode != 0:
        raise UsageError(f"dot failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode()


def render(fmt: str, visited: Iterable[CallState] = (), active: CallState | None = None) -> str:
    """The diagram in ``fmt`` (mermaid, dot or svg). Raises ``UsageError`` for another format."""
    if fmt == "mermaid":
        return mermaid(visited, active)
    if fmt == "dot":
        return dot(visited, active)
    if fmt == "svg":
        return svg(visited, active)
    raise UsageError(f"unknown diagram format {fmt!r}; expected one of: {', '.join(FORMATS)}")
