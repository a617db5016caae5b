"""From a server's ``tools/list`` entries to ``Tool`` objects: effects, names, and what is left out.

``build_tools`` is pure (no I/O, no MCP SDK): it takes the entries as MCP JSON and a factory of handlers, and
returns the tools, a ``ListedTool`` per tool (the effect it got and why, and the server's hints), and a
``SkippedTool`` per entry left out with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from .. import _log
from ..audit import audit_tools
from ..codecs import PROVIDERS
from ..errors import UsageError
from ..registry.errors import ToolDeclarationError
from ..registry.tool import Effect, Tool, check_tool_name

__all__ = ["SkippedTool", "ListedTool", "build_tools", "EFFECTS_FROM", "INVALID"]

#: the key put on a listed entry the MCP SDK could not read (see ``_wire``), with the reason
INVALID = "toolwire:invalid"

#: per-tool limits of the portability audit; ``max_tools`` and ``request_bytes`` are about the whole request
_REQUEST_LIMITS = frozenset({"max_tools", "request_bytes"})
EFFECTS_FROM = ("application", "annotation", "default")


class SkippedTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool the server lists that was left out: its name on the server, ``reason`` (one of ``name``,
    ``duplicate``, ``schema``, ``provider``), ``detail`` for people, and for ``provider`` the ``dialects`` that
    would refuse it."""

    name: str
    reason: str
    detail: str
    dialects: tuple[str, ...] = ()


class ListedTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool taken from the server: ``name`` on the server, ``tool`` in the registry (with the prefix), the
    ``effect`` it got and where from (``application``: the ``effects`` mapping; ``annotation``: the server's
    ``readOnlyHint``, false, or true with ``trust_read_only``; ``default``: a write, as every tool is when neither
    the application nor a trusted hint says otherwise), and the server's hints as it sent them (None when
    absent). The hints are claims of the server, never permissions: the policy decides what runs."""

    name: str
    tool: str
    effect: Effect
    effect_from: str
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


#: characters of a server's tool name quoted in a log line or a detail
_SHOWN = 200


def _cut(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def check_effects(effects: Mapping[str, str] | None) -> dict[str, Effect]:
    """``effects`` checked: a mapping of tool names (as the server lists them) to ``read`` or ``write``."""
    if effects is None:
        return {}
    if not isinstance(effects, Mapping):
        raise UsageError(f"effects must map tool names to 'read' or 'write', not {type(effects).__name__}")
    out: dict[str, Effect] = {}
    for name, effect in effects.items():
        if effect not in ("read", "write") or not isinstance(name, str):
            raise UsageError(f"effects[{name!r}] must be 'read' or 'write', not {effect!r}")
        out[name] = effect  # type: ignore[assignment]
    return out


def _hint(annotations: Any, key: str) -> bool | None:
    value = annotations.get(key) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, bool) else None


def _rejections(tools: list[Tool], dialects: tuple[str, ...]) -> dict[str, tuple[list[str], list[str]]]:
    """For each tool some dialect of ``dialects`` would refuse: (the dialects, what they say)."""
    if not tools:
        return {}
    report = audit_tools(tools, dialects=dialects)
    found: dict[str, tuple[list[str], list[str]]] = {}
    for dialect, audit in report.dialects.items():
        problems: list[tuple[str, str]] = []
        for x in audit.limits:
            if x.tool is not None and x.limit not in _REQUEST_LIMITS:
                problems.append((x.tool, f"{x.limit}: {x.value} (needs {x.max})"))
        for loss in audit.lost:
            if loss.detail.startswith("refused") and loss.tool is not None:
                problems.append((loss.tool, f"{loss.keyword} at {loss.path}: {loss.detail}"))
        for tool, what in problems:
            where, why = found.setdefault(tool, ([], []))
            if dialect not in where:
                where.append(dialect)
            why.append(f"{dialect}: {what}")
    return found


def build_tools(entries: Iterable[Mapping[str, Any]], handler_for: Callable[[str], Callable[..., Any]], *,
                server: str, effects: Mapping[str, Effect], timeout: float, prefix: str,
                dialects: tuple[str, ...] = PROVIDERS, trust_read_only: bool = False,
                ) -> tuple[list[Tool], list[ListedTool], list[SkippedTool]]:
    """The tools of ``entries`` (``tools/list`` entries as MCP JSON), each calling ``handler_for(name)``.

    Left out, each with a logged reason: a name the providers refuse (with the prefix), a name listed twice,
    an ``inputSchema`` that is not a valid JSON Schema, and a tool that the portability audit says one of
    ``dialects`` would refuse. Names in ``effects`` that the server does not list are logged."""
    tools: list[Tool] = []
    listed: dict[str, ListedTool] = {}
    skipped: list[SkippedTool] = []
    seen: set[str] = set()

    def skip(name: str, reason: str, detail: str, where: tuple[str, ...] = ()) -> None:
        if len(name) > _SHOWN:  # a server's name of any length: quoted in part, so a log line stays short
            detail = detail.replace(name, _cut(name))
        detail = _cut(detail, 4 * _SHOWN)
        skipped.append(SkippedTool(name=name, reason=reason, detail=detail, dialects=where))
        _log.emit(_log.WARNING, "mcp.tool_skipped", server=server, tool=_cut(name), reason=reason, detail=detail)

    for entry in entries:
        name = entry.get("name")
        if not isinstance(name, str):
            skip(repr(name), "name", "the entry has no name")
            continue
        invalid = entry.get(INVALID)
        if isinstance(invalid, str):
            skip(name, "schema", invalid)
            continue
        exposed = prefix + name
        try:
            check_tool_name(exposed)
        except ToolDeclarationError as exc:
            skip(name, "name", exc.message)
            continue
        if name in seen:
            skip(name, "duplicate", "the server lists this name more than once; the first entry is used")
            continue
        seen.add(name)
        annotations = entry.get("annotations")
        read_only = _hint(annotations, "readOnlyHint")
        chosen = effects.get(name, effects.get(exposed))
        if chosen is not None:
            effect, source = chosen, "application"
        elif trust_read_only and read_only is True:
            effect, source = "read", "annotation"
        else:  # no hint, a hint that says write, or one not trusted
            effect, source = "write", "annotation" if read_only is False else "default"
        declared = {"name": exposed, "description": entry.get("description"), "inputSchema": entry.get("inputSchema")}
        try:
            tool = Tool.from_mcp(declared, handler_for(name), effect=effect, timeout=timeout)
        except ToolDeclarationError as exc:
            skip(name, "schema", exc.message)
            continue
        tools.append(tool)
        listed[exposed] = ListedTool(
            name=name, tool=exposed, effect=effect, effect_from=source, read_only_hint=read_only,
            destructive_hint=_hint(annotations, "destructiveHint"),
            idempotent_hint=_hint(annotations, "idempotentHint"), open_world_hint=_hint(annotations, "openWorldHint"))
    refused = _rejections(tools, dialects)
    kept: list[Tool] = []
    for tool in tools:
        if tool.name in refused:
            where, why = refused[tool.name]
            skip(listed[tool.name].name, "provider", "; ".join(why), tuple(where))
            del listed[tool.name]
            continue
        kept.append(tool)
    exposed_names = {prefix + n for n in seen}
    for name in effects:
        if name not in seen and name not in exposed_names:
            _log.emit(_log.WARNING, "mcp.effect_unused", server=server, tool=name)
    return kept, list(listed.values()), skipped
