"""Test adapters, one per dialect (``_adapter.Adapter``): ``adapter(id)``, and the dialect ids the generic suites
loop over, straight from toolwire's registry: ``REGISTERED`` (every dialect) and ``SIMULATED`` (those the simulated
provider speaks and the harness can call: the loop tests' dialects).

Adapters are found by module: ``tests/dialects/<id with _ for ->.py`` defines ``ADAPTER``.
"""

from __future__ import annotations

import importlib
import pkgutil

from toolwire.codecs import dialects, dialects_with

from ._adapter import CONTENT, SIG, Adapter, Call, Case, results_for

__all__ = ["Adapter", "Case", "Call", "CONTENT", "SIG", "results_for", "adapter", "adapters", "REGISTERED",
           "SIMULATED"]

#: every registered dialect, in the registry's order
REGISTERED: tuple[str, ...] = tuple(d.id for d in dialects())
#: the dialects the simulated provider speaks and the harness loop can call
SIMULATED: tuple[str, ...] = tuple(d.id for d in dialects_with("sim") if d.http is not None)

_FOUND: dict[str, Adapter] | None = None


def adapters() -> dict[str, Adapter]:
    """Every adapter of the package, by dialect id."""
    global _FOUND
    if _FOUND is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            found_adapter = getattr(module, "ADAPTER", None)
            if isinstance(found_adapter, Adapter):
                found[found_adapter.dialect] = found_adapter
        _FOUND = found
    return _FOUND


adapters()  # found at import: a test module's hypothesis strategies must not be made inside a running test


def adapter(dialect: str) -> Adapter:
    """The adapter of ``dialect``; a registered dialect without one fails the test asking for it."""
    try:
        return adapters()[dialect]
    except KeyError:
        raise AssertionError(f"the dialect {dialect!r} has no test adapter: write tests/dialects/"
                             f"{dialect.replace('-', '_')}.py defining ADAPTER (see tests/dialects/_adapter.py)"
                             ) from None
