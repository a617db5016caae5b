"""``toolwire.limits.json_depth_exceeds`` agrees with the real nesting depth of any JSON text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from toolwire.limits import json_depth_exceeds

_TRICKY = st.sampled_from(['a\\', '"[{', '\\"]', "[[[[", 'x\\\\"', "\\\\", "}}", "é[", "\ud7ff{"])
_VALUES = st.recursive(st.none() | st.integers() | st.text(max_size=5) | _TRICKY,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | _TRICKY,
                                                                                   inner, max_size=3),
                       max_leaves=30)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@given(_VALUES, st.integers(min_value=0, max_value=12), st.booleans(), st.booleans())
def test_depth_check_matches_the_real_depth(value, limit, as_bytes, ascii_only):
    """Strings full of brackets, quotes and backslashes never fool the check, as bytes or str."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    data = text.encode() if as_bytes else text
    assert json_depth_exceeds(data, limit) == (_depth(value) > limit)


def test_deep_input_is_checked_in_linear_memory():
    """A megabyte of escapes and a thousand levels: refused, without a per-escape backtracking stack."""
    import tracemalloc

    data = b'{"name": "' + b"\\n" * 500_000 + b'", "a": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    tracemalloc.start()
    assert json_depth_exceeds(data, 100)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * len(data)
