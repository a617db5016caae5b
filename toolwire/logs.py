"""The structured-log catalogue, and a helper that sets up structlog for applications.

toolwire never configures logging on import. ``configure_logging()`` is for applications (and the CLI) that
want toolwire's events printed: JSON lines for production, a console renderer for development.

Every event toolwire emits is listed in ``CATALOGUE`` (name → level, keys, when); a test checks that every
``_log.emit`` call in the package names a catalogued event and that emitted events carry exactly the
documented keys. Argument values are never logged unless the application opts in (``log_arguments=True``:
they can hold personal data); API keys and authorization headers never are.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, NamedTuple, TextIO

import structlog

from . import _log
from .errors import UsageError

__all__ = ["CATALOGUE", "EventSpec", "configure_logging", "redact_secrets"]


class EventSpec(NamedTuple):
    level: str
    keys: frozenset[str]
    when: str


def _spec(level: str, keys: str, when: str) -> EventSpec:
    return EventSpec(level, frozenset(keys.split()), when)


#: Every structlog event toolwire emits.
CATALOGUE: dict[str, EventSpec] = {
    "call.transition": _spec(
        "debug", "provider call_id local_id name src dst trigger position",
        "every state transition of a call (position: the payload that caused it, or null)"),
    "call.invalid_transition": _spec(
        "warning", "provider call_id local_id name state trigger",
        "a trigger fired in a state that forbids it (InvalidTransition is raised, or the call is errored)"),
    "call.parsed": _spec(
        "info", "provider call_id local_id name state problem fragments bytes",
        "once per call when its stream is closed, with its final state (plus `arguments` if opted in)"),
    "stream.error": _spec(
        "warning", "provider type message position",
        "the provider reported an error in the stream, sent something unusable, or the stream was cut"),
    "payload.failed": _spec(
        "warning", "error position provider",
        "a payload made the codec fail in an unforeseen way: a protocol error on the turn (the error type is named)"),
    "payload.skipped": _spec(
        "debug", "provider reason type position",
        "a payload of a type toolwire does not know (providers add event types) was skipped"),
    "dispatch.result": _spec(
        "info", "call_id conversation_id local_id name provider attempts duration_ms effect kind",
        "once per dispatched call, with its result kind (ok, tool_error, handler_failed …)"),
    "dispatch.unclean_turn": _spec(
        "warning", "allow_unclean calls conversation_id error finish_reason provider",
        "a turn that did not finish cleanly was refused as a whole (nothing ran)"),
    "dispatch.unknown_tool": _spec(
        "warning", "call_id conversation_id local_id name provider",
        "a call named a tool the registry does not have (answered unknown_tool, nothing ran)"),
    "dispatch.invalid_arguments": _spec(
        "info", "call_id conversation_id local_id name provider path problem",
        "arguments did not parse or failed the schema (answered invalid_arguments)"),
    "dispatch.invalid_arguments_detail": _spec(
        "debug", "call_id conversation_id local_id name provider message",
        "the validator's full message for invalid arguments (it quotes argument values: only with log_arguments)"),
    "dispatch.answered_before": _spec(
        "info", "call_id conversation_id local_id name provider kind",
        "a call instance this dispatcher already answered was dispatched again: the same answer, nothing runs"),
    "dispatch.choice_refused": _spec(
        "warning", "choice conversation_id dispatched provider",
        "another choice of a response already dispatched was asked for: ChoiceError, nothing of it ran"),
    "dispatch.result_truncated": _spec(
        "warning", "call_id conversation_id limit local_id name provider size",
        "a handler's value was larger than max_result_bytes: the model gets it cut, with a marker saying so"),
    "dispatch.turn_unidentified": _spec(
        "warning", "calls conversation_id provider",
        "a turn with no response id was dispatched without turn_id: its calls are keyed to this Turn object only"),
    "dispatch.idempotency_key_error": _spec(
        "error", "call_id conversation_id local_id name provider error",
        "a write's idempotency_key function raised or returned no string; the call is answered, nothing ran"),
    "dispatch.denied": _spec(
        "info", "call_id conversation_id local_id name provider reason",
        "the authorization policy denied a call"),
    "dispatch.policy_error": _spec(
        "error", "call_id conversation_id local_id name provider error",
        "the policy hook raised; the call is denied"),
    "dispatch.approval_required": _spec(
        "info", "call_id conversation_id local_id name provider args_sha256 reason",
        "a call needs an approval and was deferred"),
    "dispatch.approved": _spec(
        "info", "approver args_sha256 call_id conversation_id local_id name",
        "an approval token was issued for a deferred call"),
    "dispatch.approval_accepted": _spec(
        "info", "approver call_id conversation_id local_id name",
        "a valid approval resumed a deferred call"),
    "dispatch.approval_invalid": _spec(
        "warning", "call_id conversation_id local_id name reason where",
        "an approval did not match its call (forged, other arguments, other call or turn), expired, or was used"),
    "dispatch.handler_failed": _spec(
        "warning", "call_id conversation_id local_id name provider attempt effect error will_retry",
        "a handler raised"),
    "dispatch.tool_error": _spec(
        "info", "call_id conversation_id local_id name provider attempt effect",
        "a handler raised ToolError: the tool answered with an error (answered tool_error, never retried)"),
    "dispatch.content_invalid": _spec(
        "warning", "call_id conversation_id local_id name provider reason",
        "a handler answered with Content that cannot be sent (bad base64, a MIME type of the wrong kind, …): "
        "answered result_unusable; `reason` quotes no value"),
    "dispatch.retry": _spec(
        "info", "call_id conversation_id local_id name provider attempt delay",
        "a read is retried after a failure"),
    "dispatch.handler_timeout": _spec(
        "warning", "call_id conversation_id local_id name provider attempt effect timeout",
        "a handler ran past its timeout"),
    "dispatch.outcome_unknown": _spec(
        "warning", "call_id conversation_id local_id name provider reason error",
        "a write was started before and never confirmed, or its handler raised (reason handler_raised; error: "
        "the exception's type, unless it was OutcomeUnknown): nothing runs again"),
    "dispatch.ledger_replay": _spec(
        "info", "call_id conversation_id local_id name provider kind",
        "a write already completed: its stored result is returned, nothing runs"),
    "dispatch.ledger_conflict": _spec(
        "error", "call_id conversation_id local_id name provider status",
        "the ledger holds another call under this key"),
    "dispatch.ledger_error": _spec(
        "error", "call_id conversation_id local_id name provider error op",
        "the ledger could not be read or written"),
    "ledger.retry": _spec(
        "warning", "attempt delay error ledger op",
        "a PostgresLedger operation failed on its connection (server restarting, unreachable) and is retried"),
    "dispatch.result_not_json": _spec(
        "warning", "call_id conversation_id local_id name provider type",
        "a handler returned a value that is not JSON-serialisable; it is sent as text"),
    "http.error": _spec(
        "warning", "body provider retry_after status transient type url",
        "a model request failed: an HTTP error status or a network failure (the body excerpt has keys redacted; headers are never logged)"),
    "http.unreadable_body": _spec(
        "warning", "body error provider status transient type url",
        "a 2xx response body could not be parsed (a message over the size cap, bytes after the JSON body, "
        "nesting too deep, an encoding that does not decode): `error` is the parser's reason, `body` the start "
        "of the body, keys redacted"),
    "otel.failed": _spec(
        "warning", "stage error",
        "the application's tracer provider or span processor raised (stage: get_tracer, start, event, finish, "
        "end): the span is dropped or left as it is, the dispatch or the conversation goes on"),
    "loop.start": _spec(
        "info", "conversation_id provider steps",
        "a conversation turn starts (the user's prompt was added to the history)"),
    "loop.request": _spec(
        "info", "conversation_id provider attempt step",
        "one attempt of a model request"),
    "loop.retry": _spec(
        "info", "conversation_id provider attempt delay status step type",
        "a failed attempt will be retried after `delay` seconds"),
    "loop.turn": _spec(
        "info", "conversation_id provider calls finish_reason step",
        "a model turn was parsed and accepted"),
    "loop.turn_rejected": _spec(
        "warning", "attempt conversation_id finish_reason provider step transient type",
        "a parsed turn cannot be used (an error, a cut, a token limit, a filter or refusal, another unclean "
        "ending, no calls and no text): it is retried or ends in the fallback (`type` says why, `finish_reason` "
        "is the provider's own)"),
    "loop.answer": _spec(
        "info", "conversation_id provider calls steps",
        "the model answered without calls: the conversation turn is over"),
    "loop.fallback": _spec(
        "warning", "conversation_id provider error_type reason status",
        "the user gets the localized fallback message (why, and the technical cause)"),
    "durable.prompt_started": _spec(
        "info", "conversation_id executor_id loop recovered workflow_id",
        "a worker starts (or, `recovered`: resumes after a crash) a durable prompt workflow (`executor_id`: the "
        "DBOS executor running it)"),
    "durable.prompt_finished": _spec(
        "info", "conversation_id executor_id fallback loop workflow_id",
        "a durable prompt workflow finished on this worker (with the model's answer, or the fallback)"),
    "durable.recovered_lost": _spec(
        "warning", "action application_version executor_id to_version unseen_seconds workflow_id",
        "`recover_lost` / `toolwire durable recover` handed a lost executor's conversation back to a queue "
        "(`action`: `requeued`, `moved`, `taken`)"),
    "durable.recovery_limit_reached": _spec(
        "error", "workflow_id",
        "`result_of(handle)` found a conversation DBOS ended after `max_recovery_attempts` (raises "
        "`RecoveryLimitReached`)"),
    "durable.heartbeat_failed": _spec(
        "warning", "error executor_id",
        "a `Heartbeat` could not write its row (retried at the next interval)"),
    "mcp.connected": _spec(
        "info", "attempt generation protocol server",
        "a session with an MCP server was opened (`generation` counts the sessions; above 1 after a reconnection)"),
    "mcp.connect_failed": _spec(
        "warning", "attempt error server",
        "one try to open a session with an MCP server failed (the server could not be started or reached, or its "
        "handshake failed)"),
    "mcp.disconnected": _spec(
        "warning", "generation reason server",
        "an MCP server's connection broke (its process exited, its HTTP server went away): the next call opens "
        "a new session"),
    "mcp.call_timeout": _spec(
        "warning", "server timeout tool",
        "an MCP tools/call was not answered in time: the request is cancelled and the server is pinged"),
    "mcp.call_cancelled": _spec(
        "info", "server tool",
        "the caller gave up on an MCP tools/call (the dispatcher's timeout for an async handler, a cancelled task): "
        "the request is cancelled and the server is pinged"),
    "mcp.call_not_resent": _spec(
        "info", "attempt server tool",
        "a retry of an MCP tools/call that may already have run on the server (the server died during it, or "
        "answered with an error that does not say \"not run\") was not sent again: answered as the first attempt"),
    "mcp.session_reset": _spec(
        "warning", "generation reason server",
        "an MCP server left a call unanswered and did not answer a ping either: its session is stopped (a stdio "
        "server's process too) and the next call opens a new one"),
    "mcp.tools_changed": _spec(
        "info", "generation server",
        "an MCP server said its tool list changed (or came back from a restart with other tools); once until the "
        "next listing, however many notifications it sends"),
    "mcp.message_too_large": _spec(
        "warning", "limit server",
        "a message of an MCP server was larger than max_message_bytes: over stdio the connection is ended (the call "
        "in flight is answered as after a crash), over HTTP that answer's call fails"),
    "mcp.unreadable_message": _spec(
        "warning", "count server error",
        "a stdio MCP server wrote a line that is not a JSON-RPC message (left out; logged at the 1st, 10th, "
        "100th … of a connection, `count` so far)"),
    "mcp.process_left_behind": _spec(
        "warning", "pids server",
        "a stopped stdio MCP server's output was still held open by processes it left behind (in its process "
        "group, or out of it): they were killed"),
    "mcp.listen_ended": _spec(
        "debug", "generation reason server",
        "the subscriptions/listen stream for tool-list changes ended (a server that does not serve it, or a lost "
        "connection)"),
    "mcp.tools_listed": _spec(
        "info", "server skipped tools",
        "an MCP server's tools were listed and built (`tools` taken, `skipped` left out)"),
    "mcp.tool_skipped": _spec(
        "warning", "detail reason server tool",
        "a tool of an MCP server was left out: a name or schema a provider refuses, or a name listed twice"),
    "mcp.effect_unused": _spec(
        "warning", "server tool",
        "an effect was given for a tool name the MCP server does not list (a typo leaves the server's hint in force)"),
    "mcp.on_change_failed": _spec(
        "error", "error server",
        "the application's on_change callback raised"),
    "loop.history_repaired": _spec(
        "warning", "actions conversation_id provider",
        "a history passed in to resume a conversation had to be repaired (the kinds of what changed)"),
}

_SECRET_KEYS = frozenset({"api_key", "authorization", "x-api-key", "x-goog-api-key", "proxy-authorization",
                          "openai_api_key", "anthropic_api_key", "gemini_api_key", "google_api_key", "headers"})


def redact_secrets(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: replace the values of secret-bearing keys (api keys, auth headers) by ``[redacted]``."""
    for key in list(event_dict):
        if key.lower() in _SECRET_KEYS:
            value = event_dict[key]
            if key.lower() == "headers" and isinstance(value, dict):
                event_dict[key] = {k: ("[redacted]" if k.lower() in _SECRET_KEYS else v) for k, v in value.items()}
            else:
                event_dict[key] = "[redacted]"
    return event_dict


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(format: str = "console", level: str = "info", *, stream: TextIO | None = None,
                      log_arguments: bool = False) -> None:
    """Print toolwire's events: ``format`` "json" (one JSON object per line) or "console"; ``level`` one of
    debug, info, warning, error; to ``stream`` (default stderr). ``log_arguments`` adds argument values to
    ``call.parsed`` (off by default: they can hold personal data).

    This configures structlog globally; call it from an application, never from a library. Raises
    ``UsageError`` for an unknown format or level.
    """
    if format not in ("json", "console"):
        raise UsageError(f"unknown log format {format!r}; expected json or console")
    if level not in _LEVELS:
        raise UsageError(f"unknown log level {level!r}; expected one of: {', '.join(_LEVELS)}")
    renderer: Any
    if format == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    _log.stdlib_logger.setLevel(_LEVELS[level])
    _log.LOG_ARGUMENTS = log_arguments
