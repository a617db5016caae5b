"""Handlers under a timeout run on long-lived pool threads: stuck handlers are answered ``handler_timeout``, never
block the caller or the interpreter's exit, and never exhaust the pool; concurrent reads keep their retries, their
per-attempt deadlines and their call order; the async path shares the pool."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import textwrap
import threading

import pytest

import toolwire
from toolwire import Dispatcher, Registry, Tool
from toolwire.registry import dispatch

from .tools_demo import anthropic_turn

CTX: contextvars.ContextVar[str] = contextvars.ContextVar("handoff_ctx", default="unset")


def _turn(*names: str, message_id: str = "msg_1") -> toolwire.Turn:
    return anthropic_turn(*((f"toolu_{i}", name, "{}") for i, name in enumerate(names)), message_id=message_id)


def _kinds(results: list[toolwire.ToolResult]) -> list[str]:
    return [r.kind.value for r in results]


@pytest.fixture
def stuck():
    """An event the stuck handlers wait for; set at the end so their threads go back to the pool."""
    release = threading.Event()
    yield release
    release.set()


def _registry(release: threading.Event, timeout: float = 0.2) -> Registry:
    def stuck(args):
        release.wait(60)
        return "late"

    def fine(args):
        return CTX.get()

    return Registry([Tool.from_schema("stuck", {"type": "object"}, stuck, effect="read", timeout=timeout),
                     Tool.from_schema("fine", {"type": "object"}, fine, effect="read", timeout=5.0)])


@pytest.mark.parametrize("concurrent", [True, False])
def test_many_stuck_handlers_are_answered_and_the_pool_still_runs_the_next_calls(stuck, concurrent):
    """40 handlers stuck past their timeout (more than max_workers, and all at once): each is handler_timeout, and
    the calls after them, in the same turn and in the next one, still run: a stuck thread is replaced."""
    d = Dispatcher(_registry(stuck), concurrent_reads=concurrent, max_workers=8)
    results = d.run(_turn(*["stuck"] * 40), conversation_id="c")
    assert _kinds(results) == ["handler_timeout"] * 40
    token = CTX.set("after")
    try:
        again = d.run(_turn("fine", "stuck", "fine", message_id="msg_2"), conversation_id="c")
    finally:
        CTX.reset(token)
    assert _kinds(again) == ["ok", "handler_timeout", "ok"]
    assert [again[0].content, again[2].content] == ["after", "after"]


def test_concurrent_reads_mix_stuck_failing_and_fine_calls_in_call_order(stuck):
    """One turn of concurrent reads: a stuck call, a call that fails once then answers (retried after its
    backoff), a call that always fails and fine calls: each gets its own answer, in call order, with the caller's
    context variables."""
    attempts: list[str] = []

    def flaky(args):
        attempts.append("flaky")
        if attempts.count("flaky") == 1:
            raise ConnectionError("once")
        return CTX.get()

    def broken(args):
        attempts.append("broken")
        raise ConnectionError("always")

    reg = Registry([*_registry(stuck), Tool.from_schema("flaky", {"type": "object"}, flaky, effect="read"),
                    Tool.from_schema("broken", {"type": "object"}, broken, effect="read")])
    token = CTX.set("req-7")
    try:
        results = Dispatcher(reg, read_retries=2, backoff=0.01, max_workers=2).run(
            _turn("fine", "stuck", "flaky", "broken", "fine"), conversation_id="c")
    finally:
        CTX.reset(token)
    assert _kinds(results) == ["ok", "handler_timeout", "ok", "handler_failed", "ok"]
    assert [results[0].content, results[2].content, results[4].content] == ["req-7"] * 3
    assert attempts.count("flaky") == 2 and attempts.count("broken") == 3


def test_a_late_answer_after_the_timeout_changes_nothing(stuck):
    """The answer a timed-out handler gives later is ignored: the result stays handler_timeout."""
    d = Dispatcher(_registry(stuck), max_workers=1)
    results = d.run(_turn("stuck", "fine", "stuck"), conversation_id="c")
    stuck.set()
    assert _kinds(results) == ["handler_timeout", "ok", "handler_timeout"]
    again = d.run(_turn("stuck", "fine", "stuck"), conversation_id="c")  # the same instances: answered before
    assert _kinds(again) == ["handler_timeout", "ok", "handler_timeout"]


def test_arun_sync_handlers_use_the_pool_and_time_out(stuck):
    """arun: sync handlers under a timeout run on the pool in the task's context; a stuck one is handler_timeout."""
    async def main() -> list[toolwire.ToolResult]:
        CTX.set("task")
        return await Dispatcher(_registry(stuck)).arun(_turn("fine", "stuck", "fine"), conversation_id="c")

    results = asyncio.run(main())
    assert _kinds(results) == ["ok", "handler_timeout", "ok"]
    assert [results[0].content, results[2].content] == ["task", "task"]


def test_idle_pool_threads_are_capped():
    """After a burst of handlers that all came back, at most max_idle pool threads stay waiting for work."""
    pool = dispatch._DaemonPool(max_idle=2)
    release = threading.Event()
    answered = []
    jobs = [dispatch._Job(lambda: release.wait(60), 5.0, answered.append) for _ in range(6)]
    for job in jobs:
        pool.submit(job)
    release.set()
    for job in jobs:  # every job answered
        while job not in answered:
            threading.Event().wait(0.01)
    assert pool._idle <= 2


def test_a_stuck_handler_does_not_keep_the_interpreter_alive():
    """A process whose handler is stuck forever exits once its dispatch answered handler_timeout."""
    code = textwrap.dedent("""
        import threading, toolwire
        from tests.tools_demo import anthropic_turn
        def stuck(args):
            threading.Event().wait()
        reg = toolwire.Registry([toolwire.Tool.from_schema("stuck", {"type": "object"}, stuck, effect="read",
                                                           timeout=0.1)])
        for concurrent in (True, False):
            turn = anthropic_turn(("a", "stuck", "{}"), ("b", "stuck", "{}"), message_id=str(concurrent))
            results = toolwire.Dispatcher(reg, concurrent_reads=concurrent).run(turn, conversation_id="c")
            assert [r.kind.value for r in results] == ["handler_timeout"] * 2, results
        print("answered")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "answered"
