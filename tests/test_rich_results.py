"""Rich results through the public API, in every dialect, with ``run`` and ``arun``: ``Content`` of each part kind
answered ``ok`` with typed parts and encoded the way each provider takes it (validated against the official
SDKs' request types), ``structured`` JSON, ``ToolError`` for reads and writes, ``OutcomeUnknown`` for reads and
writes, typed parts replayed from the SQLite and PostgreSQL ledgers, capping, and invalid ``Content``."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from typing import Any

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import (
    AudioPart,
    Content,
    Dispatcher,
    ImagePart,
    LinkPart,
    OutcomeUnknown,
    Registry,
    ResourcePart,
    ResultKind,
    SQLiteLedger,
    TextPart,
    Tool,
    ToolError,
    ToolResult,
)

from .bodies import PROVIDERS
from .dialects import adapter
from .rich import CONTENTS, NATIVE, PDF, PNG, STRUCTURED, WAV, media_of, turn_of
from .test_results_encoding import check_sdk

K = ResultKind
MODES = ("sync", "async")


def dispatch(dispatcher: Dispatcher, turn: toolwire.Turn, mode: str, **kw: Any) -> list[ToolResult]:
    if turn.response_id is None and "turn_id" not in kw:
        # a dialect whose responses carry no id: the application names the turn, as it must for a ledger to know
        # it again in another dispatcher
        kw["turn_id"] = "resp_1"
    if mode == "sync":
        return dispatcher.run(turn, conversation_id=kw.pop("conversation_id", "c1"), **kw)
    return asyncio.run(dispatcher.arun(turn, conversation_id=kw.pop("conversation_id", "c1"), **kw))


class Calls:
    """Handlers that count their runs."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def hit(self, name: str) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1


def registry(calls: Calls, *, answer: Any = None, write_answer: Any = None, timeout: float | None = None) -> Registry:
    """``show`` (a read returning ``CONTENTS[kind]``), ``fail`` (a read raising ``answer``) and ``save`` (a write
    returning or raising ``write_answer``)."""

    def show(kind: str) -> Any:
        """Show something."""
        calls.hit("show")
        return CONTENTS[kind]

    def fail(kind: str) -> Any:
        """Fail."""
        calls.hit("fail")
        raise answer

    def save(kind: str) -> Any:
        """Save something."""
        calls.hit("save")
        if isinstance(write_answer, BaseException):
            raise write_answer
        return write_answer

    return Registry([Tool.from_function(show, effect="read", timeout=timeout),
                     Tool.from_function(fail, effect="read", timeout=timeout),
                     Tool.from_function(save, effect="write", timeout=timeout)])


def encoded_and_checked(provider: str, turn: toolwire.Turn, results: list[ToolResult]) -> list[Any]:
    """``encode_results`` and ``history_messages``, every message validated against the SDK's request type."""
    encoded = toolwire.encode_results(turn, results)
    for message in toolwire.history_messages(turn, results):
        check_sdk(provider, message)
    return encoded


