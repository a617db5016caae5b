"""Simulator parts of dialects (``toolwire.sim._base.Dialect``), named by their records' ``sim`` and imported only by
the simulated provider. The registry does not import this package (its name starts with ``_``).

Importing a part first imports ``toolwire.sim`` (here), whose server loads every record's part: a part imported
before the simulator is then loaded by it, whole, rather than found half-initialised."""

from ... import sim as _sim  # noqa: F401
