"""The dialect record: everything toolwire knows about one provider dialect, reached from one place.

A dialect module of ``toolwire.codecs`` (a module or subpackage whose name does not start with ``_``) defines
``DIALECT = Dialect(...)``; ``toolwire.codecs.dialects()`` finds every one of them, so adding a dialect means
writing its module(s) and editing no list. Everything else asks the registry: ``dialects()``,
``dialect_for(id)``, ``dialects_with("http")``, ``dialects_with("sim")``.

The parts of a record, each with a documented interface:

* ``codec``: the ``Codec`` subclass that reads the dialect's responses (``toolwire.codecs.base``: the contract a
  codec meets is in ``Codec``'s docstring), and through ``Codec.framing`` how a streamed body is framed;
* ``declarations``: a ``Declarations`` (``toolwire.codecs.declare``): tool declarations and the tool choice, and
  where both go in a request body;
* ``results``: a ``Results`` (``toolwire.codecs.results``): the answer to a turn's calls, the replay of the
  assistant message, the repair of a stored history, and the history entry of a user's prompt;
* ``capabilities``: the ``Capabilities`` record (``toolwire.codecs.capabilities``): limits and error classes as
  data;
* ``http`` (optional): an ``HTTP`` (``toolwire.codecs.requests``): endpoints, auth headers and their environment
  variables, request bodies, request options, error bodies, and the names the tracing conventions give it;
  without it the dialect is parsed, declared and answered, but the harness loop cannot call it;
* ``sim`` (optional): where the simulated provider's part for the dialect lives, as ``"module:attribute"``,
  imported only when the simulator asks for it (``import toolwire`` never imports ``toolwire.sim``). The part
  follows ``toolwire.sim._base.Dialect``.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # pragma: no cover
    from .base import Codec
    from .capabilities import Capabilities
    from .declare._part import Declarations
    from .requests import HTTP
    from .results._part import Results

__all__ = ["Dialect", "PARTS"]

#: the optional parts ``dialects_with`` selects on
PARTS = ("http", "sim")

_SIM_PARTS: dict[str, Any] = {}
_SIM_LOCK = threading.RLock()  # re-entrant: importing the simulator asks for every part


class Dialect(msgspec.Struct, frozen=True, kw_only=True):
    """One dialect: its id (``Turn.provider``), its parts, and ``order``, its place in every list of dialects
    (``toolwire.PROVIDERS``, the command line's help, the demo, the audit): ascending, then by id."""

    id: str
    codec: type[Codec]
    declarations: Declarations
    results: Results
    capabilities: Capabilities
    http: HTTP | None = None
    sim: str | None = None
    order: int = 1000

    def simulator(self) -> Any:
        """The simulated provider's part for this dialect (imported and made once), or None without one."""
        if self.sim is None:
            return None
        with _SIM_LOCK:
            part = _SIM_PARTS.get(self.id)
            if part is None:
                module, _, name = self.sim.partition(":")
                cls = getattr(importlib.import_module(module), name)
                part = _SIM_PARTS.get(self.id)  # the import may have made it (the simulator's own list)
                if part is None:
                    part = _SIM_PARTS[self.id] = cls()
            return part