# ==== Content of each kind ========================================================================================
@pytest.mark.parametrize("kind", list(CONTENTS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_content_is_answered_ok_with_typed_parts_and_sent_where_the_provider_takes_it(provider, mode, kind):
    """Each Content kind is ok with its parts typed, the parts the provider takes are sent natively, the rest in
    words, and every encoded message fits the SDK."""
    turn = turn_of(provider, ("show", {"kind": kind}))
    [result] = dispatch(Dispatcher(registry(Calls())), turn, mode)
    content = CONTENTS[kind]
    assert result.kind is K.OK and not result.is_error
    assert result.parts == content.parts and all(type(a) is type(b) for a, b in zip(result.parts, content.parts))
    if content.structured is not None:
        assert result.content == content.structured
    else:
        assert isinstance(result.content, str)
        assert PNG not in result.content and WAV not in result.content and PDF not in result.content
    encoded = encoded_and_checked(provider, turn, [result])
    assert media_of(provider, encoded) == NATIVE[provider].get(kind, [])
    wire = json.dumps(encoded, ensure_ascii=False)
    for part in content.parts:
        if isinstance(part, TextPart) and kind != "structured_twin":  # the twin: see the structured tests
            assert json.dumps(part.text, ensure_ascii=False)[1:-1] in wire
        elif isinstance(part, ResourcePart) and part.text is not None:
            assert "bring an umbrella" in wire and "file:///notes.md" in wire
        elif isinstance(part, LinkPart):
            assert part.uri in wire
    if provider == "openai-chat" and kind in ("image", "audio", "resource_pdf", "resource_blob"):
        assert re.search(r"\[(image|audio|resource file:///\w+\.\w+): [a-z/]+", encoded[0]["content"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_structured_json_goes_in_the_object_or_once_as_text(provider):
    """structured JSON is Gemini's response output; elsewhere JSON text sent once, never twice when a text part
    already carries it."""
    for kind in ("structured", "structured_twin"):
        turn = turn_of(provider, ("show", {"kind": kind}))
        [result] = Dispatcher(registry(Calls())).run(turn, conversation_id="c1")
        encoded = encoded_and_checked(provider, turn, [result])
        wire = json.dumps(encoded)
        if provider == "gemini":
            assert encoded[0]["parts"][0]["functionResponse"]["response"] == {"output": STRUCTURED}
        elif provider == "gemini-interactions":
            assert encoded[0]["result"] == STRUCTURED
        else:
            assert wire.count("Paris") == 1
            text = {"openai-chat": lambda: encoded[0]["content"], "openai-responses": lambda: encoded[0]["output"],
                    "anthropic": lambda: encoded[0]["content"][0]["content"]}.get(
                provider, lambda: adapter(provider).structured_text(encoded))()
            assert json.loads(text) == STRUCTURED


@pytest.mark.parametrize("provider", PROVIDERS)
def test_structured_beside_media_and_text(provider):
    """The mixed answer: the object where the result is an object (Gemini output, other text beside it under
    ``text``), JSON text first elsewhere; media native where taken."""
    turn = turn_of(provider, ("show", {"kind": "mixed"}))
    [result] = Dispatcher(registry(Calls())).run(turn, conversation_id="c1")
    encoded = encoded_and_checked(provider, turn, [result])
    assert media_of(provider, encoded) == NATIVE[provider].get("mixed", [])
    if provider == "gemini":
        response = encoded[0]["parts"][0]["functionResponse"]["response"]
        assert response["output"] == STRUCTURED and response["text"].startswith("Here:")
        assert "[audio: audio/wav" in response["text"] and "[resource link: https://example.com/x]" in response["text"]
    elif provider == "gemini-interactions":
        first = encoded[0]["result"][0]
        assert first["type"] == "text" and json.loads(first["text"]) == STRUCTURED
    elif provider == "anthropic":
        first = encoded[0]["content"][0]["content"][0]
        assert first["type"] == "text" and json.loads(first["text"]) == STRUCTURED
    elif provider == "openai-responses":
        first = encoded[0]["output"][0]
        assert first["type"] == "input_text" and json.loads(first["text"]) == STRUCTURED
    elif provider == "openai-chat":
        assert encoded[0]["content"].startswith(json.dumps(STRUCTURED, separators=(",", ":")) + "\n\n")
    else:
        assert json.loads(adapter(provider).first_text(encoded)) == STRUCTURED


def test_a_part_or_a_list_of_parts_is_content_too():
    """A handler may return one part, or a list of parts, instead of Content."""
    def one(kind: str) -> Any:
        """One."""
        return ImagePart(data=PNG, mime_type="image/png") if kind == "one" else [TextPart(text="a"),
                                                                                 TextPart(text="b")]
    turn = turn_of("anthropic", ("one", {"kind": "one"}), ("one", {"kind": "two"}))
    first, second = Dispatcher(Registry([Tool.from_function(one, effect="read")])).run(turn, conversation_id="c")
    assert first.parts == [ImagePart(data=PNG, mime_type="image/png")]
    assert second.parts == [TextPart(text="a"), TextPart(text="b")] and second.content == "a\n\nb"


# ==== ToolError ===================================================================================================
ERRORS = {
    "text": (ToolError("No such city."), "No such city.", None),
    "json": (ToolError({"code": 404, "detail": "no such city"}), {"code": 404, "detail": "no such city"}, None),
    "content": (ToolError(Content(parts=[TextPart(text="No such city; here is the map:"),
                                         ImagePart(data=PNG, mime_type="image/png")])),
                "No such city; here is the map:\n\n[image: image/png, 70 bytes, returned by the tool but not shown "
                "here]", [TextPart(text="No such city; here is the map:"), ImagePart(data=PNG, mime_type="image/png")]),
}


@pytest.mark.parametrize("form", list(ERRORS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_error_of_a_read_is_answered_once_and_never_retried(provider, mode, form, toolwire_debug):
    """A read raising ToolError is tool_error with the exception's content, run once despite read_retries, and
    sent as each dialect's error."""
    exc, content, parts = ERRORS[form]
    calls = Calls()
    turn = turn_of(provider, ("fail", {"kind": form}))
    with capture_logs() as logs:
        [result] = dispatch(Dispatcher(registry(calls, answer=exc), read_retries=3, backoff=0), turn, mode)
    assert calls.runs == {"fail": 1}
    assert result.kind is K.TOOL_ERROR and result.is_error and result.content == content and result.parts == parts
    events = [e["event"] for e in logs]
    assert "dispatch.tool_error" in events
    assert "dispatch.retry" not in events and "dispatch.handler_failed" not in events
    encoded = encoded_and_checked(provider, turn, [result])
    if provider == "anthropic":
        assert encoded[0]["content"][0]["is_error"] is True
    elif provider == "gemini":
        assert "error" in encoded[0]["parts"][0]["functionResponse"]["response"]
    elif provider == "gemini-interactions":
        assert encoded[0]["is_error"] is True
    elif provider not in ("openai-chat", "openai-responses"):
        assert adapter(provider).error_flagged(encoded)
    if form == "content":
        assert media_of(provider, encoded) == NATIVE[provider].get("image", [])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_error_of_a_write_is_its_recorded_outcome(provider, mode, tmp_path):
    """A write raising ToolError is tool_error; the ledger records it completed, so a later dispatch replays the
    same error (typed parts included) and runs nothing."""
    calls = Calls()
    exc = ToolError(Content(parts=[TextPart(text="The account is frozen."),
                                   ImagePart(data=PNG, mime_type="image/png")]))
    turn = turn_of(provider, ("save", {"kind": "x"}))
    db = tmp_path / "ledger.db"
    [first] = dispatch(Dispatcher(registry(calls, write_answer=exc), ledger=SQLiteLedger(db)), turn, mode)
    [again] = dispatch(Dispatcher(registry(calls, write_answer=exc), ledger=SQLiteLedger(db)), turn, mode)
    assert calls.runs == {"save": 1}
    assert first.kind is K.TOOL_ERROR and again.kind is K.TOOL_ERROR
    assert again.parts == first.parts and isinstance(again.parts[1], ImagePart)
    assert again.content == first.content
    encoded_and_checked(provider, turn, [again])


def test_a_returned_tool_error_counts_as_raised():
    """Returning a ToolError (instead of raising it) answers tool_error, not ok."""
    def lookup(key: str) -> Any:
        """Look up."""
        return ToolError("nothing under that key")
    turn = turn_of("openai-chat", ("lookup", {"key": "k"}))
    [result] = Dispatcher(Registry([Tool.from_function(lookup, effect="read")])).run(turn, conversation_id="c")
    assert result.kind is K.TOOL_ERROR and result.content == "nothing under that key"


# ==== OutcomeUnknown ==============================================================================================
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_outcome_unknown_of_a_write_leaves_it_started_and_never_runs_it_again(provider, mode, tmp_path,
                                                                           toolwire_debug):
    """A write raising OutcomeUnknown is outcome_unknown; its ledger row stays started, and a second dispatch
    (another dispatcher on the same ledger) answers outcome_unknown without running it."""
    calls = Calls()
    turn = turn_of(provider, ("save", {"kind": "x"}))
    db = tmp_path / "ledger.db"
    with capture_logs() as logs:
        [first] = dispatch(Dispatcher(registry(calls, write_answer=OutcomeUnknown("the server went away")),
                                      ledger=SQLiteLedger(db)), turn, mode)
    assert first.kind is K.OUTCOME_UNKNOWN and "the server went away" in first.content
    assert "may or may not have taken effect" in first.content
    assert {"event": "dispatch.outcome_unknown", "reason": "handler_raised"}.items() <= \
        next(e for e in logs if e["event"] == "dispatch.outcome_unknown").items()
    rows = _rows(db)
    assert [status for status, _ in rows] == ["started"] and rows[0][1] is None
    [again] = dispatch(Dispatcher(registry(calls, write_answer=None), ledger=SQLiteLedger(db)), turn, mode)
    assert again.kind is K.OUTCOME_UNKNOWN and calls.runs == {"save": 1}
    assert [status for status, _ in _rows(db)] == ["started"]
    encoded_and_checked(provider, turn, [again])


def _rows(db: Any) -> list[tuple[str, Any]]:
    import sqlite3
    with sqlite3.connect(db) as conn:
        return list(conn.execute("SELECT status, result FROM toolwire_ledger"))


@pytest.mark.parametrize("mode", MODES)
def test_outcome_unknown_of_a_read_is_handler_failed_after_its_retries(mode):
    """A read raising OutcomeUnknown is an exception like any other: retried (reads are safe to repeat), then
    handler_failed."""
    calls = Calls()
    turn = turn_of("gemini", ("fail", {"kind": "x"}))
    [result] = dispatch(Dispatcher(registry(calls, answer=OutcomeUnknown("lost")), read_retries=2, backoff=0),
                        turn, mode)
    assert result.kind is K.HANDLER_FAILED and calls.runs == {"fail": 3}
    assert "OutcomeUnknown" in result.content


# ==== ledgers keep the parts typed ================================================================================
def _write_content() -> Content:
    return Content(parts=[TextPart(text="Saved; the receipt:"), ImagePart(data=PNG, mime_type="image/png"),
                          ResourcePart(uri="file:///r.pdf", mime_type="application/pdf", blob=PDF),
                          LinkPart(uri="https://example.com/r", name="receipt")], structured={"saved": True})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_sqlite_replay_keeps_typed_parts(provider, mode, tmp_path):
    """A completed write replayed from SQLite by a new dispatcher has the same typed parts and encodes the same."""
    calls = Calls()
    turn = turn_of(provider, ("save", {"kind": "x"}))
    db = tmp_path / "ledger.db"
    [first] = dispatch(Dispatcher(registry(calls, write_answer=_write_content()), ledger=SQLiteLedger(db)), turn,
                       mode)
    [again] = dispatch(Dispatcher(registry(calls, write_answer=None), ledger=SQLiteLedger(db)), turn, mode)
    assert calls.runs == {"save": 1}
    assert again.parts == first.parts == _write_content().parts
    assert [type(p) for p in again.parts] == [TextPart, ImagePart, ResourcePart, LinkPart]
    assert again.content == {"saved": True}
    assert toolwire.encode_results(turn, [again]) == toolwire.encode_results(turn, [first])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_postgres_replay_keeps_typed_parts(provider, mode, pg_dsn):
    """The same through PostgresLedger (arun uses its async methods)."""
    from toolwire.registry.pg_ledger import PostgresLedger

    calls = Calls()
    turn = turn_of(provider, ("save", {"kind": "x"}))
    conversation = f"rich-{provider}-{mode}-{id(calls)}"
    with PostgresLedger(pg_dsn, pool_size=2, timeout=10) as first_ledger, \
            PostgresLedger(pg_dsn, pool_size=2, timeout=10) as second_ledger:
        [first] = dispatch(Dispatcher(registry(calls, write_answer=_write_content()), ledger=first_ledger), turn,
                           mode, conversation_id=conversation)
        [again] = dispatch(Dispatcher(registry(calls, write_answer=None), ledger=second_ledger), turn, mode,
                           conversation_id=conversation)
    assert calls.runs == {"save": 1}
    assert again.parts == first.parts == _write_content().parts
    assert [type(p) for p in again.parts] == [TextPart, ImagePart, ResourcePart, LinkPart]
    assert toolwire.encode_results(turn, [again]) == toolwire.encode_results(turn, [first])


# ==== the cap =====================================================================================================
def _valid_base64_everywhere(encoded: Any) -> None:
    """Every base64 payload in an encoded answer decodes."""
    wire = json.dumps(encoded)
    for data in re.findall(r'"(?:data|file_data|image_url)": "(?:data:[^;]+;base64,)?([A-Za-z0-9+/=]{16,})"', wire):
        binascii.a2b_base64(data, strict_mode=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_large_image_is_left_out_with_a_marker_and_the_rest_kept(provider, mode, toolwire_debug):
    """An image over max_result_bytes is left out whole (never cut into invalid base64), a marker says so, the
    small image and the text stay, and what is sent stays within the limit."""
    big = base64.b64encode(bytes(range(256)) * 4096).decode()  # 1 MiB of image, 1.4 MB of base64
    content = Content(parts=[TextPart(text="two maps:"), ImagePart(data=big, mime_type="image/png"),
                             ImagePart(data=PNG, mime_type="image/png")])

    def maps(area: str) -> Content:
        """Maps."""
        return content

    turn = turn_of(provider, ("maps", {"area": "north"}))
    limit = 64 * 1024
    with capture_logs() as logs:
        [result] = dispatch(Dispatcher(Registry([Tool.from_function(maps, effect="read")]), max_result_bytes=limit),
                            turn, mode)
    assert result.kind is K.OK
    assert result.parts[:2] == [TextPart(text="two maps:"), ImagePart(data=PNG, mime_type="image/png")]
    marker = result.parts[2]
    assert isinstance(marker, TextPart) and "truncated by toolwire" in marker.text and "1 image" in marker.text
    assert any(e["event"] == "dispatch.result_truncated" for e in logs)
    encoded = encoded_and_checked(provider, turn, [result])
    assert len(json.dumps(encoded)) < limit
    _valid_base64_everywhere(encoded)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_long_text_and_structured_are_cut_within_the_limit(provider):
    """A text part over the limit is cut at a character boundary with a marker; a structured object over it
    becomes its JSON text, cut likewise."""
    limit = 4096
    long_text = "é" * 10_000
    for content in (Content(parts=[TextPart(text=long_text), AudioPart(data=WAV, mime_type="audio/wav")]),
                    Content(structured={"rows": ["x" * 100] * 200})):
        def dump(n: int, content: Content = content) -> Content:
            """Dump."""
            return content
        turn = turn_of(provider, ("dump", {"n": 1}))
        [result] = Dispatcher(Registry([Tool.from_function(dump, effect="read")]),
                              max_result_bytes=limit).run(turn, conversation_id="c")
        assert isinstance(result.content, str) and "truncated by toolwire" in result.content
        assert len(result.content.encode()) <= limit
        assert all(isinstance(p, TextPart) for p in result.parts)
        encoded = encoded_and_checked(provider, turn, [result])
        assert len(json.dumps(encoded, ensure_ascii=False).encode()) < limit + 1024


# ==== invalid Content =============================================================================================
BAD: dict[str, Any] = {
    "bad_base64": Content(parts=[ImagePart(data="not base64!", mime_type="image/png")]),
    "unpadded_base64": Content(parts=[ImagePart(data=PNG.rstrip("="), mime_type="image/png")]),
    "base64_with_newlines": Content(parts=[ImagePart(data=PNG[:20] + "\n" + PNG[20:], mime_type="image/png")]),
    "empty_image": Content(parts=[ImagePart(data="", mime_type="image/png")]),
    "pdf_in_image_part": Content(parts=[ImagePart(data=PDF, mime_type="application/pdf")]),
    "image_in_audio_part": Content(parts=[AudioPart(data=PNG, mime_type="image/png")]),
    "mime_without_subtype": Content(parts=[ImagePart(data=PNG, mime_type="image")]),
    "structured_list": Content(structured=[1, 2, 3]),  # type: ignore[arg-type]
    "structured_not_json": Content(structured={"when": object()}),
    "resource_with_both": Content(parts=[ResourcePart(uri="file:///a", text="a", blob=PNG)]),
    "resource_with_neither": Content(parts=[ResourcePart(uri="file:///a")]),
    "resource_empty_uri": Content(parts=[ResourcePart(uri="", text="a")]),
    "resource_bad_blob": Content(parts=[ResourcePart(uri="file:///a", blob="***")]),
    "link_empty_uri": Content(parts=[LinkPart(uri="")]),
    "text_not_a_string": Content(parts=[TextPart(text=5)]),  # type: ignore[arg-type]
    "lone_surrogate": Content(parts=[TextPart(text="\ud800")]),
    "not_a_part": Content(parts=[{"kind": "image"}]),  # type: ignore[list-item]
    "data_not_a_string": Content(parts=[ImagePart(data=12, mime_type="image/png")]),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("mode", MODES)
def test_invalid_content_is_result_unusable_never_an_exception(case, mode, toolwire_debug):
    """Content that cannot be sent is result_unusable with a reason that quotes no value (logged as
    dispatch.content_invalid), for reads; for a write it says the action took effect."""
    bad = BAD[case]

    def show(kind: str) -> Any:
        """Show."""
        return bad

    def save(kind: str) -> Any:
        """Save."""
        return bad

    turn = turn_of("anthropic", ("show", {"kind": "x"}), ("save", {"kind": "x"}))
    reg = Registry([Tool.from_function(show, effect="read"), Tool.from_function(save, effect="write")])
    with capture_logs() as logs:
        read, write = dispatch(Dispatcher(reg), turn, mode)
    for result in (read, write):
        assert result.kind is K.RESULT_UNUSABLE and result.parts is None
        assert "content that cannot be sent" in result.content
        assert "not base64!" not in result.content and "***" not in result.content
    assert "took effect" in write.content and "took effect" not in read.content
    assert sum(e["event"] == "dispatch.content_invalid" for e in logs) == 2
    encoded_and_checked("anthropic", turn, [read, write])


@pytest.mark.parametrize("mode", MODES)
def test_invalid_content_in_a_tool_error_is_result_unusable(mode):
    """A ToolError whose Content cannot be sent is result_unusable too."""
    calls = Calls()
    turn = turn_of("openai-responses", ("fail", {"kind": "x"}))
    [result] = dispatch(Dispatcher(registry(calls, answer=ToolError(BAD["bad_base64"]))), turn, mode)
    assert result.kind is K.RESULT_UNUSABLE and calls.runs == {"fail": 1}


# ==== history ====================================================================================================
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_history_with_rich_results_needs_no_repair(provider):
    """history_messages with rich results (media, errors, structured) is accepted by repair_history unchanged."""
    turn = turn_of(provider, ("show", {"kind": "mixed"}), ("show", {"kind": "image"}),
                   ("fail", {"kind": "content"}))
    results = Dispatcher(registry(Calls(), answer=ERRORS["content"][0])).run(turn, conversation_id="c")
    history = [{"role": "user", "content": "hi"}] if provider != "gemini" else [{"role": "user",
                                                                                 "parts": [{"text": "hi"}]}]
    if provider in ("openai-responses", "gemini-interactions"):
        history = []
    history += toolwire.history_messages(turn, results)
    repaired, report = toolwire.repair_history(provider, history)
    if provider == "gemini":  # these calls came without thought signatures: only the documented sentinel is added
        assert {a.kind.value for a in report.actions} == {"inserted_thought_signature"}
        history = repaired
        repaired, report = toolwire.repair_history(provider, history)
    assert report.actions == [] and repaired == history


def test_bytes_are_taken_as_the_raw_data():
    """Raw bytes given as ``data`` or ``blob`` are the data itself: they are sent base64-encoded."""
    raw = base64.b64decode(PNG)

    def shot(n: int) -> Content:
        """Shot."""
        return Content(parts=[ImagePart(data=raw, mime_type="image/png"),  # type: ignore[arg-type]
                              ResourcePart(uri="file:///r.pdf", mime_type="application/pdf",
                                           blob=base64.b64decode(PDF))])  # type: ignore[arg-type]

    turn = turn_of("anthropic", ("shot", {"n": 1}))
    [result] = Dispatcher(Registry([Tool.from_function(shot, effect="read")])).run(turn, conversation_id="c")
    assert result.kind is K.OK
    assert result.parts == [ImagePart(data=PNG, mime_type="image/png"),
                            ResourcePart(uri="file:///r.pdf", mime_type="application/pdf", blob=PDF)]
