"""The public surface of ``toolwire``: ``__all__`` is pinned, errors form one tree, entry points keep their
documented parameters (in the spirit of trio's test_exports)."""

from __future__ import annotations

import inspect

import pytest

import toolwire
import toolwire.errors

#: A copy of ``toolwire.__all__``; changing the public API means changing this list on purpose.
PINNED_ALL = [
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
    "Message",
    "AssistantMessage",
    "CallState",
    "CallKind",
    "FinishReason",
    "Problem",
    "ProblemCode",
    "StreamError",
    "TokenUsage",
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
    "tool",
    "ToolContext",
    "Registry",
    "assert_registry_matches",
    "Dispatcher",
    "ToolResult",
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
    "HandlerSignatureError",
    "ApprovalError",
    "ChoiceError",
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

PUBLIC_EXCEPTIONS = [
    getattr(toolwire, name)
    for name in toolwire.__all__
    if isinstance(getattr(toolwire, name, None), type) and issubclass(getattr(toolwire, name), BaseException)
]


def test_all_names_exist():
    """Every name in toolwire.__all__ is an attribute of the package."""
    missing = [name for name in toolwire.__all__ if not hasattr(toolwire, name)]
    assert missing == []


def test_all_names_unique():
    """toolwire.__all__ lists no name twice."""
    assert len(toolwire.__all__) == len(set(toolwire.__all__))


def test_all_matches_pinned_list():
    """toolwire.__all__ is exactly the pinned public API."""
    assert set(toolwire.__all__) == set(PINNED_ALL)


def test_star_import_gives_exactly_all():
    """`from toolwire import *` binds exactly the names in __all__."""
    namespace: dict = {}
    exec("from toolwire import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == set(toolwire.__all__)


def test_public_classes_and_functions_are_exported():
    """Every public class or function the package namespace exposes from toolwire is listed in __all__."""
    unexported = [
        name
        for name, value in vars(toolwire).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith("toolwire")
        and name not in toolwire.__all__
    ]
    assert unexported == []


def test_public_exceptions_found():
    """The exception set checked below is the documented one (guards against an empty parametrization)."""
    assert {exc.__name__ for exc in PUBLIC_EXCEPTIONS} == {
        "ToolwireError", "UsageError", "HistoryTooLargeError", "ProviderProtocolError", "FramingError",
        "InvalidTransition",
        "ToolDeclarationError", "ToolNameError", "DuplicateToolError", "HandlerSignatureError", "ApprovalError",
        "ChoiceError", "LedgerError",
        "DeclarationLimitError", "ToolChoiceError", "StrictSchemaError", "SchemaConversionError",
        "ToolError", "OutcomeUnknown", "HandlerNotStarted",
    }


@pytest.mark.parametrize("exc", PUBLIC_EXCEPTIONS, ids=lambda e: e.__name__)
def test_public_exceptions_subclass_toolwire_error(exc):
    """Every exception exported by toolwire derives from ToolwireError (itself an Exception)."""
    assert issubclass(exc, toolwire.ToolwireError)
    assert issubclass(exc, Exception)


def test_errors_module_exceptions_subclass_toolwire_error():
    """Every exception class in toolwire.errors.__all__ derives from ToolwireError and is re-exported."""
    for name in toolwire.errors.__all__:
        exc = getattr(toolwire.errors, name)
        assert issubclass(exc, toolwire.ToolwireError)
        assert getattr(toolwire, name) is exc


def test_parse_signature():
    """toolwire.parse accepts provider and data positionally and format/max_message_bytes by keyword."""
    sig = inspect.signature(toolwire.parse)
    params = sig.parameters
    assert list(params)[:2] == ["provider", "data"]
    assert {"provider", "data", "format", "max_message_bytes"} <= set(params)
    assert params["format"].default == "auto"
    sig.bind("anthropic", b"", format="sse")
    sig.bind(provider="anthropic", data=b"", format="json", max_message_bytes=1024)


def test_stream_parser_signature():
    """toolwire.StreamParser accepts provider positionally and format/max_message_bytes by keyword."""
    sig = inspect.signature(toolwire.StreamParser)
    params = sig.parameters
    assert list(params)[0] == "provider"
    assert {"provider", "format", "max_message_bytes"} <= set(params)
    assert params["format"].default == "sse"
    sig.bind("anthropic", format="sse", max_message_bytes=1024)
    sig.bind(provider="openai", format="auto")


def test_documented_parameters_work_at_call_time():
    """Calling parse and StreamParser with the documented keywords runs, and a bad format raises UsageError."""
    turn = toolwire.parse("anthropic", b"", format="sse", max_message_bytes=1 << 20)
    assert turn.provider == "anthropic"
    parser = toolwire.StreamParser("anthropic", format="sse", max_message_bytes=1 << 20)
    parser.close()
    with pytest.raises(toolwire.UsageError):
        toolwire.parse("anthropic", b"", format="nope")
    with pytest.raises(toolwire.UsageError):
        toolwire.StreamParser("anthropic", format="nope")
