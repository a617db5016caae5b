"""Tool declarations, the closed registry, validation, authorization, the idempotency ledger and dispatch.

``Tool`` declares a tool (``from_function``, ``from_schema``, ``from_mcp``; the decorator ``tool(effect=...)``
is ``from_function``); ``Registry`` is the closed, frozen set a ``Dispatcher`` runs calls through; ``ToolResult``
answers each call; ``SQLiteLedger`` or ``PostgresLedger`` (or any ``Ledger``, with ``AsyncLedger`` as its optional
async part) keeps writes to one effect; ``Decision``, ``ApprovalRequest`` and ``Approval`` carry authorization; a
handler that declares a ``ToolContext`` parameter is told which call it runs for. ``PostgresLedger`` needs the
``pg`` extra only when constructed.

The decorator's name ``tool`` hides the submodule ``toolwire.registry.tool`` as an attribute of this package:
``from toolwire.registry.tool import ...`` still reads the module.
"""

from .approval import Approval, ApprovalRequest, Decision, PolicyContext, arguments_sha256, canonical_arguments
from .content import AudioPart, Content, HandlerNotStarted, ImagePart, LinkPart, OutcomeUnknown, Part, ResourcePart, TextPart, ToolError
from .context import ToolContext
from .dispatch import Dispatcher, Policy
from .decorator import tool
from .errors import (
    ApprovalError,
    ChoiceError,
    DuplicateToolError,
    HandlerSignatureError,
    LedgerError,
    ToolDeclarationError,
    ToolNameError,
)
from .ledger import AsyncLedger, Ledger, LedgerKey, LedgerRecord, MemoryLedger, SQLiteLedger
from .pg_ledger import PostgresLedger
from .registry import Registry, assert_registry_matches
from .result import ResultKind, ToolResult
from .formats import FORMAT_CHECK_MAX_CHARS
from .tool import DEFAULT_TIMEOUT, NAME_PATTERN, NAME_RULE, Tool, check_tool_name

__all__ = [
    "Tool",
    "tool",
    "ToolContext",
    "Registry",
    "assert_registry_matches",
    "Dispatcher",
    "Policy",
    "ToolResult",
    "ResultKind",
    "Content",
    "Part",
    "TextPart",
    "ImagePart",
    "AudioPart",
    "ResourcePart",
    "LinkPart",
    "ToolError",
    "OutcomeUnknown",
    "HandlerNotStarted",
    "Decision",
    "PolicyContext",
    "ApprovalRequest",
    "Approval",
    "Ledger",
    "AsyncLedger",
    "LedgerKey",
    "LedgerRecord",
    "MemoryLedger",
    "SQLiteLedger",
    "PostgresLedger",
    "ToolDeclarationError",
    "ToolNameError",
    "DuplicateToolError",
    "HandlerSignatureError",
    "ApprovalError",
    "ChoiceError",
    "LedgerError",
    "arguments_sha256",
    "canonical_arguments",
    "check_tool_name",
    "NAME_PATTERN",
    "NAME_RULE",
    "DEFAULT_TIMEOUT",
    "FORMAT_CHECK_MAX_CHARS",
]
