"""MCP tools through the dispatcher and every dialect's ``encode_results``: rich results, isError as a
tool_error under the call's own id, a crash answered per effect and never run again (sync ``run`` and async
``arun``, against the real test server over stdio)."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("mcp")

import toolwire  # noqa: E402
from toolwire import Dispatcher, ImagePart, Registry, ResultKind, SQLiteLedger, TextPart  # noqa: E402
from toolwire.codecs import PROVIDERS  # noqa: E402

from .bodies import body  # noqa: E402
from .mcp_helpers import stdio  # noqa: E402
from .test_mcp import result_text  # noqa: E402

CALLS = [("echo", {"text": "hi there"}), ("image", {}), ("resources", {}), ("structured", {}), ("fails", {})]


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """One test server for the module: its tools with blocking handlers and with async handlers."""
    with stdio(tmp_path_factory.mktemp("mcp") / "state") as server:
        yield {"run": Registry(server.tools()), "arun": Registry(asyncio.run(server.atools()))}


def run(registry: Registry, turn: toolwire.Turn, mode: str, **options):
    dispatcher = Dispatcher(registry, **options)
    if mode == "arun":
        return asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    return dispatcher.run(turn, conversation_id="c")


def parse(provider: str, calls) -> toolwire.Turn:
    return toolwire.parse(provider, body(provider, [(f"call_{i}", n, a) for i, (n, a) in enumerate(calls)]))


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_mcp_results_are_answered_and_encoded_in_every_dialect(registries, provider, mode):
    """Text, an image, resources and structured content are ok with typed parts; isError is tool_error with the
    server's text under the call's own id; encode_results answers every call in the dialect's own form."""
    turn = parse(provider, CALLS)
    results = run(registries[mode], turn, mode)
    assert [r.kind for r in results] == [ResultKind.OK] * 4 + [ResultKind.TOOL_ERROR]
    assert [r.call_id for r in results] == [c.call_id for c in turn.calls]
    assert result_text(results[0]) == "hi there"
    assert ImagePart in {type(p) for p in results[1].parts or []}
    assert results[3].content == {"celsius": 21.5}
    assert results[4].is_error and "unplugged" in result_text(results[4])
    encoded = json.dumps(toolwire.encode_results(turn, results), ensure_ascii=False)
    assert "hi there" in encoded and "unplugged" in encoded
    assert all(c.call_id in encoded for c in turn.calls if c.call_id)


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_write_whose_server_crashes_is_outcome_unknown_and_never_run_again(tmp_path, mode):
    """crash_write takes effect and kills the server: outcome_unknown, the ledger row stays started, and the
    same turn dispatched again (a new dispatcher on the same ledger) runs nothing: one effect."""
    ledger = tmp_path / "ledger.db"
    with stdio(tmp_path / "state") as server:
        registry = Registry(server.tools() if mode == "run" else asyncio.run(server.atools()))
        turn = parse("anthropic", [("crash_write", {})])
        first = run(registry, turn, mode, ledger=SQLiteLedger(ledger))
        again = run(registry, turn, mode, ledger=SQLiteLedger(ledger))
        assert [r.kind for r in first] == [r.kind for r in again] == [ResultKind.OUTCOME_UNKNOWN]
        count = Registry(server.tools())["count"].invoke({})
    assert count.parts == [TextPart(text="1")]


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_read_whose_server_crashes_is_handler_failed_and_the_next_turn_works(tmp_path, mode):
    """crash (a read, its readOnlyHint trusted) kills the server: handler_failed; the next turn's call opens a new
    session and is ok."""
    with stdio(tmp_path / "state") as server:
        registry = Registry(server.tools(trust_read_only=True) if mode == "run"
                            else asyncio.run(server.atools(trust_read_only=True)))
        results = run(registry, parse("openai-responses", [("crash", {})]), mode)
        assert [r.kind for r in results] == [ResultKind.HANDLER_FAILED]
        after = run(registry, parse("openai-responses", [("echo", {"text": "again"})]), mode)
        assert [r.kind for r in after] == [ResultKind.OK] and result_text(after[0]) == "again"
