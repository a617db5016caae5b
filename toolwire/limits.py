"""Limits on what one response may make toolwire hold or walk, with their defaults.

Every cap is configurable and ends in a typed outcome, never in a crash or unbounded memory:

* ``max_message_bytes`` (framing, 16 MiB): one pending message; over it ``FramingError`` is raised.
* ``max_depth`` (100): how deeply objects and arrays may nest, in a payload's envelope (plus a margin for the
  envelope's own levels) and in a call's arguments. Deeper input would be walked recursively by decoders,
  validators and encoders, up to Python's recursion limit (about 1,000); it is refused well before.
* ``max_argument_chars`` (16 Mi characters): the argument text of one call, however many fragments it arrives in.
* ``max_calls`` (10,000): calls (client and server) announced in one response.
* ``max_choices`` (128, OpenAI's largest ``n``): choices (Chat ``choices``, Gemini ``candidates``) in one
  response. The choice over it is not read, nor anything after it in its payload.

Over ``max_depth``, ``max_argument_chars``, ``max_calls`` or ``max_choices`` the turn records a ``StreamError`` of type
``limit_exceeded`` (the provider's data is at fault, so it is recorded on the turn, not raised): the turn does
not finish cleanly and nothing in it runs. Results and histories have their own caps
(``Dispatcher(max_result_bytes=...)``, ``repair_history(max_calls=...)``).
"""

from __future__ import annotations

import operator
from itertools import accumulate

__all__ = ["DEFAULT_MAX_DEPTH", "DEFAULT_MAX_ARGUMENT_CHARS", "DEFAULT_MAX_CALLS", "DEFAULT_MAX_CHOICES",
           "ENVELOPE_DEPTH", "json_depth_exceeds"]

DEFAULT_MAX_DEPTH = 100
DEFAULT_MAX_ARGUMENT_CHARS = 16 * 1024 * 1024
DEFAULT_MAX_CALLS = 10_000
DEFAULT_MAX_CHOICES = 128
#: levels a provider's envelope adds around the arguments (Gemini: candidates, content, parts, the call, its args)
ENVELOPE_DEPTH = 16

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_OPENERS = bytes(b for b in range(256) if b not in b"[{")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def json_depth_exceeds(data: bytes | str, limit: int) -> bool:
    """True when the JSON text ``data`` nests objects and arrays more than ``limit`` deep.

    Brackets inside strings do not count. Cheap for the usual input: when the text holds no more than ``limit``
    opening brackets in all it cannot be that deep, and the scan is skipped; otherwise strings are cut out and the
    running depth is computed by C-level iterators (no per-character Python loop), in memory linear in the input."""
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return False
        data = data.encode("utf-8", "surrogatepass")
    elif len(data.translate(None, _NOT_OPENERS)) <= limit:  # one C pass (two ``count`` calls cost twice as much)
        return False
    if b'"' in data:
        # drop string contents with C-level passes only (a regex would keep a backtracking stack per escape):
        # escaped backslashes, then escaped quotes, then every other piece between quotes is inside a string
        data = b"".join(data.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    steps = data.translate(None, _NOT_BRACKETS).translate(_STEP)
    if len(steps) <= limit:
        return False
    # depth after n brackets = (sum of steps) - n, as openers count 2 and closers 0
    return max(map(operator.sub, accumulate(steps), range(1, len(steps) + 1)), default=0) > limit
