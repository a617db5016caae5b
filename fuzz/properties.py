"""The properties checked for one input (a ``Case``), and the failures they report.

``check(case)`` parses the input whole and in pieces, dispatches the turn, encodes its results and history and
repairs the history, and returns a list of ``Failure``. Every random choice was made when the case was built, so
``check`` is deterministic: the same case gives the same failures (which is what replay relies on).

Properties (``Failure.prop``):

* ``untyped_exception``: an exception that is not a ``toolwire.ToolwireError`` escaped from toolwire.
* ``unexpected_typed_error``: a typed error where correct use of the API must not raise one (dispatching a turn
  just parsed, encoding the results the dispatcher returned, repairing a history toolwire wrote).
* ``chunked_disagrees``: the input fed in pieces gives another result than fed whole (calls with their local_id,
  call_id, name, args, state and problem code; finish_reason; error type; or the typed error raised).
* ``streaming_mode_disagrees``: ``keep_calls=False`` (calls collected from their end events plus those open at
  close) gives other calls, finish reason or error than ``keep_calls=True``.
* ``ran_unclean``: a handler ran for a turn that did not finish cleanly.
* ``ran_unrunnable``: a handler ran for a call that is not whole and well-formed.
* ``handler_count``: a tool's handler ran another number of times than the calls answered as having run.
* ``results_mismatch``: the results do not answer exactly the dispatched calls (same local_ids, in order, with
  the calls' ids and names).
* ``repair_not_idempotent``: repairing the repaired history (of toolwire's own ``history_messages``) changes it
  again.
* ``rerun_ran``: dispatching the same turn again with the same dispatcher ran a handler again.
* ``after_terminator``: a call that became runnable only because of data after the stream's terminator.
* ``memory``: peak traced memory of one parse above 32 MiB + 32 x the input size.
* ``harness_error``: the harness itself failed (a bug in ``fuzz``, reported so it is never silent).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import tracemalloc
import traceback
import zlib
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

import toolwire
from toolwire.registry.tool import check_tool_name

from .mutators import terminator_cut

__all__ = ["Case", "Failure", "check", "pieces_of", "turn_signature", "canonical", "innermost_toolwire_frame",
           "PROPERTIES"]

PROPERTIES = ("untyped_exception", "unexpected_typed_error", "chunked_disagrees", "streaming_mode_disagrees",
              "ran_unclean", "ran_unrunnable", "handler_count", "results_mismatch", "rerun_ran",
              "repair_not_idempotent", "after_terminator", "memory", "harness_error", "hang")

_TOOLWIRE_DIR = os.path.dirname(os.path.abspath(toolwire.__file__))
_FUZZ_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TOOLWIRE_DIR)

MEMORY_BASE = 32 * 1024 * 1024
MEMORY_FACTOR = 32


@dataclass
class Case:
    """One input and every choice about how it is checked (so that checking it again gives the same result)."""

    dialect: str
    data: bytes
    fmt: str  # the format of the main parses: the seed's explicit format or "auto"
    chunk_seed: int = 0
    chunk_max: int = 64
    pieces: list[int] | None = None  # explicit piece sizes (a minimised case); else drawn from chunk_seed
    keep_calls_chunked: bool = True  # False: the chunked parse runs in streaming mode
    other_fmt: str | None = None  # one more whole parse with this format (exceptions only)
    dispatch: bool = True
    concurrent: bool = False
    threaded: bool = False  # tools with a timeout (handlers run on the handler threads)
    echo: bool = False  # handlers return their arguments
    rerun: bool = False
    cut_format: str | None = None  # how to find the events for the after_terminator property (None: skip it)
    memory: bool = False
    logging: bool = False  # toolwire's log events enabled (down to debug) and rendered
    seed: str = ""
    mutations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["data"] = self.data.hex()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Case":
        d = dict(d)
        d["data"] = bytes.fromhex(d["data"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class Failure:
    prop: str
    stage: str
    type: str  # exception type, or a short name of what differs
    message: str
    where: str  # innermost toolwire frame (file:line in function), or the field that differs
    dialect: str

    @property
    def key(self) -> str:
        """What makes two failures the same: the property, and the exception type and innermost toolwire frame
        (or, for a disagreement, the dialect and the first field that differs)."""
        if self.prop in ("untyped_exception", "unexpected_typed_error", "harness_error", "hang"):
            return f"{self.prop}|{self.type}|{self.where}"
        return f"{self.prop}|{self.dialect}|{self.type}|{self.where}"


# ---- helpers ------------------------------------------------------------------------------------------------
def innermost_toolwire_frame(exc: BaseException) -> str:
    """``toolwire/x.py:LINE in FUNC`` for the deepest frame of ``exc``'s traceback inside toolwire (``fuzz/…``
    when the exception came from the harness, ``?`` when neither appears)."""
    best = None
    fuzz_frame = None
    for fs in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(fs.filename)
        if path.startswith(_TOOLWIRE_DIR + os.sep):
            best = f"{os.path.relpath(path, _ROOT)}:{fs.lineno} in {fs.name}"
        elif path.startswith(_FUZZ_DIR + os.sep):
            fuzz_frame = f"{os.path.relpath(path, _ROOT)}:{fs.lineno} in {fs.name}"
    return best or fuzz_frame or "?"


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = "<str() failed>"
    return text if len(text) <= 300 else text[:300] + "…"


def pieces_of(case: Case) -> list[bytes]:
    """The pieces the chunked parse feeds: explicit sizes (cycled), or sizes 1..chunk_max from chunk_seed."""
    data = case.data
    out = []
    i = 0
    if case.pieces:
        sizes = case.pieces
        k = 0
        while i < len(data):
            n = max(1, sizes[k % len(sizes)])
            out.append(data[i:i + n])
            i += n
            k += 1
        return out
    rng = random.Random(case.chunk_seed)
    sizes = range(1, max(1, case.chunk_max) + 1)
    n = len(data)
    while i < n:
        for size in rng.choices(sizes, k=max(16, (n - i) // max(1, case.chunk_max // 2) + 1)):
            out.append(data[i:i + size])
            i += size
            if i >= n:
                break
    return out


def canonical(value: Any) -> str:
    """A canonical text of a JSON-like value, built without recursion (arguments may be nested 1,000 deep)."""
    out: list[str] = []
    todo: list[Any] = [value]
    close = object()
    while todo:
        v = todo.pop()
        if v is close:
            out.append(")")
        elif isinstance(v, dict):
            out.append("{(")
            todo.append(close)
            for k in sorted(v, key=repr, reverse=True):
                todo.append(v[k])
                todo.append(_Key(k))
        elif isinstance(v, (list, tuple)):
            out.append("[(")
            todo.append(close)
            todo.extend(reversed(v))
        elif isinstance(v, _Key):
            out.append(repr(v.k) + ":")
        elif isinstance(v, float):
            out.append("f" + repr(v) + ",")
        else:
            out.append(repr(v) + ",")
    return "".join(out)


class _Key:
    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k


def _call_sig(c: toolwire.ToolCall) -> tuple:
    return (c.local_id, c.call_id, c.name, canonical(c.args), c.state.value,
            c.problem.code.value if c.problem else None)


def turn_signature(turn: toolwire.Turn) -> tuple:
    return (tuple(_call_sig(c) for c in turn.calls), turn.finish_reason, turn.error.type if turn.error else None)


_END_EVENTS = (toolwire.CallCompleted, toolwire.CallTruncated, toolwire.CallErrored)


class _Outcome:
    """What one parse gave: a turn (and the calls its end events reported), or a typed error."""

    __slots__ = ("turn", "raised", "ended")

    def __init__(self) -> None:
        self.turn: toolwire.Turn | None = None
        self.raised: str | None = None
        self.ended: dict[str, toolwire.ToolCall] = {}


def _parse(dialect: str, pieces: list[bytes], fmt: str, keep_calls: bool, collect: bool = False,
           max_message_bytes: int | None = None) -> _Outcome:
    """Feed ``pieces`` then close. A ToolwireError is recorded; anything else propagates."""
    out = _Outcome()
    kw = {} if max_message_bytes is None else {"max_message_bytes": max_message_bytes}
    parser = toolwire.StreamParser(dialect, format=fmt, keep_calls=keep_calls, **kw)
    try:
        for piece in pieces:
            events = parser.feed(piece)
            if collect:
                _collect(out, events)
        events = parser.close()
        if collect:
            _collect(out, events)
    except toolwire.ToolwireError as exc:
        out.raised = type(exc).__name__
    if out.raised is None or parser.closed:
        try:
            out.turn = parser.turn
        except toolwire.ToolwireError:
            pass
    return out


def _collect(out: _Outcome, events: list) -> None:
    for ev in events:
        if isinstance(ev, _END_EVENTS):
            out.ended[ev.call.local_id] = ev.call


def _outcome_sig(out: _Outcome, order_of: _Outcome | None) -> tuple:
    """A parse's result to compare: the typed error it raised, or its turn's signature. With ``order_of`` (a
    keep_calls=True outcome), ``out`` is a keep_calls=False parse: its calls are those its end events reported
    plus those its turn still holds, in the order of ``order_of``'s calls."""
    if out.raised:
        return ((), "raised", out.raised)
    if order_of is None:
        return turn_signature(out.turn)
    calls = dict(out.ended)
    for c in out.turn.calls:
        calls[c.local_id] = c
    order = {c.local_id: i for i, c in enumerate(order_of.turn.calls)} if order_of.turn is not None else {}
    merged = sorted(calls.values(), key=lambda c: (order.get(c.local_id, 1 << 30), c.local_id))
    return (tuple(_call_sig(c) for c in merged), out.turn.finish_reason,
            out.turn.error.type if out.turn.error else None)


