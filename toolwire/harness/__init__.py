"""The harness: HTTP transports, the retry policy, the conversation loop, localized fallbacks, and the demo.

Built on the sans-I/O core: a transport feeds response bytes to a ``StreamParser``; the loop dispatches the
turn's calls through a ``Dispatcher`` and answers them in the provider's own format. A running conversation
reports its events (``toolwire.harness.events``) to a callback or, async, as an iterator.
"""

from .errors import ProviderError
from .events import CallAnswered, LoopEvent, LoopFinished, RequestStarted, ResponseEvent, RetryScheduled
from .fallback import LOCALES, FallbackReason, WriteOutcome, fallback_message
from .loop import AsyncToolLoop, CallOutcome, LoopResult, StepRecord, ToolLoop
from .result import WriteRecord
from .retry import RetryPolicy
from .transport import AsyncHTTPTransport, HTTPTransport

__all__ = ["ToolLoop", "AsyncToolLoop", "LoopResult", "CallOutcome", "StepRecord", "WriteRecord", "WriteOutcome", "RetryPolicy", "ProviderError",
           "HTTPTransport", "AsyncHTTPTransport", "FallbackReason", "fallback_message", "LOCALES",
           "LoopEvent", "RequestStarted", "ResponseEvent", "RetryScheduled", "CallAnswered", "LoopFinished"]
