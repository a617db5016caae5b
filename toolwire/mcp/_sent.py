"""The calls an MCP server may have run, so that no retry sends them again.

The dispatcher runs a read's handler again after it raised (``read_retries``). An MCP handler raises
``OutcomeUnknown`` when its ``tools/call`` reached the server and may have run there (the server died during the
call, answered with an error that does not say "not run", or with nothing readable): sending it again could take
its effect a second time, and a server's ``readOnlyHint`` is only its claim. So the handler remembers such a call
by its instance (the ``ToolContext`` the dispatcher passes: conversation, call ids, and the very argument object
of the call) and answers a later attempt of the same instance with the same ``OutcomeUnknown``, without sending
anything. A call that was never sent (no session could be opened) is not remembered: its retry is sent.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .. import _log
from ..registry.content import OutcomeUnknown
from ..registry.context import ToolContext

__all__ = ["SentCalls"]

#: call instances remembered at once; far more than one dispatcher's reads can retry within their backoff
_REMEMBERED = 4096


class SentCalls:
    """Call instances whose ``tools/call`` may have run on the server (bounded, oldest forgotten first)."""

    def __init__(self, server: str) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._calls: OrderedDict[tuple[str, str | None, str, int], tuple[Any, str]] = OrderedDict()

    @staticmethod
    def _key(ctx: ToolContext, args: Any) -> tuple[str, str | None, str, int]:
        return ctx.conversation_id, ctx.call_id, ctx.local_id, id(args)

    def check(self, ctx: ToolContext | None, args: Any, tool: str) -> None:
        """Raise ``OutcomeUnknown`` when an earlier attempt of this call instance may have run on the server;
        the first attempt forgets whatever an earlier call of the same ids left."""
        if ctx is None:
            return
        key = self._key(ctx, args)
        with self._lock:
            if ctx.attempt <= 1:
                self._calls.pop(key, None)
                return
            held = self._calls.get(key)
        if held is None or held[0] is not args:
            return
        _log.emit(_log.INFO, "mcp.call_not_resent", server=self._server, tool=tool, attempt=ctx.attempt)
        raise OutcomeUnknown(f"{held[1]}; it was not sent again")

    def remember(self, ctx: ToolContext | None, args: Any, exc: OutcomeUnknown) -> None:
        """The attempt of ``ctx`` raised ``exc``: the call may have run on the server."""
        if ctx is None:
            return
        key = self._key(ctx, args)
        with self._lock:
            self._calls[key] = (args, str(getattr(exc, "reason", exc)))
            self._calls.move_to_end(key)
            while len(self._calls) > _REMEMBERED:
                self._calls.popitem(last=False)