def _same_unclean(a: _Outcome, b: _Outcome) -> bool:
    """Both turns ended without finishing cleanly, with the same finish reason and error type: nothing of either
    runs, so the calls' own states (a call forgotten in streaming mode cannot be failed later) do not matter."""
    if a.raised or b.raised or a.turn is None or b.turn is None:
        return False
    ta, tb = a.turn, b.turn
    return (not ta.finished_cleanly and not tb.finished_cleanly and ta.finish_reason == tb.finish_reason
            and (ta.error.type if ta.error else None) == (tb.error.type if tb.error else None))


def _describe_difference(a: tuple, b: tuple) -> str:
    """The first field in which two turn signatures differ (``calls.count``, ``calls.state`` …)."""
    calls_a, calls_b = a[0], b[0]
    if len(calls_a) != len(calls_b):
        return "calls.count"
    fields = ("local_id", "call_id", "name", "args", "state", "problem")
    for ca, cb in zip(calls_a, calls_b):
        for name, x, y in zip(fields, ca, cb):
            if x != y:
                return f"calls.{name}"
    if a[1] == "raised" or b[1] == "raised":
        return "raised"
    if a[1] != b[1]:
        return "finish_reason"
    if a[2] != b[2]:
        return "error"
    return "?"


def _show(sig: Any, limit: int = 400) -> str:
    text = repr(sig)
    return text if len(text) <= limit else text[:limit] + "…"


