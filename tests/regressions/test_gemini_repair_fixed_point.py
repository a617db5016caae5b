"""``repair_history("gemini", ...)`` is a fixed point whatever JSON value a stored ``functionCall.name`` holds.

A call whose name was not a string got an inserted error result named ``""`` when the value was falsy (``0``,
``false``, ``[]``, ``{}``): the next repair then renamed that result after the call (a call with an id) or dropped it
as an orphan and inserted it again (a call without one), so repairing a repaired history changed it again.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolwire

#: a value of every JSON type, the falsy ones included
NAMES = [None, True, False, 0, 1, 0.0, 2.5, "", "lookup", [], ["a"], {}, {"a": 1}]

json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False)
                           | st.text(max_size=4), lambda inner: st.lists(inner, max_size=2)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)


def _call(name, call_id):
    fc = {"name": name, "args": {"a": 1}}
    if call_id is not None:
        fc["id"] = call_id
    return {"functionCall": fc}


def _response(name, call_id):
    fr = {"name": name, "response": {"output": "ok"}}
    if call_id is not None:
        fr["id"] = call_id
    return {"functionResponse": fr}


def _assert_fixed_point(history):
    once, _ = toolwire.repair_history("gemini", history)
    twice, report = toolwire.repair_history("gemini", once)
    assert twice == once
    assert list(report.actions) == []


@pytest.mark.parametrize("name", NAMES, ids=repr)
@pytest.mark.parametrize("call_id", ["c1", None])
def test_repairing_a_repaired_history_changes_nothing_for_a_call_of_any_name(name, call_id):
    """A call with no recorded result, whatever its name: the second repair changes and reports nothing."""
    _assert_fixed_point([{"role": "user", "parts": [{"text": "hi"}]},
                         {"role": "model", "parts": [_call(name, call_id)]},
                         {"role": "user", "parts": [{"text": "next"}]}])


@given(st.lists(st.tuples(json_values, st.sampled_from(["c1", "c2", None]), st.booleans(), json_values),
                min_size=1, max_size=4), st.booleans())
def test_repair_is_a_fixed_point_over_hostile_gemini_histories(calls, echo_ids):
    """Model contents of calls named by any JSON value, each with or without an id and a result (the result named
    by any value too): repairing the repaired history changes and reports nothing."""
    history = [{"role": "user", "parts": [{"text": "hi"}]}]
    for name, call_id, answered, response_name in calls:
        history.append({"role": "model", "parts": [_call(name, call_id)]})
        if answered:
            history.append({"role": "user", "parts": [_response(response_name, call_id)]})
    once, _ = toolwire.repair_history("gemini", history, echo_ids=echo_ids)
    twice, report = toolwire.repair_history("gemini", once, echo_ids=echo_ids)
    assert twice == once and list(report.actions) == []
