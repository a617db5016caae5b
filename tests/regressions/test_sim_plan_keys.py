"""Misuse of SimProvider.plan's per-conversation fault plans."""

from __future__ import annotations

import pytest

from toolwire import UsageError
from toolwire.sim import Fault, SimProvider


@pytest.mark.parametrize("key", [{"scenario": "heigth"}, {"dialect": "anthropics"}, {"scenario": 5},
                                 {"scenario": "height", "dialect": "openai"}])
def test_a_plan_for_a_scenario_or_dialect_that_does_not_exist_is_refused(key):
    """plan(faults, scenario=/dialect= a name the simulator does not know) raises, instead of queueing faults that
    no request can ever take (a test then passes without the fault it thinks it injected)."""
    sim = SimProvider()
    with pytest.raises((UsageError, ValueError, TypeError)):
        sim.plan([Fault.status(503)], **key)
    assert sim.pending_faults == 0