# ---- tools --------------------------------------------------------------------------------------------------
class _Log:
    """Handler invocations of the current check: (tool name, arguments)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []

    def add(self, name: str, args: Any) -> None:
        with self.lock:
            self.calls.append((name, args))


_LOG = _Log()
_TOOLS: dict[tuple[str, bool, bool], toolwire.Tool] = {}
_REGISTRIES: OrderedDict[tuple, toolwire.Registry] = OrderedDict()


def effect_of(name: str) -> str:
    """A tool's effect, fixed by its name: a mix of reads and writes."""
    return "write" if zlib.crc32(name.encode("utf-8", "surrogatepass")) & 1 else "read"


def _tool(name: str, threaded: bool, echo: bool) -> toolwire.Tool:
    key = (name, threaded, echo)
    tool = _TOOLS.get(key)
    if tool is None:
        def handler(args: Any, _name: str = name) -> Any:
            _LOG.add(_name, args)
            return {"echo": args} if echo else {"ok": True, "tool": _name}

        tool = toolwire.Tool.from_schema(name, {"type": "object"}, handler, effect=effect_of(name),
                                         timeout=5.0 if threaded else None)
        if len(_TOOLS) > 4096:
            _TOOLS.clear()
        _TOOLS[key] = tool
    return tool


