"""The ``declare`` and ``audit`` subcommands of the ``toolwire`` command line.

``toolwire declare TOOLS.json --provider P [--choice auto|required|none|tool:NAME|allowed:NAME,NAME[:required]]
[--no-parallel] [--strict] [--schema-mode json_schema|openapi]`` prints the request fragment as JSON (``tools``
plus ``tool_choice`` and whatever the dialect needs); losses and approximations go to stderr, one per line.

``toolwire audit TOOLS.json [--from P] [--json] [--schema-mode ...]`` prints, for every other dialect, what gets
renamed, lost or approximated, and which limits are exceeded.

TOOLS.json (or ``-`` for stdin) is a list of canonical tools ``[{"name", "description", "input_schema"}]``, an
MCP ``tools/list`` result ``{"tools": [{"name", "description", "inputSchema"}]}``, or a dialect's tools array.

Exit codes: 0 ok (``audit``: even with findings); 1 TOOLS.json is unusable, or (``declare``) a limit is exceeded
or a schema cannot be expressed (one line on stderr per problem, for every tool); 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .audit import audit_tools
from .codecs import PROVIDERS
from .codecs.declare import (
    SCHEMA_MODES,
    DeclarationLimitError,
    ToolChoice,
    declare,
    load_tools,
)
from .registry.errors import ToolDeclarationError
from .schema_tools import SchemaConversionError, StrictSchemaError

__all__ = ["register"]


class _Unusable(Exception):
    pass


def _load_each(path: str, command: str) -> tuple[list[Any], list[str]]:
    """The tools of ``path`` that load, and one line per tool that does not (every one, not only the first)."""
    try:
        return _load(path, command), []
    except _Unusable as first:
        doc = _DOCS.get(path)
        entries = doc.get("tools") if isinstance(doc, dict) else doc
        if doc is None or not isinstance(entries, list):  # unreadable, not JSON, or no list of tools
            raise
        specs: list[Any] = []
        problems: list[str] = []
        for entry in entries:
            try:
                specs.extend(load_tools([entry]))
            except ToolDeclarationError as err:
                problems.append(f"toolwire {command}: {path}: {err}")
        return specs, problems or [str(first)]


#: documents read by ``_load``, by path (so ``-`` is read once)
_DOCS: dict[str, Any] = {}


def _load(path: str, command: str) -> list[Any]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise _Unusable(f"toolwire {command}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Unusable(f"toolwire {command}: {path} is not JSON: {exc}") from None
    _DOCS[path] = doc
    try:
        return load_tools(doc)
    except ToolDeclarationError as exc:
        raise _Unusable(f"toolwire {command}: {path}: {exc}") from None


def _cmd_declare(args: argparse.Namespace) -> int:
    try:
        specs, problems = _load_each(args.file, "declare")
    except _Unusable as exc:
        print(exc, file=sys.stderr)
        return 1
    for line in problems:  # tools that do not even load; the others are still checked below
        print(line, file=sys.stderr)
    if not specs:
        return 1
    parallel = False if args.no_parallel else None
    choice = ToolChoice.parse(args.choice, parallel=parallel)  # ToolChoiceError is a UsageError: exit 2
    try:
        result = declare(args.provider, specs, choice=choice, strict=args.strict, schema_mode=args.schema_mode)
    except DeclarationLimitError as exc:
        for finding in exc.findings:
            print(f"toolwire declare: {finding.describe()}", file=sys.stderr)
        return 1
    except (StrictSchemaError, SchemaConversionError) as exc:  # every tool's refusal, then the limits broken
        for refusal in exc.errors:
            print(f"toolwire declare: {args.provider}: {refusal.message}", file=sys.stderr)
        for finding in exc.findings:
            print(f"toolwire declare: {finding.describe()}", file=sys.stderr)
        return 1
    except ToolDeclarationError as exc:
        print(f"toolwire declare: {exc}", file=sys.stderr)
        return 1
    if problems:
        return 1
    for loss in result.losses:
        print(f"toolwire declare: lost: {loss.tool} {loss.path} {loss.keyword}: {loss.detail}", file=sys.stderr)
    for warning in result.warnings:
        print(f"toolwire declare: approximated ({warning.code}): {warning.detail}", file=sys.stderr)
    sys.stdout.write(json.dumps(result.fragment, ensure_ascii=False, indent=2) + "\n")
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    try:
        specs = _load(args.file, "audit")
    except _Unusable as exc:
        print(exc, file=sys.stderr)
        return 1
    report = audit_tools(specs, source=args.source, schema_mode=args.schema_mode)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(report.to_text())
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``declare`` and ``audit`` to the subcommands ``sub`` (``common`` holds the logging options)."""
    dialects = ", ".join(PROVIDERS)
    pd = sub.add_parser("declare", parents=[common],
                        help="print the request fragment (tools, tool_choice, …) declaring TOOLS.json for a provider")
    pd.add_argument("file", metavar="TOOLS.json", help="canonical tools, an MCP tools/list result, or - for stdin")
    pd.add_argument("--provider", required=True, metavar="P", help=f"dialect to declare for: {dialects}")
    pd.add_argument("--choice", default="auto", metavar="CHOICE",
                    help="auto (default), required, none, tool:NAME, allowed:NAME,NAME[:required]")
    pd.add_argument("--no-parallel", action="store_true", help="forbid several tool calls in one turn")
    pd.add_argument("--strict", action="store_true",
                    help="constrain arguments to the schema (OpenAI: strict schema rewrite; Gemini: VALIDATED)")
    pd.add_argument("--schema-mode", default="json_schema", choices=SCHEMA_MODES,
                    help="gemini only: json_schema (a JSON Schema, default) or openapi (Google's OpenAPI subset)")
    pd.set_defaults(func=_cmd_declare)

    pa = sub.add_parser("audit", parents=[common],
                        help="report what each other dialect renames, loses or refuses in TOOLS.json")
    pa.add_argument("file", metavar="TOOLS.json", help="canonical tools, an MCP tools/list result, or - for stdin")
    pa.add_argument("--from", dest="source", default=None, choices=tuple(PROVIDERS), metavar="P",
                    help=f"the dialect the tools were written for (left out of the report): {dialects}")
    pa.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    pa.add_argument("--schema-mode", default="json_schema", choices=SCHEMA_MODES,
                    help="how gemini is audited: json_schema (default) or openapi")
    pa.set_defaults(func=_cmd_audit)
