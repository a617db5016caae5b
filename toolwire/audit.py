"""Portability audit: what happens to a tool set in every other dialect.

``audit_tools(tools, source=P)`` declares the tools (as ``declare`` would, without strict mode) in each dialect but
``P`` and reports, per dialect:

* ``renamed``: names the dialect refuses, with the portable name ``suggest_name`` proposes (toolwire never
  renames on its own: ``declare`` refuses such a name);
* ``lost``: what the dialect drops or approximates (``{"tool", "path", "keyword", "detail"}``), including a
  schema the dialect cannot take at all;
* ``limits``: limits of the capabilities record that are broken (``{"tool", "limit", "value", "max"}``),
  including ``tool_kind`` for a custom (free-text) tool in a dialect that only declares function tools.

``ok`` is true when the tool set declares as it is (nothing to rename, no limit broken, no schema refused);
losses alone leave it true. ``AuditReport.to_json()`` is the document ``toolwire audit --json`` prints, and
``to_text()`` the table it prints otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from .codecs import dialects as _dialects
from .codecs.capabilities import capabilities_for
from .codecs.declare import SCHEMA_MODES, as_spec, check_limits, kind_finding, part_for, suggest_name
from .errors import UsageError
from .schema_tools import Loss, SchemaConversionError, StrictSchemaError

__all__ = ["audit_tools", "AuditReport", "DialectAudit", "Rename", "LimitExceeded"]


class Rename(msgspec.Struct, frozen=True, kw_only=True):
    """A tool name the dialect refuses (``tool``) and a name it accepts (``to``); ``reason`` says which rule."""

    tool: str
    to: str
    reason: str


class LimitExceeded(msgspec.Struct, frozen=True, kw_only=True):
    """A broken limit: ``limit`` name, ``value`` found, ``max`` allowed (a number or a pattern), for ``tool``."""

    tool: str | None
    limit: str
    value: Any
    max: Any


class DialectAudit(msgspec.Struct, frozen=True, kw_only=True):
    """One dialect's findings."""

    ok: bool
    renamed: tuple[Rename, ...] = ()
    lost: tuple[Loss, ...] = ()
    limits: tuple[LimitExceeded, ...] = ()


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The audit of ``tools`` tools written for ``source`` (None when unknown), per dialect."""

    source: str | None
    tools: int
    dialects: dict[str, DialectAudit]

    def to_json(self) -> dict[str, Any]:
        """``{"source", "tools", "dialects": {d: {"ok", "renamed", "lost", "limits"}}}``."""
        return {
            "source": self.source,
            "tools": self.tools,
            "dialects": {
                name: {
                    "ok": d.ok,
                    "renamed": [{"tool": r.tool, "to": r.to, "reason": r.reason} for r in d.renamed],
                    "lost": [{"tool": x.tool, "path": x.path, "keyword": x.keyword, "detail": x.detail}
                             for x in d.lost],
                    "limits": [{"tool": x.tool, "limit": x.limit, "value": x.value, "max": x.max}
                               for x in d.limits],
                }
                for name, d in self.dialects.items()
            },
        }

    def to_text(self) -> str:
        """A table with one row per dialect, then each dialect's findings."""
        src = self.source or "not given"
        lines = [f"{self.tools} tool(s), written for: {src}", ""]
        width = max([len("dialect")] + [len(n) for n in self.dialects])
        lines.append(f"{'dialect':<{width}}  ok   renamed  lost  limits")
        for name, d in self.dialects.items():
            lines.append(f"{name:<{width}}  {'yes' if d.ok else 'NO ':<3}  {len(d.renamed):>7}  {len(d.lost):>4}  "
                         f"{len(d.limits):>6}")
        for name, d in self.dialects.items():
            if not (d.renamed or d.lost or d.limits):
                continue
            lines += ["", f"{name}:"]
            for r in d.renamed:
                lines.append(f"  rename  {r.tool} -> {r.to}  ({r.reason})")
            for x in d.limits:
                who = x.tool if x.tool is not None else "(request)"
                verb = "is not one of" if x.limit == "tool_kind" else "exceeds"
                lines.append(f"  limit   {who}: {x.limit} {x.value!r} {verb} {x.max!r}")
            for x in d.lost:
                lines.append(f"  lost    {x.tool} {x.path} {x.keyword}: {x.detail}")
        return "\n".join(lines) + "\n"


_NAME_LIMITS = ("name_length", "name_pattern")


def _audit_dialect(dialect: str, specs: Sequence[Any], schema_mode: str) -> DialectAudit:
    part = part_for(dialect)
    cap = capabilities_for(dialect)
    lost: list[Loss] = []
    schemas: list[dict[str, Any]] = []
    declarations: list[dict[str, Any]] = []
    refused = False
    for spec in specs:
        if kind_finding(dialect, spec) is not None:  # a custom tool where there are none: check_limits says so
            schemas.append(spec.input_schema)
            continue
        try:
            declaration, losses = part.declare_tool(spec, strict=False, schema_mode=schema_mode)
        except (SchemaConversionError, StrictSchemaError) as exc:
            refused = True
            keyword = getattr(exc, "keyword", None) or getattr(exc, "construct", "schema")
            lost.append(Loss(tool=spec.name, path=exc.path, keyword=keyword, detail=f"refused: {exc.message}"))
            schemas.append(spec.input_schema)
            continue
        lost.extend(losses)
        declarations.append(declaration)
        schemas.append(part.schema_of(declaration))
    findings = check_limits(dialect, specs, schemas, strict=False, schema_mode=schema_mode,
                            tools_payload=part.tools_in(part.tools_fragment(declarations)))
    renamed: list[Rename] = []
    for spec in specs:
        reasons = [f for f in findings if f.tool == spec.name and f.limit in _NAME_LIMITS]
        if reasons:
            why = "; ".join(f"{f.limit}: {f.value!r} vs {f.max!r}" for f in reasons)
            renamed.append(Rename(tool=spec.name, to=suggest_name(spec.name, cap), reason=why))
    limits = tuple(LimitExceeded(tool=f.tool, limit=f.limit, value=f.value, max=f.max) for f in findings)
    return DialectAudit(ok=not (renamed or limits or refused), renamed=tuple(renamed), lost=tuple(lost),
                        limits=limits)


def audit_tools(tools: Iterable[Any], *, source: str | None = None, dialects: Iterable[str] | None = None,
          schema_mode: str = "json_schema") -> AuditReport:
    """Audit ``tools`` (``Tool``, ``ToolSpec`` or mappings) for every dialect but ``source``.

    ``dialects`` narrows the set; ``schema_mode`` is Gemini's (``json_schema`` as ``declare`` defaults to, or
    ``openapi``). Raises ``UsageError`` for an unknown dialect or mode, ``ToolDeclarationError`` for a malformed
    tool.
    """
    known = [d.id for d in _dialects()]
    if source is not None and source not in known:
        raise UsageError(f"unknown dialect {source!r}; expected one of: {', '.join(known)}")
    if schema_mode not in SCHEMA_MODES:
        raise UsageError(f"schema_mode must be one of {SCHEMA_MODES}, not {schema_mode!r}")
    wanted = list(dialects) if dialects is not None else [d for d in known if d != source]
    for d in wanted:
        part_for(d)
    specs = [as_spec(t) for t in tools]
    return AuditReport(source=source, tools=len(specs),
                       dialects={d: _audit_dialect(d, specs, schema_mode) for d in wanted})