def _registry(names: tuple[str, ...], threaded: bool, echo: bool) -> toolwire.Registry:
    key = (names, threaded, echo)
    reg = _REGISTRIES.get(key)
    if reg is None:
        reg = toolwire.Registry([_tool(n, threaded, echo) for n in names])
        _REGISTRIES[key] = reg
        if len(_REGISTRIES) > 512:
            _REGISTRIES.popitem(last=False)
    else:
        _REGISTRIES.move_to_end(key)
    return reg


def _valid_name(name: Any) -> bool:
    try:
        check_tool_name(name)
        return True
    except toolwire.ToolwireError:
        return False


# results whose handler ran
_RAN = frozenset({"ok", "handler_failed", "handler_timeout", "result_unusable", "outcome_unknown", "tool_error"})


# ---- the check ----------------------------------------------------------------------------------------------
class _Checker:
    def __init__(self, case: Case) -> None:
        self.case = case
        self.failures: list[Failure] = []

    def fail(self, prop: str, stage: str, type_: str, message: str, where: str) -> None:
        self.failures.append(Failure(prop, stage, type_, message, where, self.case.dialect))

    def guarded(self, stage: str, fn, *args, allowed: tuple = (), **kw) -> Any:
        """Run ``fn``; record any exception but a ToolwireError (and, for ``unexpected_typed_error``, any typed
        error not in ``allowed``, given as (type, message fragment) pairs). Returns (ok, value)."""
        try:
            return True, fn(*args, **kw)
        except toolwire.ToolwireError as exc:
            if allowed is None:
                return False, exc
            for etype, fragment in allowed:
                if isinstance(exc, etype) and fragment in str(exc):
                    return False, exc
            self.fail("unexpected_typed_error", stage, type(exc).__name__, _message(exc),
                      innermost_toolwire_frame(exc))
            return False, exc
        except Exception as exc:  # noqa: BLE001 - every other exception is the finding
            where = innermost_toolwire_frame(exc)
            prop = "harness_error" if where.startswith("fuzz") else "untyped_exception"
            self.fail(prop, stage, type(exc).__name__, _message(exc), where)
            return False, exc

    def run(self) -> list[Failure]:
        case = self.case
        d = case.dialect
        ok, whole = self.guarded("parse.whole", _parse, d, [case.data], case.fmt, True, allowed=None)
        if not ok:
            return self.failures
        pieces = pieces_of(case)
        ok, chunked = self.guarded("parse.chunked", _parse, d, pieces, case.fmt, case.keep_calls_chunked,
                                   collect=not case.keep_calls_chunked, allowed=None)
        if ok:
            if case.keep_calls_chunked:
                self.compare_chunked(whole, chunked)
            else:
                self.compare_streaming(whole, chunked)
        if case.other_fmt:
            self.guarded("parse.other_format", _parse, d, [case.data], case.other_fmt, True, allowed=None)
        if case.cut_format is not None and whole.turn is not None:
            prefix = terminator_cut(d, case.data, case.cut_format)
            if prefix is not None:
                self.after_terminator(whole, prefix)
        if case.memory:
            self.memory()
        if case.dispatch and whole.turn is not None:
            self.dispatch(whole.turn)
        return self.failures

    # -- parse properties --
    def compare_chunked(self, whole: _Outcome, chunked: _Outcome) -> None:
        a, b = _outcome_sig(whole, None), _outcome_sig(chunked, None)
        if a != b:
            what = _describe_difference(a, b)
            self.fail("chunked_disagrees", "parse.chunked", what, f"whole {_show(a)} != chunked {_show(b)}", what)

    def compare_streaming(self, whole: _Outcome, stream: _Outcome) -> None:
        """keep_calls=False fed in pieces against keep_calls=True fed whole. On a difference, keep_calls=False fed
        whole tells which it is: the pieces (``chunked_disagrees``) or the mode (``streaming_mode_disagrees``)."""
        a = _outcome_sig(whole, None)
        b = _outcome_sig(stream, whole)
        if a == b or _same_unclean(whole, stream):
            return
        ok, stream_whole = self.guarded("parse.streaming_whole", _parse, self.case.dialect, [self.case.data],
                                        self.case.fmt, False, collect=True, allowed=None)
        if not ok:
            return
        c = _outcome_sig(stream_whole, whole)
        if c != b:
            what = _describe_difference(c, b)
            self.fail("chunked_disagrees", "parse.streaming", what,
                      f"keep_calls=False whole {_show(c)} != keep_calls=False in pieces {_show(b)}", what)
        else:
            what = _describe_difference(a, c)
            self.fail("streaming_mode_disagrees", "parse.streaming", what,
                      f"keep_calls=True {_show(a)} != keep_calls=False {_show(c)}", what)

    def after_terminator(self, whole: _Outcome, cut: bytes) -> None:
        ok, prefix = self.guarded("parse.prefix", _parse, self.case.dialect, [cut], self.case.fmt, True,
                                  allowed=None)
        if not ok or prefix.turn is None:
            return
        allowed = Counter((c.call_id, c.name, canonical(c.args)) for c in prefix.turn.runnable_calls)
        for c in whole.turn.runnable_calls:
            k = (c.call_id, c.name, canonical(c.args))
            if allowed[k] <= 0:
                self.fail("after_terminator", "parse.whole", "runnable_call",
                          f"call {c.call_id!r} {c.name!r} is runnable, but not in the stream cut at its terminator "
                          f"(that turn: finished_cleanly={prefix.turn.finished_cleanly}, "
                          f"{len(prefix.turn.runnable_calls)} runnable)", "runnable_calls")
                return
            allowed[k] -= 1

    def memory(self) -> None:
        tracemalloc.start()
        try:
            ok, _ = self.guarded("parse.memory", _parse, self.case.dialect, [self.case.data], self.case.fmt, True,
                                 allowed=None)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        bound = MEMORY_BASE + MEMORY_FACTOR * len(self.case.data)
        if peak > bound:
            self.fail("memory", "parse.memory", "peak", f"peak traced memory {peak} bytes for an input of "
                      f"{len(self.case.data)} bytes (bound {bound})", "parse")

    # -- dispatch, results, history --
    def dispatch(self, turn: toolwire.Turn) -> None:
        case = self.case
        names = tuple(sorted({c.name for c in turn.calls if isinstance(c.name, str) and _valid_name(c.name)}))
        ok, registry = self.guarded("registry", _registry, names, case.threaded, case.echo)
        if not ok:
            return
        dispatcher = toolwire.Dispatcher(registry, concurrent_reads=case.concurrent, read_retries=0)
        _LOG.calls = []
        ok, results = self.guarded("dispatch", dispatcher.run, turn, conversation_id="fuzz", allowed=())
        ran = list(_LOG.calls)
        if not ok:
            if ran and not turn.finished_cleanly:
                self.fail("ran_unclean", "dispatch", "handler_ran", f"{len(ran)} handler(s) ran for a turn that did "
                          f"not finish cleanly (error {turn.error and turn.error.type}, finish "
                          f"{turn.finish_reason}) before the dispatcher raised", "dispatch")
            return
        self.check_results(turn, results, ran)
        if case.rerun:
            _LOG.calls = []
            ok, again = self.guarded("dispatch.rerun", dispatcher.run, turn, conversation_id="fuzz", allowed=())
            if _LOG.calls:
                self.fail("rerun_ran", "dispatch.rerun", "handler_ran", f"{len(_LOG.calls)} handler(s) ran again "
                          f"when the same turn was dispatched a second time: {sorted({n for n, _ in _LOG.calls})}",
                          "dispatch")
        self.answer(turn, results)

    def check_results(self, turn: toolwire.Turn, results: list, ran: list[tuple[str, Any]]) -> None:
        calls = [c for c in turn.calls if c.choice == 0]
        if ran and not turn.finished_cleanly:
            self.fail("ran_unclean", "dispatch", "handler_ran", f"{len(ran)} handler(s) ran for a turn that did not "
                      f"finish cleanly (error {turn.error and turn.error.type}, finish {turn.finish_reason})",
                      "dispatch")
        if [r.local_id for r in results] != [c.local_id for c in calls]:
            self.fail("results_mismatch", "dispatch", "local_ids", f"results {[r.local_id for r in results]} for "
                      f"calls {[c.local_id for c in calls]}", "local_ids")
            return
        for r, c in zip(results, calls):
            if r.call_id != c.call_id or r.name != c.name:
                self.fail("results_mismatch", "dispatch", "ids", f"result ({r.call_id!r}, {r.name!r}) answers call "
                          f"({c.call_id!r}, {c.name!r})", "ids")
                return
        ran_results = Counter()
        for r, c in zip(results, calls):
            if r.kind.value in _RAN:
                ran_results[c.name] += 1
                if not c.runnable:
                    self.fail("ran_unrunnable", "dispatch", "handler_ran", f"call {c.local_id} ran (result "
                              f"{r.kind.value}) in state {c.state.value} with problem "
                              f"{c.problem and c.problem.code.value}", "dispatch")
        invoked = Counter(name for name, _ in ran)
        over = {n: k for n, k in invoked.items() if k > ran_results[n]}
        if over:
            self.fail("handler_count", "dispatch", "count", f"handlers invoked {dict(invoked)}, but calls answered "
                      f"as run {dict(ran_results)}: a handler ran more than once for one call", "dispatch")

    def answer(self, turn: toolwire.Turn, results: list) -> None:
        has_calls = any(c.choice == 0 for c in turn.calls)
        no_call = ((toolwire.UsageError, "no call to answer"),)
        self.guarded("encode_results", toolwire.encode_results, turn, results,
                     allowed=() if has_calls else no_call)
        if turn.assistant_message is None:
            return
        ok, history = self.guarded("history_messages", toolwire.history_messages, turn, results, allowed=())
        if not ok:
            return
        ok, repaired = self.guarded("repair_history", toolwire.repair_history, turn.provider, history, allowed=())
        if not ok:
            return
        ok, again = self.guarded("repair_history.again", toolwire.repair_history, turn.provider, repaired[0],
                                 allowed=())
        if ok and (again[1].actions or canonical(again[0]) != canonical(repaired[0])):
            kinds = sorted({a.kind.value for a in again[1].actions})
            self.fail("repair_not_idempotent", "repair_history.again", ",".join(kinds) or "changed",
                      f"repairing a repaired history changed it again: {kinds or 'messages differ'}", "repair")


