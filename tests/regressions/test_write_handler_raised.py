"""A write whose handler started and raised may have taken effect: the model is told ``outcome_unknown``, never
"failed ... it could not complete", which invites a retry that runs the write again as a new call.

* A write handler that raises anything but ``ToolError`` (the tool's own answer) or ``OutcomeUnknown`` was
  answered ``handler_failed`` ("could not complete, so there is no result") while ``LoopResult.writes`` and the
  fallback said it may have run. It is ``outcome_unknown`` now, in the result, in ``dispatch.outcome_unknown``,
  and in the ledger's stored result, so a replay says the same.
* A handler that returned a value whose type cannot even be asked (a ``__class__`` that raises, as an unbound
  lazy proxy does) was ``handler_failed`` although it returned: its effect happened. It is ``result_unusable``
  ("it ran and its action took effect").
* An ``idempotency_key`` function that raises never starts the handler: that write is ``not_run`` (it was
  ``handler_failed``, which ``LoopResult.writes`` listed as may-have-run while the text said nothing ran).
* A handler that certifies it did nothing (``HandlerNotStarted``, as the MCP client raises when no session could
  be opened) stays ``handler_failed``.
* Reads keep ``handler_failed``.

Through ``Dispatcher.run`` and ``arun``, sync and async handlers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import Dispatcher, HandlerNotStarted, MemoryLedger, Registry, ResultKind, Tool

from ..bodies import body

K = ResultKind
MODES = ["sync", "async"]


class Proxy:
    @property
    def __class__(self):  # noqa: D401 - what an unbound lazy proxy does
        raise RuntimeError("proxy target gone")


def run(mode: str, d: Dispatcher, name: str, args: dict[str, Any], **kw: Any) -> list[toolwire.ToolResult]:
    turn = toolwire.parse("anthropic", body("anthropic", [("toolu_1", name, args)], response_id="resp_w"))
    if mode == "sync":
        return d.run(turn, conversation_id="c", **kw)
    return asyncio.run(d.arun(turn, conversation_id="c", **kw))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("is_async", [False, True], ids=["sync-handler", "async-handler"])
def test_a_write_that_raised_is_outcome_unknown(mode, is_async, toolwire_debug):
    effects: list[int] = []

    def save(x: int) -> dict:
        """Save x."""
        effects.append(x)
        raise ValueError("the database hiccuped after the commit")

    async def asave(x: int) -> dict:
        """Save x."""
        return save(x)

    ledger = MemoryLedger()
    registry = Registry([Tool.from_function(asave if is_async else save, name="save", effect="write")])
    with capture_logs() as logs:
        [r] = run(mode, Dispatcher(registry, ledger=ledger), "save", {"x": 1})
    assert r.kind is K.OUTCOME_UNKNOWN and r.is_error, (r.kind, r.content)
    assert "may or may not have taken effect" in r.content and "ValueError" in r.content
    events = {e["event"] for e in logs}
    assert "dispatch.outcome_unknown" in events and "dispatch.handler_failed" not in events
    # a restarted dispatcher replays the same answer from the ledger, and nothing runs again
    [again] = run(mode, Dispatcher(registry, ledger=ledger), "save", {"x": 1})
    assert again.kind is K.OUTCOME_UNKNOWN and effects == [1]


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "recording-spans"])
@pytest.mark.parametrize("mode", MODES)
def test_a_write_that_returned_an_unaskable_value_took_effect(mode, traced):
    """Also with an OpenTelemetry SDK recording spans, whose handler wrapper looks at the returned value too."""
    if traced:
        pytest.importorskip("opentelemetry.sdk")
        from .. import otel_support  # noqa: F401 - installs the tests' recording TracerProvider
    effects: list[int] = []

    def save(x: int) -> Any:
        """Save x."""
        effects.append(x)
        return Proxy()

    [r] = run(mode, Dispatcher(Registry([Tool.from_function(save, effect="write")])), "save", {"x": 1})
    assert r.kind is K.RESULT_UNUSABLE, (r.kind, r.content)
    assert effects == [1]


@pytest.mark.parametrize("mode", MODES)
def test_a_write_whose_key_cannot_be_computed_is_not_run(mode):
    effects: list[int] = []

    def save(x: int) -> dict:
        """Save x."""
        effects.append(x)
        return {"saved": x}

    def key(args: dict) -> str:
        raise KeyError("day")

    tool = Tool.from_function(save, effect="write", idempotency_key=key)
    [r] = run(mode, Dispatcher(Registry([tool])), "save", {"x": 1})
    assert r.kind is K.NOT_RUN and effects == [], (r.kind, r.content)


@pytest.mark.parametrize("mode", MODES)
def test_a_write_that_certifies_it_did_nothing_stays_handler_failed(mode):
    def save(x: int) -> dict:
        """Save x."""
        raise HandlerNotStarted("no session could be opened: nothing was sent")

    [r] = run(mode, Dispatcher(Registry([Tool.from_function(save, effect="write")])), "save", {"x": 1})
    assert r.kind is K.HANDLER_FAILED, (r.kind, r.content)


@pytest.mark.parametrize("mode", MODES)
def test_a_read_that_raised_stays_handler_failed(mode):
    def lookup(x: int) -> dict:
        """Look x up."""
        raise ValueError("no")

    d = Dispatcher(Registry([Tool.from_function(lookup, effect="read")]), read_retries=0)
    [r] = run(mode, d, "lookup", {"x": 1})
    assert r.kind is K.HANDLER_FAILED
