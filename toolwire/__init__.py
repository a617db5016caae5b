"""toolwire: one canonical tool call from every LLM provider dialect, run safely, answered exactly once.

The core is sans-I/O: ``parse(provider, data)`` or ``StreamParser(provider).feed(chunk)`` turn bytes into a
``Turn`` whose calls went through a per-call state machine; no call is ``complete`` before its dialect's
terminator arrived, and a turn that did not finish cleanly is never dispatched.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .audit import AuditReport, audit_tools
from .codecs import PROVIDERS
from .codecs.declare import (
    Approximation,
    Declaration,
    DeclarationLimitError,
    ToolChoice,
    ToolChoiceError,
    ToolSpec,
    declare,
)
from .errors import (
    FramingError,
    HistoryTooLargeError,
    InvalidTransition,
    ProviderProtocolError,
    ToolwireError,
    UsageError,
)
from .parser import StreamParser, parse
from .history import (
    RepairAction,
    RepairKind,
    RepairReport,
    encode_results,
    history_messages,
    remap_call_ids,
    repair_history,
)
from .registry import (
    Approval,
    ApprovalError,
    ApprovalRequest,
    AsyncLedger,
    Decision,
    Dispatcher,
    DuplicateToolError,
    Ledger,
    LedgerError,
    LedgerKey,
    LedgerRecord,
    MemoryLedger,
    PolicyContext,
    PostgresLedger,
    Registry,
    ResultKind,
    SQLiteLedger,
    Tool,
    ToolDeclarationError,
    ToolNameError,
    ToolResult,
    assert_registry_matches,
)
from .schema_tools import (
    Loss,
    SchemaConversionError,
    StrictSchemaError,
    from_strict_arguments,
    gemini_schema,
    strict_schema,
)
from .types import (
    ArgumentsReceived,
    CallAnnounced,
    CallCompleted,
    CallErrored,
    CallKind,
    CallState,
    CallTruncated,
    Choice,
    Event,
    FinishReason,
    Problem,
    ProblemCode,
    ServerCall,
    ServerCallSeen,
    StreamError,
    StreamFailed,
    TextReceived,
    ToolCall,
    Transition,
    Turn,
    TurnFinished,
)

__all__ = [
    "__version__",
    "PROVIDERS",
    "parse",
    "StreamParser",
    # data
    "Turn",
    "ToolCall",
    "Transition",
    "ServerCall",
    "Choice",
    "CallState",
    "CallKind",
    "FinishReason",
    "Problem",
    "ProblemCode",
    "StreamError",
    # events
    "Event",
    "CallAnnounced",
    "ArgumentsReceived",
    "CallCompleted",
    "CallTruncated",
    "CallErrored",
    "ServerCallSeen",
    "TextReceived",
    "TurnFinished",
    "StreamFailed",
    # errors
    "ToolwireError",
    "UsageError",
    "HistoryTooLargeError",
    "ProviderProtocolError",
    "FramingError",
    "InvalidTransition",
    # registry and dispatch
    "Tool",
    "Registry",
    "assert_registry_matches",
    "Dispatcher",
    "ToolResult",
    "ResultKind",
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
    "ApprovalError",
    "LedgerError",
    # results and history
    "encode_results",
    "history_messages",
    "repair_history",
    "remap_call_ids",
    "RepairReport",
    "RepairAction",
    "RepairKind",
    # declarations, tool choice and the portability audit
    "declare",
    "Declaration",
    "ToolSpec",
    "ToolChoice",
    "Approximation",
    "Loss",
    "strict_schema",
    "gemini_schema",
    "from_strict_arguments",
    "audit_tools",
    "AuditReport",
    "DeclarationLimitError",
    "ToolChoiceError",
    "StrictSchemaError",
    "SchemaConversionError",
]
