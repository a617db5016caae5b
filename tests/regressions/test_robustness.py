"""Robustness: caps with safe defaults and typed errors, for what handlers return and providers send."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import Dispatcher, Registry, ResultKind, Tool, UsageError

from ..bodies import body
from .test_exactly_once import MODES, dispatch

K = ResultKind


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", ["x" * 5000, {"rows": ["é" * 100] * 100}, list(range(3000))])
def test_a_result_over_max_result_bytes_is_cut_with_a_marker(mode, value):
    """A handler's value larger than max_result_bytes reaches the model cut to the limit, with a marker; never
    silently."""
    reg = Registry([Tool.from_function(lambda q: value, name="look", effect="read")])
    turn = toolwire.parse("anthropic", body("anthropic", [("t", "look", {"q": "x"})]))
    with capture_logs() as logs:
        [r] = dispatch(mode, Dispatcher(reg, max_result_bytes=1024), turn, conversation_id="c")
    assert r.kind is K.OK and isinstance(r.content, str)
    assert len(r.content.encode()) <= 1024 and r.content.endswith("the rest is not shown]")
    assert any(e["event"] == "dispatch.result_truncated" for e in logs)
    [small] = dispatch(mode, Dispatcher(reg), toolwire.parse("anthropic", body("anthropic", [("t", "look",
                                                                                              {"q": "x"})])),
                       conversation_id="c")
    assert small.content == value


def test_max_result_bytes_is_validated():
    """max_result_bytes must be an int of at least 256."""
    for bad in (0, 10, "1MB", True, 1.5):
        with pytest.raises(UsageError):
            Dispatcher(Registry([]), max_result_bytes=bad)