#: frames available to everything ``check`` calls, wherever it is called from (a worker, a replay, a test), so
#: that whether an input nested ~1,000 deep raises RecursionError does not depend on the caller's stack
HEADROOM = 1000


def _left(n: int = 0) -> int:
    """How many more nested calls fit under the recursion limit here (C calls of the callers count too, which is
    why the frames are not simply counted)."""
    try:
        return _left(n + 1)
    except RecursionError:
        return n


_USED: dict[tuple, int] = {}


def _stack_depth() -> int:
    """Recursion units the callers use (measured once per distinct call chain and recursion limit)."""
    frame, chain = sys._getframe(1), []
    while frame is not None:
        chain.append(id(frame.f_code))
        frame = frame.f_back
    key = (sys.getrecursionlimit(), *chain)
    used = _USED.get(key)
    if used is None:
        used = _USED[key] = sys.getrecursionlimit() - _left()
        if len(_USED) > 256:
            _USED.clear()
    return used


class _Render(logging.Handler):
    """Formats every record (as a real handler would) and keeps nothing."""

    def emit(self, record: logging.LogRecord) -> None:
        self.format(record)


_LOGGER = logging.getLogger("toolwire")
_RENDER = _Render()


def check(case: Case) -> list[Failure]:
    """Every property for ``case``; the failures found (empty when the input passed).

    toolwire's logger is silenced (its level raised above CRITICAL) unless ``case.logging``, when every event
    down to debug is emitted and rendered; the logger's level and handlers are restored afterwards. The
    recursion limit is set to leave ``HEADROOM`` frames, and restored."""
    level = _LOGGER.level
    _LOGGER.setLevel(logging.DEBUG if case.logging else logging.CRITICAL + 1)
    if case.logging:
        _LOGGER.addHandler(_RENDER)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + HEADROOM)
    try:
        return _Checker(case).run()
    except Exception as exc:  # noqa: BLE001 - a harness bug must be reported, not hidden
        return [Failure("harness_error", "check", type(exc).__name__, _message(exc), innermost_toolwire_frame(exc),
                        case.dialect)]
    finally:
        sys.setrecursionlimit(limit)
        if case.logging:
            _LOGGER.removeHandler(_RENDER)
        _LOGGER.setLevel(level)

