"""Simulator parts of dialects (``toolwire.sim._base.Dialect``), named by their records' ``sim`` and imported only by
the simulated provider. The registry does not import this package (its name starts with ``_``)."""
