"""The harness: HTTP transports, the retry policy, the conversation loop, localized fallbacks, and the demo.

Built on the sans-I/O core: a transport feeds response bytes to a ``StreamParser``; the loop dispatches the
turn's calls through a ``Dispatcher`` and answers them in the provider's own format.
"""

from .errors import ProviderError
from .fallback import LOCALES, FallbackReason, fallback_message
from .loop import AsyncToolLoop, CallOutcome, LoopResult, StepRecord, ToolLoop
from .retry import RetryPolicy
from .transport import AsyncHTTPTransport, HTTPTransport

__all__ = ["ToolLoop", "AsyncToolLoop", "LoopResult", "CallOutcome", "StepRecord", "RetryPolicy", "ProviderError",
           "HTTPTransport", "AsyncHTTPTransport", "FallbackReason", "fallback_message", "LOCALES"]
